"""``tidegauge silence add|list|expire`` against a real SQLite database."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from monitor.alerts.silences import is_silenced
from monitor.cli import main
from monitor.commands.silence import _positive_duration
from monitor.errors import InputError
from monitor.store.alert_repo import list_silences
from monitor.store.migrate import upgrade
from tests.alerting import migrated_sessions, sqlite_url

LABELS = {"alertname": "watermark_stall", "severity": "critical", "engine": "spark", "job_id": "q-clicks"}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_add_list_expire(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = sqlite_url(tmp_path)
    upgrade(url)
    before = datetime.now(UTC)
    code, out, _ = run(capsys, "silence", "add", "job_id=q-clicks", "alertname=~watermark.*", "-d", "2h",
                       "-m", "deploying the fix", "--author", "ana", "--db", url)  # fmt: skip
    assert code == 0
    silence_id = out.strip()

    code, out, _ = run(capsys, "silence", "list", "--json", "--db", url)
    (doc,) = [json.loads(line) for line in out.splitlines()]
    assert doc["id"] == silence_id and doc["active"] is True
    assert doc["matchers"] == [
        {"name": "job_id", "op": "=", "value": "q-clicks"},
        {"name": "alertname", "op": "=~", "value": "watermark.*"},
    ]
    assert (doc["created_by"], doc["comment"]) == ("ana", "deploying the fix")

    with migrated_sessions(url) as sessions, sessions() as session:
        stored = list_silences(session, active_at=datetime.now(UTC))
    assert stored[0].ends_at - stored[0].starts_at == timedelta(hours=2)
    assert before <= stored[0].starts_at <= datetime.now(UTC)
    assert is_silenced(LABELS, stored, datetime.now(UTC))
    assert not is_silenced({**LABELS, "job_id": "other"}, stored, datetime.now(UTC))

    assert run(capsys, "silence", "expire", silence_id, "--db", url)[:2] == (0, f"expired {silence_id}\n")
    assert run(capsys, "silence", "list", "--db", url)[1] == ""  # nothing active
    code, out, _ = run(capsys, "silence", "list", "--all", "--db", url)
    assert out.split("\t")[:2] == [silence_id, "expired"]
    code, _, err = run(capsys, "silence", "expire", silence_id, "--db", url)
    assert code == 2 and "no active or pending silence" in err


def test_add_refuses_a_silence_muting_everything(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = sqlite_url(tmp_path)
    upgrade(url)
    code, out, err = run(capsys, "silence", "add", "job_id=~.*", "--db", url)
    assert (code, out) == (2, "")
    assert err.startswith("tidegauge: error: matchers job_id=~.*: at least one matcher must not match the empty")
    assert run(capsys, "silence", "list", "--all", "--db", url)[1] == ""


def test_add_warns_about_a_label_tidegauge_never_sets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = sqlite_url(tmp_path)
    upgrade(url)
    code, out, err = run(capsys, "silence", "add", "jobid=q-clicks", "--db", url)
    assert code == 0 and out.strip()  # stored all the same: the warning is advice
    assert err.startswith("tidegauge: warning: matcher label 'jobid' is never set by tidegauge (known: ")
    assert run(capsys, "silence", "add", "job_id=q-clicks", "--db", url)[2] == ""  # known: no warning


def test_expiring_a_pending_silence_shows_it_expired(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = sqlite_url(tmp_path)
    upgrade(url)
    starts = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    code, out, _ = run(capsys, "silence", "add", "job_id=q-clicks", "--starts", starts, "-d", "1h", "--db", url)
    silence_id = out.strip()
    assert run(capsys, "silence", "list", "--all", "--db", url)[1].split("\t")[:2] == [silence_id, "pending"]

    assert run(capsys, "silence", "expire", silence_id, "--db", url)[:2] == (0, f"expired {silence_id}\n")
    out = run(capsys, "silence", "list", "--all", "--db", url)[1]
    assert out.split("\t")[:2] == [silence_id, "expired"]
    doc = json.loads(run(capsys, "silence", "list", "--all", "--json", "--db", url)[1])
    assert (doc["state"], doc["active"]) == ("expired", False)
    code, _, err = run(capsys, "silence", "expire", silence_id, "--db", url)  # already expired
    assert code == 2 and "no active or pending silence" in err


@pytest.mark.parametrize(
    "argv,message",
    [
        (["silence", "add", "nolabel"], "invalid matcher 'nolabel'"),
        (["silence", "add", "a=~("], "invalid regex"),
        (["silence", "add", "a=b", "-d", "soon"], "--duration: cannot parse 'soon' as a duration"),
        (["silence", "add", "a=b", "-d", "1h", "--until", "2026-12-01T00:00:00Z"], "not both"),
        (["silence", "add", "a=b", "--until", "2026-12-01T00:00:00"], "--until: expected an ISO 8601 time"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    url = sqlite_url(tmp_path)
    upgrade(url)
    code, _, err = run(capsys, *argv, "--db", url)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_unmigrated_database_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "silence", "list", "--db", sqlite_url(tmp_path))
    assert code == 2 and "tidegauge db upgrade" in err


def test_silence_duration_uses_the_shared_parser_and_must_be_positive() -> None:
    assert _positive_duration("1h30m") == timedelta(minutes=90)
    assert _positive_duration("1d") == timedelta(hours=24)
    assert _positive_duration("1w") == timedelta(days=7)
    assert _positive_duration("1500ms") == timedelta(seconds=1.5)
    assert _positive_duration("1.5h") == timedelta(minutes=90)
    for bad in ("", "h", "5x", "0s", "-1h"):
        with pytest.raises(InputError, match="--duration"):
            _positive_duration(bad)


def test_db_and_silence_take_the_database_from_the_config_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # `run -c FILE` used the config's database while `db` and `silence` only knew --db (or the default)
    url = sqlite_url(tmp_path)
    config = tmp_path / "tidegauge.yaml"
    config.write_text("database: {env: TG_TEST_DB}\n")
    monkeypatch.setenv("TG_TEST_DB", url)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "elsewhere"))  # the default must not be used
    code, out, _ = run(capsys, "db", "upgrade", "-c", str(config))
    assert code == 0 and out.startswith(f"{url}: upgraded from empty (no schema) to ")
    assert run(capsys, "db", "current", "-c", str(config))[0] == 0
    code, out, _ = run(capsys, "silence", "add", "job_id=q-1", "-c", str(config), "-m", "why")
    assert code == 0
    silence_id = out.strip()
    code, out, _ = run(capsys, "silence", "list", "-c", str(config))
    assert out.split("\t")[0] == silence_id
    assert run(capsys, "silence", "expire", silence_id, "-c", str(config))[:2] == (0, f"expired {silence_id}\n")
    assert not (tmp_path / "elsewhere").exists()
    # --db still wins over the file
    other = f"sqlite:///{tmp_path / 'other.db'}"
    code, out, _ = run(capsys, "db", "upgrade", "-c", str(config), "--db", other)
    assert code == 0 and out.startswith(f"{other}: upgraded")
