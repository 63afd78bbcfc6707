"""Hostile event-log files (issue 19) through `tidegauge scan` and the daemon, each run measured in its own
process (tests/hostile/harness.py): the outcome is asserted (a named error, the good log's batches kept,
the process gone after SIGTERM); time and peak memory are recorded for tests/benchmarks/bench_hostile.py.

The files are made here, streamed (the test process stays small: a child's peak RSS as measured from
``wait4`` starts from its parent's at fork), and stay small on disk: a zstd stream of 2 GiB of newlines (a bomb), 2 GiB of ``x``
without a newline (zstd), a sparse 4 GiB file of NULs (``truncate``), a 20 MB line, newline-less lines of
64/256/512 MiB of random ``a``/``b`` (zstd at ~8x, under the bomb ratio: they measure the line reading,
which was quadratic: 64 MiB 1.4 s, 256 MiB 24.7 s, 512 MiB 114 s), and a file of unknown codec. The good
log is the recorded real Spark 4.3.0 ``eventlog_trimmed.jsonl`` (progress batches 0-11).
"""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
import zstandard

from monitor.store import upgrade
from tests.daemon_process import free_port, metric_values
from tests.hostile.harness import record, run_measured, tidegauge_argv

MIB = 1 << 20
GIB = 1 << 30
BATCHES = list(range(12))  # progress batches of the recorded log
GOOD_NAME = "local-1795951957158.jsonl"
#: A scan's deadline, start-up included (importing tidegauge alone takes 2-8 s on a loaded 2-core machine:
#: compare the "good log alone" case). The daemon's deadline is the 10 s from SIGTERM to exit.
SCAN_DEADLINE_S = 20.0  # sorts after the hostile "app-*" files: read after them


def _zstd_stream(path: Path, pieces: Iterator[bytes], level: int = 3) -> None:
    with path.open("wb") as raw, zstandard.ZstdCompressor(level=level).stream_writer(raw, closefd=False) as out:
        for piece in pieces:
            out.write(piece)


def _repeat(block: bytes, total: int) -> Iterator[bytes]:
    for _ in range(total // len(block)):
        yield block


_AB = bytes.maketrans(bytes(range(256)), b"ab" * 128)


def _random_ab(total: int) -> Iterator[bytes]:
    """``total`` bytes of random ``a``/``b`` (1 bit of entropy a byte: zstd keeps them at ~1/8)."""
    for _ in range(total // (16 * MIB)):
        yield os.urandom(16 * MIB).translate(_AB)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, recorded_fixtures: Path) -> dict[str, Path]:
    """One directory per case: the hostile file, and a copy of the good log beside it or (a long line) the
    good log's lines after the hostile line in the same file."""
    root = tmp_path_factory.mktemp("hostile-eventlog")
    good = (recorded_fixtures / "spark" / "real-4.3.0" / "eventlog_trimmed.jsonl").read_bytes()
    out: dict[str, Path] = {}

    def case(name: str, beside: bool = True) -> Path:
        directory = root / name
        directory.mkdir()
        if beside:
            (directory / GOOD_NAME).write_bytes(good)
        out[name] = directory
        return directory

    _zstd_stream(case("newline-bomb") / "app-bomb.zstd", _repeat(b"\n" * (16 * MIB), 2 * GIB))
    _zstd_stream(case("no-newline-2g") / "app-x.zstd", _repeat(b"x" * (16 * MIB), 2 * GIB))
    with (case("sparse-4g") / "app-nul").open("wb") as sparse:
        sparse.write(b'{"Event":"')  # starts like an event log (so `scan` reads it as one), then a hole
        sparse.truncate(4 * GIB)
    (case("line-20mb", beside=False) / "app-long.jsonl").write_bytes(b'{"Event":"' + b"y" * 20_000_000 + b'"}\n' + good)
    for size in (64, 256, 512):
        _zstd_stream(
            case(f"no-newline-{size}m", beside=False) / "app-ab.zstd",
            itertools.chain(_random_ab(size * MIB), [b"\n" + good]),  # streamed: never all in memory
            level=1,
        )
    (case("unknown-codec") / "app-1.gz").write_bytes(b"\x1f\x8b\x08\x00" + b"\x00" * 100)
    return out


def _scan(directory: Path) -> tuple[Any, dict[str, Any], str]:
    measured = run_measured(tidegauge_argv("scan", str(directory), "--format", "json"))
    assert not measured.killed
    report = json.loads(measured.stdout) if measured.stdout.strip() else {}
    return measured, report, measured.stderr


def _batches(report: dict[str, Any]) -> list[int]:
    return sorted(b["batch_id"] for q in report.get("queries", []) for b in q["batches"])


def test_scan_good_log_alone_is_the_baseline(files: dict[str, Path]) -> None:
    measured, report, _ = _scan(files["newline-bomb"] / GOOD_NAME)
    record("eventlog scan: baseline, the good log alone", measured, deadline_s=SCAN_DEADLINE_S)
    assert measured.returncode == 0 and _batches(report) == BATCHES


def test_scan_zstd_bomb_of_newlines(files: dict[str, Path]) -> None:
    measured, report, stderr = _scan(files["newline-bomb"])
    record("eventlog scan: zstd bomb, 2 GiB of newlines", measured, deadline_s=SCAN_DEADLINE_S)
    assert measured.returncode == 2
    assert "app-bomb.zstd: a zstd bomb" in stderr and "set aside" in stderr
    assert _batches(report) == BATCHES


def test_scan_two_gib_without_a_newline(files: dict[str, Path]) -> None:
    measured, report, stderr = _scan(files["no-newline-2g"])
    record("eventlog scan: 2 GiB without a newline (zstd)", measured, deadline_s=SCAN_DEADLINE_S)
    assert measured.returncode == 2
    assert "app-x.zstd: line 1: longer than 8388608 bytes" in stderr  # the line, then the file as a bomb
    assert "app-x.zstd: a zstd bomb" in stderr
    assert _batches(report) == BATCHES


def test_scan_sparse_file_of_nuls(files: dict[str, Path]) -> None:
    measured, report, stderr = _scan(files["sparse-4g"])
    record("eventlog scan: sparse 4 GiB of NULs", measured, deadline_s=SCAN_DEADLINE_S)
    assert measured.returncode == 2
    assert "app-nul: a sparse file: 4294967296 bytes stored in" in stderr
    assert _batches(report) == BATCHES


def test_scan_twenty_mb_line_is_skipped_and_the_rest_of_the_file_read(files: dict[str, Path]) -> None:
    measured, report, stderr = _scan(files["line-20mb"])
    record("eventlog scan: one 20 MB line", measured, deadline_s=SCAN_DEADLINE_S)
    assert measured.returncode == 2
    assert "app-long.jsonl: line 1: longer than 8388608 bytes (the line limit, max_line_bytes); line skipped" in stderr
    assert _batches(report) == BATCHES  # the lines after the long one



@pytest.mark.parametrize("size_mib", [64, 256, 512])
def test_scan_newline_less_line_is_read_in_linear_time(files: dict[str, Path], size_mib: int) -> None:
    # before: 64 MiB 1.4 s, 256 MiB 24.7 s, 512 MiB 114 s (quadratic); the report shows the figures now
    measured, report, stderr = _scan(files[f"no-newline-{size_mib}m"])
    record(f"eventlog scan: {size_mib} MiB line without a newline (zstd)", measured, deadline_s=SCAN_DEADLINE_S)
    assert measured.returncode == 2
    assert "app-ab.zstd: line 1: longer than 8388608 bytes" in stderr and "bomb" not in stderr
    assert _batches(report) == BATCHES  # the lines after the long one


def test_scan_unknown_codec(files: dict[str, Path]) -> None:
    measured = run_measured(tidegauge_argv("scan", str(files["unknown-codec"] / "app-1.gz")))
    record("eventlog scan: unknown codec", measured, deadline_s=SCAN_DEADLINE_S)
    assert measured.returncode == 2
    assert "unknown compression codec 'gz'" in measured.stderr


def _healthz(base: str) -> dict[str, Any] | None:
    try:
        response = httpx.get(f"{base}/healthz", timeout=2.0)
    except httpx.TransportError:
        return None
    return response.json() if response.status_code in (200, 503) else None


def _stored_batches(db_path: Path) -> list[int]:
    try:
        with sqlite3.connect(db_path, timeout=5) as conn:
            rows = conn.execute(
                "SELECT samples.batch_id FROM samples WHERE samples.kind = 'progress' AND samples.scope_source IS NULL"
            ).fetchall()
    except sqlite3.OperationalError:
        return []
    return sorted(r[0] for r in rows)


def test_daemon_sets_the_bombs_aside_and_keeps_the_good_log(files: dict[str, Path], tmp_path: Path) -> None:
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    for name in ("newline-bomb", "no-newline-2g", "sparse-4g", "unknown-codec"):
        for path in files[name].iterdir():
            if path.name != GOOD_NAME:
                os.link(path, hostile / path.name)  # same inode: the sparse file stays sparse
    good = files["newline-bomb"] / GOOD_NAME
    db_path = tmp_path / "tg.db"
    upgrade(f"sqlite:///{db_path}")
    port = free_port()
    config = {
        "server": {"host": "127.0.0.1", "port": port},
        "targets": {
            "spark_event_logs": [
                {"name": "hostile", "path": str(hostile), "poll_interval": "200ms"},
                {"name": "good", "path": str(good), "poll_interval": "200ms"},
            ]
        },
        "evaluation_interval": "500ms",
    }
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(config))
    seen: dict[str, Any] = {}

    def settled() -> bool:
        health = _healthz(f"http://127.0.0.1:{port}")
        if health is None:
            return False
        targets = {t["name"]: t for t in health.get("targets", [])}
        hostile_target = targets.get("hostile")
        if hostile_target is None or hostile_target["polls"] < 10:  # enough polls to see a re-report
            return False
        seen["health"] = health
        seen["metrics"] = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2.0).text
        seen["batches"] = _stored_batches(db_path)
        return bool(seen["batches"])

    measured = run_measured(
        tidegauge_argv("run", "-c", str(config_path), "--db", f"sqlite:///{db_path}"),
        terminate_when=settled,
        kill_after_s=90,
    )
    record("eventlog daemon: bombs beside a good log, then SIGTERM", measured, deadline_s=10)
    assert not measured.killed and measured.returncode == 0, measured.stderr[-2000:]
    assert seen["batches"] == BATCHES
    targets = {t["name"]: t for t in seen["health"]["targets"]}
    by_kind = targets["hostile"]["errors_by_kind"]
    # each hostile file reported once, however many polls: 2 bombs + the sparse file, 1 codec, 1 long line
    assert by_kind == {"bomb": 3, "codec": 1, "line_too_long": 1}
    counted = {
        labels["kind"]: value
        for labels, value in metric_values(seen["metrics"], "tidegauge_collector_errors_total")
        if labels["target"] == "hostile" and value
    }
    assert counted == {"bomb": 3.0, "codec": 1.0, "line_too_long": 1.0}
    assert targets["good"]["errors_total"] == 0 and targets["good"]["up"] and targets["hostile"]["up"]
    assert "database is locked" not in measured.stderr
