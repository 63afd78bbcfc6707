"""Every command that opens the database reports an unusable one on one line (exit code 2), password hidden.

Real parts: a TCP port on loopback with no listener (psycopg gets "Connection refused"), the mysql dialect
without its MySQLdb driver installed, SQLite files in ``tmp_path``.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from monitor.cli import main
from monitor.store.migrate import downgrade, upgrade

PASSWORD = "s3cretpw"  # a test value, checked never to be printed


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def closed_pg_url() -> str:
    """A PostgreSQL URL whose port has no listener (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"postgresql+psycopg://u:{PASSWORD}@127.0.0.1:{port}/x"


@pytest.mark.parametrize(
    "argv",
    [
        ["serve"],
        ["silence", "list"],
        ["silence", "add", "job_id=q1"],
        ["db", "current"],
        ["db", "upgrade"],
        ["scan", "--demo"],
    ],
)
def test_unreachable_postgres_is_one_line_exit_2(
    argv: list[str], closed_pg_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIDEGAUGE_INGEST_TOKEN", "0123456789abcdef0123")
    code, _, err = run(capsys, *argv, "--db", closed_pg_url)
    assert code == 2
    lines = [line for line in err.splitlines() if line.startswith("tidegauge: error:")]
    redacted = closed_pg_url.replace(PASSWORD, "***")
    assert len(lines) == 1, err
    assert lines[0].startswith(f"tidegauge: error: database {redacted}: ")
    assert "Connection refused" in lines[0]
    assert "Traceback" not in err and PASSWORD not in err


def test_missing_driver_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "db", "current", "--db", f"mysql://u:{PASSWORD}@h/d")
    assert code == 2
    assert err == (
        "tidegauge: error: database mysql://u:***@h/d: database driver not installed: "
        "No module named 'MySQLdb' (install the DBAPI package for mysql)\n"
    )


@pytest.mark.parametrize("argv", [["db", "current"], ["db", "downgrade", "base"], ["silence", "list"],
                                  ["scan", "--demo"]])  # fmt: skip
def test_missing_sqlite_file_is_not_created(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "sub" / "tg.db"
    url = f"sqlite:///{path}"
    code, _, err = run(capsys, *argv, "--db", url)
    assert code == 2
    assert err == f"tidegauge: error: no database at {path}: run `tidegauge db upgrade --db {url}`\n"
    assert list(tmp_path.iterdir()) == []


def test_only_db_upgrade_creates_the_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sub" / "tg.db"
    code, out, _ = run(capsys, "db", "upgrade", "--db", f"sqlite:///{path}")
    assert code == 0 and "upgraded from empty (no schema)" in out
    assert path.is_file()


def test_db_current_exit_code_says_whether_at_head(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(url)
    code, out, _ = run(capsys, "db", "current", "--db", url)
    assert code == 0 and out.endswith("(head)\n")
    downgrade(url, "base")  # file exists, schema empty
    code, out, _ = run(capsys, "db", "current", "--db", url)
    assert code == 1 and "empty (no schema)" in out
    upgrade(url, "0001_initial")  # behind head
    code, out, _ = run(capsys, "db", "current", "--db", url)
    assert code == 1 and "0001_initial (code needs" in out
