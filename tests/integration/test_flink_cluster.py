"""The real Flink cluster and the test job behave as the collector tests assume (REST shapes, quirks)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.flink_cluster import FlinkCluster

pytestmark = [pytest.mark.integration, pytest.mark.flink, pytest.mark.slow]

NO_WATERMARK = "-9223372036854775808"


def _vertices(cluster: FlinkCluster, jid: str) -> list[dict[str, Any]]:
    vertices: list[dict[str, Any]] = cluster.get_json(f"/jobs/{jid}")["vertices"]
    return vertices


def test_idle_subtask_pins_the_window_input_watermark_at_long_min(
    flink_cluster: FlinkCluster, flink_test_jobs: dict[str, str]
) -> None:
    jid = flink_test_jobs["idle"]
    source, window = _vertices(flink_cluster, jid)
    assert source["name"].startswith("Source: seq") and source["parallelism"] == 2

    def source_subtask0_has_watermark() -> bool:
        got = flink_cluster.get_json(
            f"/jobs/{jid}/vertices/{source['id']}/metrics?get=0.Timestamps/Watermarks.currentOutputWatermark"
        )
        return bool(got) and got[0]["value"] != NO_WATERMARK

    flink_cluster.wait_for(source_subtask0_has_watermark, "subtask 0 of the source to emit a watermark")
    marks = flink_cluster.get_json(f"/jobs/{jid}/vertices/{window['id']}/watermarks")
    # StatusWatermarkValve: the min over both channels; subtask 1 never emitted one
    assert {m["id"]: m["value"] for m in marks} == {
        "0.currentInputWatermark": NO_WATERMARK,
        "1.currentInputWatermark": NO_WATERMARK,
    }
