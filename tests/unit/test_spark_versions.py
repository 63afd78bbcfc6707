"""``WatermarkConfig.spark_version`` / ``whatif --spark-version``: where Spark releases differ, the engine
follows the one named. Expected values are the recorded real runs in
tests/fixtures/spark/late-filter-versions (PySpark 3.3.4 and 4.3.0, see its PROVENANCE.md)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from monitor.versions import SparkVersionError, late_filter_uses_previous_batch, parse_spark_version
from monitor.watermark import EventsTable, Tumbling, WatermarkConfig, replay
from tests.cli import run_cli as run

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "spark" / "late-filter-versions"
SEC_US = 1_000_000
# the probe's three files, one per batch, read back to back (no no-data batch between them)
PROBE = "event_time,batch\n1970-01-01T00:00:10Z,0\n1970-01-01T00:00:30Z,1\n1970-01-01T00:00:15Z,2\n"


# the probe's cases: (event times in us per file = batch, window size in ms)
CASES = {
    "basic": ([[10 * SEC_US], [30 * SEC_US], [15 * SEC_US]], 10_000),
    "boundary": (
        [[10_000_500], [10_000_500, 10_000_000, 10_000_400, 9_999_999], [10_000_500, 10_000_000]],
        1_000,
    ),
}


def _recorded(case: str, version: str) -> tuple[list[int], list[int]]:
    """(numRowsDroppedByWatermark per batch, the emitted windows' counts) of a recorded run."""
    lines = (RECORDED / f"{case}-pyspark-{version}.txt").read_text().splitlines()
    dropped = [int(line.rsplit(" ", 1)[1]) for line in lines if line.startswith("batch ")]
    counts = [int(line.rsplit(" ", 1)[1]) for line in lines if line.startswith("window ")]
    return dropped, counts


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize(("version", "recorded"), [((3, 3), "3.3.4"), (None, "4.3.0"), ((4, 3), "4.3.0")])
def test_the_engine_drops_what_the_recorded_release_dropped(
    case: str, version: tuple[int, int] | None, recorded: str
) -> None:
    files, window_ms = CASES[case]
    times = [t for f in files for t in f]
    batch = [i for i, f in enumerate(files) for _ in f]
    events = EventsTable.from_columns(np.array(times, dtype=np.int64), batch=batch)
    config = WatermarkConfig(delay_ms=0, window=Tumbling(window_ms), backlog=True, spark_version=version)
    result = replay(events, config)
    dropped, counts = _recorded(case, recorded)
    assert [len(b.late_rows) for b in result.batches] == dropped
    assert [int(c) for b in result.batches for c in b.emitted.count] == counts


def test_recorded_releases_differ_where_the_rule_says() -> None:
    assert _recorded("basic", "3.3.4") == ([0, 0, 1], [1]) and _recorded("basic", "4.3.0") == ([0, 0, 0], [2])
    assert _recorded("boundary", "3.3.4") == ([0, 1, 0], []) and _recorded("boundary", "4.3.0") == ([0, 0, 0], [1])
    assert not late_filter_uses_previous_batch((3, 3)) and late_filter_uses_previous_batch((3, 4))
    assert parse_spark_version("3.5.1") == (3, 5) and parse_spark_version("4.1.0-preview2") == (4, 1)
    for bad in ("2.4.8", "x", "3"):
        with pytest.raises(SparkVersionError, match="spark version"):
            parse_spark_version(bad)


def test_whatif_spark_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "probe.csv"
    f.write_text(PROBE, encoding="utf-8")
    base = ["whatif", str(f), "--delay", "0s", "--window", "10s", "--backlog", "--format", "json"]
    code, out, _ = run([*base, "--spark-version", "3.3"], capsys)
    assert code == 0 and json.loads(out)["summary"]["dropped_rows"] == 1
    code, out, _ = run(base, capsys)
    assert code == 0 and json.loads(out)["summary"]["dropped_rows"] == 0
    code, _, err = run([*base, "--spark-version", "2.4"], capsys)
    assert code == 2 and "--spark-version: spark version '2.4': tidegauge models Spark 3.x and 4.x" in err
    code, _, err = run([*base[:2], "--engine", "flink", "--delay", "0s", "--window", "10s", "--spark-version", "3.3"], capsys)
    assert code == 2 and "--spark-version" in err
