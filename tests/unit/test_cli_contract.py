"""One contract for bad input (issue 11): our own error type, one line naming the file and field, exit code
2; an internal error is exit code 3 with one line, the traceback only under the global ``--debug``.

Inputs are the recorded real progress document (tests/fixtures/spark/real-4.3.0, PySpark 4.3.0's
``query.lastProgress`` of batch 7) as JSON lines, with one value changed to one the model cannot hold.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from monitor.store import upgrade
from tests.cli import run_cli as run

RECORDED = "progress_pt_b7_memorysink_listener.json"


def _recorded(spark_fixtures: Path) -> dict[str, Any]:
    doc = json.loads((spark_fixtures / RECORDED).read_text())
    assert isinstance(doc, dict)
    return doc


def _lines(spark_fixtures: Path, poison: str, batches: int = 3) -> str:
    """JSON lines: batches 7, 8, 9 of the recorded document (times one minute apart), the middle one
    replaced by ``poison`` (a JSON line with ``@@`` standing for the middle document's batch id)."""
    doc = _recorded(spark_fixtures)
    out = []
    for i in range(batches):
        doc = dict(doc, batchId=7 + i, timestamp=f"2026-11-29T11:3{5 + i}:50.000Z")
        out.append(json.dumps(doc) if i != 1 else poison)
    return "\n".join(out) + "\n"


def _with(spark_fixtures: Path, key: str, literal: str) -> str:
    doc = dict(_recorded(spark_fixtures), batchId=8, timestamp="2026-11-29T11:36:50.000Z")
    doc[key] = "@@POISON@@"
    return json.dumps(doc).replace('"@@POISON@@"', literal)


CASES = {
    "timestamp_9999_minus_offset": ("timestamp", '"9999-12-31T23:59:59-23:59"', "field timestamp"),
    "timestamp_0001_plus_offset": ("timestamp", '"0001-01-01T00:00:00+01:00"', "field timestamp"),
    "rows_1e30": ("numInputRows", "1e30", "field numInputRows"),
    "rows_400_digits": ("numInputRows", "7" * 400, "field numInputRows"),
    "rows_4301_digits": ("numInputRows", "7" * 4301, "a number too long to read"),
    "rows_nan": ("numInputRows", "NaN", "field numInputRows"),
    "rows_infinity": ("numInputRows", "-Infinity", "field numInputRows"),
    "batch_2_pow_63": ("batchId", str(2**63), "field batchId"),
    "nested_5000": ("durationMs", "[" * 5000 + "]" * 5000, "nested too deeply"),
    "surrogate_in_name": ("name", '"\\ud83d"', "field name"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_value_the_model_cannot_hold_is_one_error_line_exit_2(
    case: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, spark_fixtures: Path
) -> None:
    key, literal, named = CASES[case]
    path = tmp_path / "progress.jsonl"
    path.write_text(_lines(spark_fixtures, _with(spark_fixtures, key, literal)))
    code, out, err = run(["scan", str(path), "--format", "json"], capsys)
    assert code == 2
    [line] = err.splitlines()
    assert line.startswith(f"tidegauge: error: {path}: line 2: ") and named in line
    assert len(line) < 400 and "Traceback" not in err
    # the documents around it are read
    [query] = json.loads(out)["queries"]
    assert [b["batch_id"] for b in query["batches"]] == [7, 9]


def test_scan_db_of_1e30_rows_stores_the_good_batches_not_an_overflow(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spark_fixtures: Path
) -> None:
    # issue 11: "1e30 stored by scan --db -> SQLite overflow"
    url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(url)
    path = tmp_path / "progress.jsonl"
    path.write_text(_lines(spark_fixtures, _with(spark_fixtures, "numInputRows", "1e30")))
    code, _, err = run(["scan", str(path), "--db", url], capsys)
    assert code == 2
    assert "field numInputRows" in err and "overflow" not in err.lower() and "internal error" not in err
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        batches = conn.execute(sa.text("SELECT batch_id FROM samples WHERE scope_source IS NULL")).scalars().all()
        rows = conn.execute(sa.text("SELECT max(num_input_rows) FROM samples")).scalar()
    engine.dispose()
    assert sorted(batches) == [7, 9] and rows == 0


def test_an_empty_inprogress_file_is_a_note_and_exit_0(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # README: "if it holds no complete event yet, a note says so and the exit code stays 0"
    path = tmp_path / "local-1795951957158.inprogress"
    path.touch()
    code, _, err = run(["scan", str(path)], capsys)
    assert code == 0
    assert err.strip() == f"tidegauge: note: {path}: still being written by Spark (in progress); it holds no complete event yet"


def _explode(*args: object, **kwargs: object) -> int:
    raise KeyError("a bug")


def test_an_internal_error_is_one_line_exit_3_and_the_traceback_only_with_debug(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import monitor.commands.scan as scan_command

    monkeypatch.setattr(scan_command, "_run_scan", _explode)  # stands for any bug below the CLI
    code, _, err = run(["scan", str(tmp_path)], capsys)
    assert code == 3
    assert err.splitlines() == ["tidegauge: internal error: KeyError: 'a bug' (run with --debug for the traceback)"]
    code, _, err = run(["--debug", "scan", str(tmp_path)], capsys)
    assert code == 3
    assert "Traceback (most recent call last)" in err and "_explode" in err
    assert err.splitlines()[-1] == "tidegauge: internal error: KeyError: 'a bug'"


def test_bad_input_is_exit_2_with_the_traceback_only_with_debug(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(["scan", str(tmp_path / "missing")], capsys)
    assert code == 2 and "Traceback" not in err
    assert err.splitlines() == [f"tidegauge: error: {tmp_path / 'missing'}: no such file or directory"]


def test_a_parser_bug_on_one_line_is_quarantined_and_scan_exits_3(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, spark_fixtures: Path
) -> None:
    import collectors.spark.eventlog as eventlog

    real = eventlog.parse_listener_event
    calls = {"n": 0}

    def buggy(*args: Any, **kwargs: Any) -> Any:  # stands for a bug met on the 2nd streaming line only
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyError("a bug")
        return real(*args, **kwargs)

    monkeypatch.setattr(eventlog, "parse_listener_event", buggy)
    log = spark_fixtures / "eventlog_trimmed.jsonl"
    code, out, err = run(["scan", str(log), "--format", "json"], capsys)
    assert code == 3
    [line] = err.splitlines()
    assert line.startswith(f"tidegauge: internal error: {log}: line ") and "KeyError" in line
    assert calls["n"] > 2 and json.loads(out)["queries"]  # the other lines were read


def test_object_store_libraries_log_only_under_debug(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # gcsfs/aiohttp wrote ~100 lines of raw, unredacted tracebacks for one unreachable gs:// URL; tidegauge
    # reports the failure itself, so their logs are shown only with --debug
    import logging

    run(["scan", str(tmp_path / "missing")], capsys)
    assert logging.getLogger("gcsfs").level == logging.CRITICAL
    assert logging.getLogger("aiobotocore").level == logging.CRITICAL
    logging.getLogger("gcsfs").setLevel(logging.NOTSET)
    run(["--debug", "scan", str(tmp_path / "missing")], capsys)
    assert logging.getLogger("gcsfs").level == logging.NOTSET
