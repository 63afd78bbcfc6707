"""``tidegauge check kafka`` when it cannot run: without the ``kafka`` extra it names the install command;
an unreachable bootstrap server is one plain sentence after one request timeout; under ``--format json``
each failure is also one JSON document on stdout (``{"error": ...}``). Exit code 2 throughout."""

from __future__ import annotations

import json
import sys

import pytest

from collectors.kafka.admin import KafkaAdminSource
from tests.cli import run_cli
from tests.servers import black_hole, refused_port

NO_CLIENT = (
    "check kafka needs the Kafka client: pip install 'tidegauge[kafka]' "
    "(import of confluent_kafka halted; None in sys.modules)"
)

NO_ANSWER = "no broker answered (is the address right, are the brokers up, and is the security protocol theirs?)"


@pytest.fixture
def without_confluent_kafka(monkeypatch: pytest.MonkeyPatch) -> None:
    # what an install without the extra looks like to `import confluent_kafka`: an ImportError
    for name in [m for m in sys.modules if m == "confluent_kafka" or m.startswith("confluent_kafka.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)


@pytest.fixture
def requests_made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The admin requests a check makes, in order (the real methods still run)."""
    made: list[str] = []
    for name in ("topics", "list_groups", "describe", "committed", "log_offsets", "record_times"):
        real = getattr(KafkaAdminSource, name)

        def spy(self: KafkaAdminSource, *args: object, _real: object = real, _name: str = name) -> object:
            made.append(_name)
            return _real(self, *args)  # type: ignore[operator]

        monkeypatch.setattr(KafkaAdminSource, name, spy)
    return made


def test_without_the_extra_the_install_command_is_named(
    without_confluent_kafka: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(["check", "kafka", "127.0.0.1:9092"], capsys)
    assert (code, out, err) == (2, "", f"tidegauge: error: {NO_CLIENT}\n")


def test_without_the_extra_json_gets_an_error_document(
    without_confluent_kafka: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(["check", "kafka", "127.0.0.1:9092", "--format", "json"], capsys)
    assert code == 2
    assert json.loads(out) == {"error": NO_CLIENT}
    assert err == f"tidegauge: error: {NO_CLIENT}\n"


def test_a_refused_bootstrap_is_one_plain_line_after_one_request(
    requests_made: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    port = refused_port()
    code, out, err = run_cli(["check", "kafka", f"127.0.0.1:{port}", "--timeout", "2s"], capsys)
    assert (code, out) == (2, "")
    assert err == (
        f"tidegauge: error: kafka check (127.0.0.1:{port}, PLAINTEXT): cannot reach the cluster within 2s: "
        f"{NO_ANSWER}\n"
    )
    # one metadata request, then the error: no second timeout spent listing or describing groups
    assert requests_made == ["topics"]


def test_a_silent_bootstrap_fails_after_one_request_timeout_with_a_json_document(
    requests_made: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # the port accepts connections and never answers: the metadata request runs into --timeout
    with black_hole() as port:
        code, out, err = run_cli(
            ["check", "kafka", f"127.0.0.1:{port}", "--group", "g", "--timeout", "1s", "--format", "json"], capsys
        )
    assert code == 2
    message = f"kafka check (127.0.0.1:{port}, PLAINTEXT): cannot reach the cluster within 1s: {NO_ANSWER}"
    assert json.loads(out) == {"error": message}
    assert err == f"tidegauge: error: {message}\n"
    assert requests_made == ["topics"]


def test_a_bad_option_under_json_is_an_error_document(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["check", "kafka", "127.0.0.1:9092", "--lag-seconds", "soon", "--format", "json"], capsys)
    assert code == 2
    assert json.loads(out) == {"error": "--lag-seconds: 'soon' (allowed: exact, interpolated, none)"}


def test_check_flink_unreachable_under_json_is_an_error_document(capsys: pytest.CaptureFixture[str]) -> None:
    port = refused_port()
    code, out, err = run_cli(["check", "flink", f"http://127.0.0.1:{port}", "--interval", "0s", "--format", "json"], capsys)
    assert code == 2
    [line] = err.splitlines()
    assert json.loads(out) == {"error": line.removeprefix("tidegauge: error: ")}
    assert f"cannot connect to http://127.0.0.1:{port}/jobs/overview" in line
