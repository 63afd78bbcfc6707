"""Config validation: errors name the file, the field path and what is allowed; secrets never leak."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from monitor.cli import command_app, main
from monitor.config import database_url, load_config, parse_config, resolve_secret
from monitor.errors import ConfigError

GOOD = """
server: {port: 9000, ingest_token: {env: TG_TOKEN}}
targets:
  spark_event_logs: [{name: logs, path: /tmp/events, poll_interval: 45s}]
  flink_rest: [{name: flink, url: "http://127.0.0.1:8081/"}]
rules:
  watermark_stall: {for: 10m}
receivers:
  - {name: ops, type: webhook, url: "http://127.0.0.1:9/hook", secret: {env: TG_HOOK_SECRET}}
  - {name: slack, type: slack, url: {env: TG_SLACK_URL}}
routes:
  - {receiver: ops, match: {severity: critical}, repeat_interval: 2h}
"""


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "tidegauge.yaml"
    p.write_text(text)
    return p


def test_good_config_parses_durations_to_ms(tmp_path: Path) -> None:
    cfg = load_config(_write(tmp_path, GOOD))
    assert cfg.targets.spark_event_logs[0].poll_interval == 45_000
    assert cfg.routes[0].repeat_interval == 7_200_000
    assert cfg.targets.flink_rest[0].url == "http://127.0.0.1:8081"  # trailing slash dropped
    assert cfg.server.port == 9000


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # wrong type for a nested field: the path is spelled out
        ("server: {port: 70000}", r"server\.port: Input should be less than or equal to 65535"),
        # an unknown key is an error (typos must not be silently ignored)
        ("targets: {spark_eventlogs: []}", r"targets\.spark_eventlogs: unknown field"),
        # the enum's allowed values are listed
        (
            "receivers: [{name: a, type: pagerduty, url: 'http://x'}]",
            r"receivers\[0\]\.type: must be one of 'webhook', 'slack' or 'alertmanager'",
        ),
        # a duration without unit
        ("evaluation_interval: 15", r"evaluation_interval: .*bare number"),
        # a Slack URL written in clear text is refused (it is a credential)
        (
            "receivers: [{name: s, type: slack, url: 'https://hooks.slack.com/services/T/B/X'}]",
            r"receivers\[0\]: .*Slack webhook URL is a secret",
        ),
        # two targets with one name (names label metrics and alerts)
        (
            "targets: {spark_event_logs: [{name: a, path: /x}], flink_rest: [{name: a, url: 'http://h:8081'}]}",
            r"targets: .*target names must be unique.*repeated: a",
        ),
        # a poll interval of zero would poll in a busy loop
        (
            "targets: {spark_event_logs: [{name: a, path: /x, poll_interval: 0s}]}",
            r"targets\.spark_event_logs\[0\]\.poll_interval: Input should be greater than 0",
        ),
        # a route pointing at a missing receiver
        ("routes: [{receiver: nobody}]", r"routes\[0\]\.receiver: no receiver named 'nobody'"),
    ],
)
def test_errors_name_file_and_field(tmp_path: Path, text: str, expected: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError, match=expected) as info:
        load_config(path)
    assert str(path) in str(info.value)


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "server:\n  port: [1,\n")
    with pytest.raises(ConfigError, match=r"line \d+ column \d+"):
        load_config(path)


def test_secret_resolution_never_shows_the_value(tmp_path: Path) -> None:
    cfg = parse_config({"server": {"ingest_token": {"env": "TG_TOKEN"}}})
    ref = cfg.server.ingest_token
    assert ref is not None
    secret = resolve_secret(ref, {"TG_TOKEN": "s3cr3t-value"}, "server.ingest_token")
    assert secret.get_secret_value() == "s3cr3t-value"
    assert "s3cr3t-value" not in repr(secret) and "s3cr3t-value" not in str(secret)
    with pytest.raises(ConfigError, match="environment variable TG_TOKEN is not set"):
        resolve_secret(ref, {}, "server.ingest_token")
    f = tmp_path / "tok"
    f.write_text("from-file\n")
    file_ref = parse_config({"server": {"ingest_token": {"file": str(f)}}}).server.ingest_token
    assert file_ref is not None
    assert resolve_secret(file_ref, {}, "x").get_secret_value() == "from-file"


def test_config_check_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path, GOOD)
    runner = CliRunner()
    monkeypatch.setenv("TG_TOKEN", "t")
    monkeypatch.setenv("TG_HOOK_SECRET", "hook-secret-value")
    monkeypatch.delenv("TG_SLACK_URL", raising=False)
    result = runner.invoke(command_app(), ["config", "check", "-c", str(path)])
    assert result.exit_code != 0
    assert "receivers[1].url: environment variable TG_SLACK_URL is not set" in str(result.exception)
    monkeypatch.setenv("TG_SLACK_URL", "https://hooks.slack.com/services/SECRET")
    result = runner.invoke(command_app(), ["config", "check", "-c", str(path)])
    assert result.exit_code == 0, result.output
    assert "ok (2 targets, 2 receivers, 1 routes)" in result.output
    assert "SECRET" not in result.output and "hook-secret-value" not in result.output


# ---------------------------------------------------------------------------- database URL, limits, messages


@pytest.mark.parametrize(
    "url", ["sqlite:////var/lib/tidegauge/tidegauge.db", "postgresql+psycopg://tg@db.internal:5432/tidegauge"]
)
def test_database_url_without_password_is_accepted(url: str) -> None:
    assert parse_config({"database": url}).database == url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql+psycopg://u:DbPass99@host/db", "database: the URL holds a password"),
        ("postgresql+psycopg://u@host/db?password=DbPass99", "database: the URL holds a password"),
        ("hello DbPass99", "database: not a database URL"),
        ("notaurl://u:DbPass99@@@", "database: unknown database dialect 'notaurl'"),
    ],
)
def test_bad_database_url_is_refused_without_echoing_it(url: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"database": url}, "tg.yaml")
    assert str(info.value).startswith(f"tg.yaml: {expected}")
    assert "DbPass99" not in str(info.value)


def test_database_url_from_a_secret_ref(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "database: {env: TG_DB_URL}\n")
    cfg = load_config(path)
    assert (
        database_url(cfg, {"TG_DB_URL": "postgresql+psycopg://u:pw@h/d"}, "f")
        == "postgresql+psycopg://u:pw@h/d"
    )
    with pytest.raises(ConfigError, match=r"^f: database: environment variable TG_DB_URL is not set$"):
        database_url(cfg, {}, "f")
    with pytest.raises(ConfigError, match=r"^f: database: the secret's value is not a database URL") as info:
        database_url(cfg, {"TG_DB_URL": "hunter2"}, "f")
    assert "hunter2" not in str(info.value)
    assert database_url(parse_config({}), {}, "f") is None  # the per-user default


def test_config_check_resolves_the_database_ref(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    path = _write(tmp_path, "database: {env: TG_DB_URL}\n")
    monkeypatch.setenv("TG_DB_URL", "not a url pw")
    with pytest.raises(SystemExit) as info:
        main(["config", "check", "-c", str(path)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tidegauge: error: {path}: database: the secret's value is not a database URL")
    monkeypatch.setenv("TG_DB_URL", "postgresql+psycopg://u:pw@h/d")
    with pytest.raises(SystemExit) as info:
        main(["config", "check", "-c", str(path)])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"{path}: ok (0 targets, 0 receivers, 0 routes)\n"


def test_max_body_bytes_default_is_the_serve_default() -> None:
    from monitor.commands.serve import _MAX_BODY_OPTION

    assert parse_config({}).server.max_body_bytes == 4 * 1024 * 1024  # 4 MiB
    assert _MAX_BODY_OPTION.default == 4 * 1024 * 1024


def test_messages_have_no_pydantic_prefix_or_top_level_marker() -> None:
    slack = {"receivers": [{"name": "s", "type": "slack", "url": "https://hooks.slack.com/services/X"}]}
    with pytest.raises(ConfigError) as info:
        parse_config(slack, "tg.yaml")
    assert str(info.value) == (
        "tg.yaml: receivers[0]: a Slack webhook URL is a secret: write url: {env: NAME} or url: {file: PATH}"
    )
    dupes = {"receivers": [{"name": "am", "type": "alertmanager", "url": "http://a:9093"}] * 2}
    with pytest.raises(ConfigError) as info:
        parse_config(dupes, "tg.yaml")
    assert str(info.value) == "tg.yaml: receivers: names must be unique; repeated: am"


def test_a_literal_secret_gets_the_ref_syntax() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"server": {"ingest_token": "tok-literal"}}, "tg.yaml")
    assert str(info.value) == (
        "tg.yaml: server.ingest_token: a secret is never written in the config: write {env: NAME} or {file: PATH}"
    )


def test_every_line_of_a_multi_error_message_is_prefixed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "receivers: [{name: s, type: slack, url: 12345}]\nserver: {port: 99999}\n")
    with pytest.raises(SystemExit):
        main(["config", "check", "-c", str(path)])
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) >= 2
    assert all(line.startswith(f"tidegauge: error: {path}: ") for line in lines), lines


def test_config_check_reports_every_problem_of_a_file_in_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Reproducer: the same file took four runs (missing variables one per run, then the schema, then
    # URLs, then routes). Every problem below is reported by the first run.
    path = _write(
        tmp_path,
        """
server: {port: 8321, ingest_token: {env: TG_MISSING_TOKEN}, colour: blue}
targets:
  spark_prometheus: [{name: driver, url: ftp://driver:4040/metrics}]
receivers:
  - {name: ops, type: webhook, url: https://hooks.example/tg, secret: {env: TG_MISSING_HOOK_SECRET}}
  - {name: chat, type: slack, url: {env: TG_MISSING_SLACK_URL}}
routes:
  - {receiver: pager, match: {severity: critical}}
rules:
  watermark_stall: {for: -5m}
""",
    )
    for name in ("TG_MISSING_TOKEN", "TG_MISSING_HOOK_SECRET", "TG_MISSING_SLACK_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit) as info:
        main(["config", "check", "-c", str(path)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    expected = [
        "server.colour: unknown field",  # schema
        "targets.spark_prometheus[0].url: must start with http:// or https://",  # URLs
        "routes[0].receiver: no receiver named 'pager'",  # references
        "server.ingest_token: environment variable TG_MISSING_TOKEN is not set",  # every missing variable
        "receivers[0].secret: environment variable TG_MISSING_HOOK_SECRET is not set",
        "receivers[1].url: environment variable TG_MISSING_SLACK_URL is not set",
        "watermark_stall",  # rule parameters
    ]
    for part in expected:
        assert any(part in line for line in lines), (part, lines)
    assert all(line.startswith(f"tidegauge: error: {path}: ") for line in lines), lines


def test_config_check_reports_what_run_would_refuse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A silence end time `run` cannot read used to pass `config check` and stop `run`.
    path = _write(tmp_path, "silences: [{matchers: {job_id: q-1}, ends_at: next tuesday}]\n")
    with pytest.raises(SystemExit) as info:
        main(["config", "check", "-c", str(path)])
    assert info.value.code == 2
    assert f"{path}: silences[0].ends_at: expected ISO 8601 with offset" in capsys.readouterr().err
