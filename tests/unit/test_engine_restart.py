"""Restarts and run kinds (``monitor.watermark.restart``) against what real PySpark 4.3.0 did.

Every expected value is copied from the recorded Spark run of the hand-made scenarios
(``python -m tests.differential.restarts --hand --spark-only --verbose``, FINDINGS.md R1-R4), none is
recomputed with the engine. The events: inputs ``a`` (delay 0) and ``b`` (delay 5 s), 5 s tumbling
windows, counts in append mode; times are seconds after 2026-01-01T00:00:00Z:

    step 0: a 10, b 12     step 1: a 20, b 30     step 2: a 31     step 3: a 22, a 41, b 45
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.watermark import EngineConfigError, replay
from monitor.watermark.restart import QueryRun, replay_restarting, replay_runs, restart_impact
from tests.cli import run_cli as run
from tests.differential.engine_adapter import engine_config, engine_events
from tests.differential.restarts import hand_restart_scenarios

BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def _at(seconds: float) -> int:
    return BASE_MS + int(seconds * 1000)


SCENARIOS = {s.seed: s for s in hand_restart_scenarios()}


def _table(result: object) -> list[tuple[int, str, int, int]]:
    """(batch id, kind, watermark ms, numRowsDroppedByWatermark) per batch."""
    return [
        (b.batch_id, b.kind, b.watermark_ms, b.dropped_by_watermark_metric)
        for b in result.batches  # type: ignore[attr-defined]
    ]


def _windows(result: object) -> list[tuple[int, int, int]]:
    """(batch id, window start ms, count) of every emitted window."""
    return [
        (b.batch_id, int(w.start_ms), int(w.count))
        for b in result.batches  # type: ignore[attr-defined]
        for w in b.emitted.to_list()
    ]


def _replay(seed: int, runs: list[QueryRun]) -> object:
    s = SCENARIOS[seed].base
    return replay_runs(engine_events(s), engine_config(s), runs)


# Spark 900102 (one live query, no restart): a@22 in step 3 is late against 25 s and dropped.
NO_RESTART = [
    (0, "data", 0, 0),
    (1, "no-data", _at(7), 0),
    (2, "data", _at(7), 0),
    (3, "no-data", _at(20), 0),
    (4, "data", _at(20), 0),
    (5, "no-data", _at(25), 0),
    (6, "data", _at(25), 1),
    (7, "no-data", _at(40), 0),
]


def test_one_live_query_matches_spark_without_restart() -> None:
    result = _replay(900102, [QueryRun("live", 4)]).replay  # type: ignore[attr-defined]
    assert _table(result) == NO_RESTART
    assert _windows(result) == [(3, _at(10), 2), (5, _at(20), 1), (7, _at(30), 2)]


def test_min_policy_restart_loses_per_input_watermarks_and_holds_the_watermark() -> None:
    # Spark 900101 (stopped after the no-data batch 3, restarted): step 2 has rows of a only, so b counts
    # as 0 in the new WatermarkTracker and the watermark stays at the checkpointed 20 s (25 s without
    # the restart); a@22 is then in time and counted in window [20 s, 25 s), emitted in batch 6.
    result = _replay(900101, [QueryRun("live", 2), QueryRun("live", 2)])
    assert _table(result.replay) == [  # type: ignore[attr-defined]
        (0, "data", 0, 0),
        (1, "no-data", _at(7), 0),
        (2, "data", _at(7), 0),
        (3, "no-data", _at(20), 0),
        (4, "data", _at(20), 0),
        (5, "data", _at(20), 0),
        (6, "no-data", _at(40), 0),
    ]
    assert _windows(result.replay) == [(3, _at(10), 2), (6, _at(20), 2), (6, _at(30), 2)]  # type: ignore[attr-defined]
    (restart,) = result.restarts  # type: ignore[attr-defined]
    assert (restart.after_batch_id, restart.first_batch_id, restart.watermark_ms) == (3, 4, _at(20))
    assert restart.lost_source_watermarks_ms == {"a": _at(20), "b": _at(25)}
    assert restart.skipped_no_data_batch is False


def test_restart_impact_names_the_kept_row_and_the_input_holding_the_watermark() -> None:
    s = SCENARIOS[900101].base
    events, config = engine_events(s), engine_config(s)
    impact = restart_impact(replay_restarting(events, config, [3]), replay(events, config))
    assert impact.dropped_rows == 0 and impact.dropped_rows_without_restarts == 1
    assert impact.dropped_only_with_restarts == ()
    assert impact.kept_only_with_restarts == (5,)  # a@22, the sixth row of the events (0-based 5)
    (held,) = impact.held_back
    assert (
        held.first_batch_id,
        held.data_batches,
        held.watermark_ms,
        held.watermark_without_restarts_ms,
    ) == (
        5,
        1,
        _at(20),
        _at(25),
    )
    assert held.waiting_for == ("b",)


def test_max_policy_restart_changes_nothing_here() -> None:
    # Spark 900103: under max the global watermark is the largest input's; losing the per-input ones
    # cannot lower it (it never moves back), so the restarted run matches one live query.
    result = _replay(900103, [QueryRun("live", 2), QueryRun("live", 2)])
    assert _table(result.replay) == [  # type: ignore[attr-defined]
        (0, "data", 0, 0),
        (1, "no-data", _at(10), 0),
        (2, "data", _at(10), 0),
        (3, "no-data", _at(25), 0),
        (4, "data", _at(25), 0),
        (5, "no-data", _at(31), 0),
        (6, "data", _at(31), 1),
        (7, "no-data", _at(41), 0),
    ]


def test_once_run_stops_before_its_no_data_batch_and_the_restart_runs_none() -> None:
    # Spark 900104: input a alone, steps a 1 s + 7 s | a 12 s | a 13 s. The Trigger.Once run ends after
    # batch 0 (watermark now 7 s); the restarted live query runs no no-data batch first: batch 1 is
    # step 1's data batch, which evicts and emits window [0 s, 5 s) with its rows.
    result = _replay(900104, [QueryRun("once", 1), QueryRun("live", 2)])
    assert _table(result.replay) == [  # type: ignore[attr-defined]
        (0, "data", 0, 0),
        (1, "data", _at(7), 0),
        (2, "no-data", _at(12), 0),
        (3, "data", _at(12), 0),
        (4, "no-data", _at(13), 0),
    ]
    assert _windows(result.replay) == [(1, _at(0), 1), (2, _at(5), 1)]  # type: ignore[attr-defined]
    assert result.restarts[0].skipped_no_data_batch is True  # type: ignore[attr-defined]


def test_available_now_runs_batches_back_to_back_and_one_no_data_batch_at_the_end() -> None:
    # Spark 900105: two AvailableNow runs of two steps each (maxFilesPerTrigger=1).
    result = _replay(900105, [QueryRun("available_now", 2), QueryRun("available_now", 2)])
    assert _table(result.replay) == [  # type: ignore[attr-defined]
        (0, "data", 0, 0),
        (1, "data", _at(7), 0),
        (2, "no-data", _at(20), 0),
        (3, "data", _at(20), 0),
        (4, "data", _at(20), 0),
        (5, "no-data", _at(40), 0),
    ]


def test_once_runs_never_run_a_no_data_batch() -> None:
    # Spark 900106: four Trigger.Once runs, one batch each; the last windows are never emitted.
    result = _replay(900106, [QueryRun("once", 1)] * 4)
    assert _table(result.replay) == [  # type: ignore[attr-defined]
        (0, "data", 0, 0),
        (1, "data", _at(7), 0),
        (2, "data", _at(20), 0),
        (3, "data", _at(20), 0),
    ]
    assert _windows(result.replay) == [(2, _at(10), 2)]  # type: ignore[attr-defined]


def test_restart_after_a_data_batch_skips_its_no_data_batch() -> None:
    # Spark 900107 (runs live:0, once:1, live:2-3: stopped right after step 1's data batch 2, before
    # the no-data batch 3 of NO_RESTART): the restarted query's first batch is step 2's data batch with
    # the checkpointed 20 s; it emits window [10 s, 15 s) with its rows; b is then held at 0 (R1).
    s = SCENARIOS[900101].base
    result = replay_restarting(engine_events(s), engine_config(s), [2])
    assert _table(result.replay) == [
        (0, "data", 0, 0),
        (1, "no-data", _at(7), 0),
        (2, "data", _at(7), 0),
        (3, "data", _at(20), 0),
        (4, "data", _at(20), 0),
        (5, "no-data", _at(40), 0),
    ]
    assert _windows(result.replay) == [(3, _at(10), 2), (5, _at(20), 2), (5, _at(30), 2)]
    assert result.restarts[0].skipped_no_data_batch is True


@pytest.mark.parametrize(
    ("runs", "message"),
    [
        ([QueryRun("live", 3)], "the runs read 3 data batches but the events make 4"),
        (
            [QueryRun("once", 2), QueryRun("live", 2)],
            "a Trigger.Once run reads everything waiting in one batch",
        ),
        ([QueryRun("live", 0), QueryRun("live", 4)], "at least one data batch"),
        ([QueryRun("weekly", 4)], "run kind 'weekly' is not one of live, once, available_now"),  # type: ignore[arg-type]
    ],
)
def test_bad_run_schedules_are_named(runs: list[QueryRun], message: str) -> None:
    with pytest.raises(EngineConfigError, match=message):
        _replay(900102, runs)


def test_restart_point_beyond_the_last_batch_is_an_error() -> None:
    s = SCENARIOS[900102].base
    with pytest.raises(EngineConfigError, match="the replay's last batch is 7"):
        replay_restarting(engine_events(s), engine_config(s), [7])


# --- tidegauge whatif --restart-after / --run-kind --------------------------------------------------

CSV = (
    "event_time,source,key,batch\n"
    "2026-01-01T00:00:10Z,a,k,0\n"
    "2026-01-01T00:00:12Z,b,k,0\n"
    "2026-01-01T00:00:20Z,a,k,1\n"
    "2026-01-01T00:00:30Z,b,k,1\n"
    "2026-01-01T00:00:31Z,a,k,2\n"
    "2026-01-01T00:00:22Z,a,k,3\n"
    "2026-01-01T00:00:41Z,a,k,3\n"
    "2026-01-01T00:00:45Z,b,k,3\n"
)
ARGS = ["--delay", "a=0s,b=5s", "--window", "5s"]


def _events(tmp_path: Path) -> str:
    path = tmp_path / "events.csv"
    path.write_text(CSV, encoding="utf-8")
    return str(path)


def test_whatif_restart_text_says_what_was_lost_and_what_it_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the file's batch numbers, as the report's batch column shows them: after the no-data batch after
    # file batch 1 (Spark id 3)
    code, out, err = run(["whatif", _events(tmp_path), *ARGS, "--restart-after", "after 1"], capsys)
    assert code == 0, err
    assert (
        "  after the no-data batch after batch 1 (id 3): batch 2 (id 4) starts with the watermark "
        "2026-01-01T00:00:20Z from the checkpoint; the per-input watermarks (a 2026-01-01T00:00:20Z, "
        "b 2026-01-01T00:00:25Z) are lost: only the global one is checkpointed"
    ) in out
    assert (
        "    watermark held back for 1 data batch(es) from batch 3 (id 5) (2026-01-01T00:00:20Z instead of "
        "2026-01-01T00:00:25Z): input b had no rows since the restart and counts as 0 under policy min"
    ) in out
    assert (
        "  rows dropped as late: 0 here, 1 in one live query; 0 dropped only here, 1 kept only here (line 7)"
    ) in out
    assert "under policy min, every restart holds the watermark until each input has rows again" in out


def test_whatif_restart_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        ["whatif", _events(tmp_path), *ARGS, "--run-kind", "once", "--format", "json"], capsys
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["run_kind"] == "once"
    assert [(b["batch_id"], b["kind"], b["watermark_ms"]) for b in doc["batches"]] == [
        (0, "data", 0),
        (1, "data", _at(7)),
        (2, "data", _at(20)),
        (3, "data", _at(20)),
    ]
    impact = doc["restart_impact"]
    assert [r["after_batch_id"] for r in impact["restarts"]] == [0, 1, 2]
    # batch 2 read rows of a only after a restart (b counts as 0): the watermark did not move, so no
    # no-data batch was due after it
    assert [r["skipped_no_data_batch"] for r in impact["restarts"]] == [True, True, False]
    assert (impact["no_data_batches"], impact["no_data_batches_without_restarts"]) == (0, 4)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([*ARGS, "--restart-after", "3,x"], "--restart-after takes the batches as the report's batch column"),
        ([*ARGS, "--restart-after", "-1"], "got '-1'"),
        ([*ARGS, "--restart-after", "after x"], "got 'after x'"),
        (
            [*ARGS, "--run-kind", "hourly"],
            "--run-kind must be one of live, available-now, once, got 'hourly'",
        ),
        (
            ["--delay", "5s", "--window", "5s", "--restart-after", "3", "--sweep", "1s,5s"],
            "do not combine with --sweep",
        ),
        ([*ARGS, "--restart-after", "30"], "--restart-after 30: the file has no batch 30 (its batch column holds 0 to 3)"),
        ([*ARGS, "--restart-after", "3"], "--restart-after: restart after data batch 3: data batches are 0 to 3 and a restart needs one after it"),
        ([*ARGS, "--engine", "flink", "--run-kind", "once"], "--run-kind"),
    ],
)
def test_whatif_restart_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    code, _, err = run(["whatif", _events(tmp_path), *extra], capsys)
    assert code == 2
    assert message in err


def test_run_kind_says_what_decides_no_data_batches_and_once_refuses_restart_points(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "rb.csv"
    f.write_text(
        "event_time,batch\n1970-01-01T00:00:10Z,0\n1970-01-01T00:00:30Z,1\n1970-01-01T00:00:50Z,2\n"
        "1970-01-01T00:01:20Z,3\n",
        encoding="utf-8",
    )
    base = ["whatif", str(f), "--delay", "0s", "--window", "1m"]
    code, out, _ = run([*base, "--run-kind", "available-now", "--restart-after", "2"], capsys)
    assert code == 0 and "No-data batches: decided by --run-kind (Trigger.AvailableNow" in out
    assert "ASSUME" not in out  # the run kind decides, not an assumption about the arrival
    assert "    batch    id kind" in out  # the file's batch numbers beside Spark's ids
    code, _, err = run([*base, "--run-kind", "once", "--restart-after", "2"], capsys)
    assert code == 2 and "--restart-after has no effect with --run-kind once" in err


ONE_INPUT = "event_time,arrival_time\n2026-01-01T00:00:10Z,2026-01-01T00:00:11Z\n2026-01-01T00:00:40Z,2026-01-01T00:00:41Z\n" \
    "2026-01-01T00:01:20Z,2026-01-01T00:01:21Z\n"


def test_one_input_restart_loses_nothing_per_input_and_names_the_trigger_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "arr.csv"
    path.write_text(ONE_INPUT, encoding="utf-8")
    code, out, err = run(
        ["whatif", str(path), "--delay", "10s", "--window", "30s", "--trigger", "10s", "--restart-after", "1"],
        capsys,
    )
    assert code == 0, err
    assert "Restarts: 1, live runs with a 10s processing-time trigger;" in out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("  after batch 1:")]
    assert line.endswith("from the checkpoint"), line  # one input: its watermark is the global one
    assert "per-input" not in line


def test_available_now_restart_after_a_data_batch_says_why_it_stopped_after_the_next(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        ["whatif", _events(tmp_path), "--delay", "0s", "--window", "5s", "--restart-after", "2",
         "--run-kind", "available-now"], capsys,
    )  # fmt: skip
    assert code == 0, err
    assert (
        "  after the no-data batch after batch 2 (id 3): batch 3 (id 4) starts with the watermark "
        "2026-01-01T00:00:30Z"
    ) in out
    assert (
        "    (asked after batch 2 (id 2): a Trigger.AvailableNow run ends with the no-data batch that closes it, "
        "so this run stopped after that one)"
    ) in out


# one input, six file batches 10 s apart: every batch moves the watermark, so a caught-up live query runs a
# no-data batch after each; a restart right after a data batch skips one, which shifts every later Spark id
SIX = "event_time,batch\n" + "".join(f"2026-01-01T00:00:{10 * (i + 1):02d}Z,{i}\n" for i in range(6))


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        ("2,4", ["  after batch 2 (id 4): batch 3 (id 5)", "  after batch 4 (id 7): batch 5 (id 8)"]),
        (
            "after 2,after 4",
            ["  after the no-data batch after batch 2 (id 5): batch 3 (id 6)",
             "  after the no-data batch after batch 4 (id 9): batch 5 (id 10)"],
        ),
    ],
)
def test_restart_points_are_the_file_batches_whatever_earlier_restarts_did_to_the_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], points: str, expected: list[str]
) -> None:
    path = tmp_path / "six.csv"
    path.write_text(SIX, encoding="utf-8")
    code, out, err = run(["whatif", str(path), "--delay", "0s", "--window", "5s", "--restart-after", points], capsys)
    assert code == 0, err
    paragraphs = [ln for ln in out.splitlines() if ln.startswith("  after ") and " starts with the watermark" in ln]
    assert [p.split(" starts")[0] for p in paragraphs] == expected


def test_a_data_batch_restart_point_equals_its_batch_id_before_any_shift(tmp_path: Path) -> None:
    from monitor.watermark.config import Tumbling
    from monitor.watermark.io import load_events
    from monitor.watermark.whatif_config import spark_config

    path = tmp_path / "six.csv"
    path.write_text(SIX, encoding="utf-8")
    events = load_events(path)
    config = spark_config(delay_ms=0, size_ms=5_000)
    assert isinstance(config.window, Tumbling)
    by_id = replay_restarting(events, config, [4])  # data batch 2 is Spark id 4 (a no-data batch after each)
    by_position = replay_restarting(events, config, [], after_data_batches=[(2, False)])
    assert by_id.restarts == by_position.restarts
    assert [b.batch_id for b in by_id.replay.batches] == [b.batch_id for b in by_position.replay.batches]
    with pytest.raises(EngineConfigError, match="restart after data batch 5: data batches are 0 to 5"):
        replay_restarting(events, config, [], after_data_batches=[(5, True)])


def test_a_restart_with_the_next_data_already_waiting_skipped_no_no_data_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a 10 s trigger; a row arrives every 10 s, so at each trigger the next batch's row is waiting and a live
    # query runs no no-data batch between them: stopping after batch 1 skips nothing
    path = tmp_path / "a.csv"
    path.write_text(
        "event_time,arrival_time\n"
        "2026-01-01T00:00:00Z,2026-01-01T00:00:01Z\n"
        "2026-01-01T00:01:00Z,2026-01-01T00:00:11Z\n"
        "2026-01-01T00:02:00Z,2026-01-01T00:00:21Z\n",
        encoding="utf-8",
    )
    code, out, err = run(
        ["whatif", str(path), "--delay", "1m", "--window", "1m", "--trigger", "10s", "--restart-after", "1"], capsys
    )
    assert code == 0, err
    assert "Restarts: 1" in out
    assert "the query stopped between data batch" not in out and "skipped no-data batch" not in out
