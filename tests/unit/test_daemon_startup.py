"""Start-up failures of ``tidegauge run`` (a real subprocess): one line on stderr, exit code 2, no traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import yaml

from monitor.store import upgrade
from tests.conftest import REPO_ROOT


def _run(config: dict[str, object], db: str, tmp_path: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "tidegauge.yaml"
    path.write_text(yaml.safe_dump(config))
    return subprocess.run(
        [sys.executable, "-m", "monitor.cli", "run", "-c", str(path), "--db", db, "--log-level", "warning"],
        cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_run_on_a_taken_port_is_one_line_exit_2(tmp_path: Path) -> None:
    # Reproducer: two tracebacks (uvicorn's and ours), exit code 1.
    db = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(db)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out = _run({"server": {"host": "127.0.0.1", "port": port}}, db, tmp_path)
    assert out.returncode == 2
    assert out.stderr.splitlines() == [f"tidegauge: error: cannot listen on 127.0.0.1:{port}: address already in use"]


def test_run_with_a_missing_secret_is_one_line_exit_2(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(db)
    config = {"server": {"host": "127.0.0.1", "port": 0, "ingest_token": {"env": "TG_STARTUP_TEST_TOKEN"}}}
    out = _run(config, db, tmp_path, {"TG_STARTUP_TEST_TOKEN": ""})
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        "tidegauge: error: server.ingest_token: environment variable TG_STARTUP_TEST_TOKEN is not set"
    ]


def test_run_on_a_missing_database_is_one_line_exit_2(tmp_path: Path) -> None:
    out = _run({"server": {"host": "127.0.0.1", "port": 0}}, f"sqlite:///{tmp_path / 'none.db'}", tmp_path)
    assert out.returncode == 2
    [line] = out.stderr.splitlines()
    assert line.startswith(f"tidegauge: error: no database at {tmp_path / 'none.db'}: run `tidegauge db upgrade")
