"""examples/tidegauge.yaml (the README's config example) passes ``tidegauge config check`` and shows every section."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from monitor.cli import main
from monitor.config import Config, ServerConfig, Targets

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tidegauge.yaml"
SECRETS = {
    "TIDEGAUGE_DATABASE_URL": "postgresql+psycopg://tidegauge:pw@db.internal/tidegauge",
    "TIDEGAUGE_INGEST_TOKEN": "0123456789abcdef0123",
    "FLINK_TOKEN": "flink-token",
    "TIDEGAUGE_WEBHOOK_SECRET": "webhook-secret",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/x",
    "TIDEGAUGE_DASHBOARD_TOKEN": "dashboard-token-0123",
}


def check(capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        main(["config", "check", "-c", str(EXAMPLE)])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_config_check_accepts_the_example(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    # Counted by hand in the file: 1 event-log + 1 prometheus + 1 flink + 1 flink-prometheus + 1 kafka
    # + 1 kafka exporter target; ops, slack, am.
    assert check(capsys) == (0, f"{EXAMPLE}: ok (6 targets, 3 receivers, 3 routes)\n", "")


def test_config_check_of_the_example_needs_its_secrets(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in SECRETS:
        monkeypatch.delenv(name, raising=False)
    code, _, err = check(capsys)
    assert code == 2
    # every missing variable in one run, in file order
    assert err == "".join(
        f"tidegauge: error: {EXAMPLE}: {where}: environment variable {name} is not set\n"
        for where, name in [
            ("database", "TIDEGAUGE_DATABASE_URL"),
            ("dashboard.token", "TIDEGAUGE_DASHBOARD_TOKEN"),
            ("server.ingest_token", "TIDEGAUGE_INGEST_TOKEN"),
            ("receivers[0].secret", "TIDEGAUGE_WEBHOOK_SECRET"),
            ("receivers[1].url", "SLACK_WEBHOOK_URL"),
            ("targets.flink_rest[0].bearer_token", "FLINK_TOKEN"),
        ]
    )


def test_the_example_shows_every_section() -> None:
    doc = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    assert set(doc) == set(Config.model_fields)
    assert set(doc["server"]) == set(ServerConfig.model_fields)
    assert set(doc["targets"]) == set(Targets.model_fields)
