"""Spark event logs in S3, read from moto's S3 server on loopback (tests/s3_server.py): ``scan s3://`` agrees
with ``scan`` of the same files on disk, rolling logs are read file by file as they appear, and each failure
of an object store (replaced, deleted, lagging listing, throttling, expired credentials) is a collector error
of its kind while the target keeps being polled.

The logs are the recorded real Spark 4.3.0 runs of tests/fixtures/spark/real-4.3.0, uploaded with Spark's
layout. ``eventlog_trimmed.jsonl`` holds 34 lines and the progress of batches 0-11 of query ``wm_gt``; cut
into rolled files of lines 1-12, 13-24 and 25-34 they hold batches [0, 1], [2..7] and [8..11] (read off the
file by hand).
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from collectors.spark.eventlog import EventLogCollector
from monitor.model import ErrorKind, SampleKind
from tests.cli import run_cli

pytestmark = [pytest.mark.integration, pytest.mark.s3]

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
APP = "local-1795951957158"
ROLL_DIR = f"eventlog_v2_{APP}"


def _lines(spark_fixtures: Path) -> list[bytes]:
    return (spark_fixtures / "eventlog_trimmed.jsonl").read_bytes().splitlines(keepends=True)


def _batches(result: Any) -> list[int]:
    return sorted(
        s.batch_id for s in result.samples if s.kind is SampleKind.PROGRESS and s.scope.is_job() and s.batch_id is not None
    )


def _put(s3: Any, key: str, body: bytes) -> None:
    s3.client().put_object(Bucket=s3.bucket, Key=key, Body=body)


def _upload_tree(s3: Any, local: Path, prefix: str) -> None:
    for path in sorted(local.rglob("*")):
        if path.is_file():
            _put(s3, f"{prefix}/{path.relative_to(local).as_posix()}", path.read_bytes())


def test_scan_s3_reports_recorded_runs_as_scan_of_the_files_on_disk(
    s3: Any, spark_fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    local = tmp_path / "spark-events"
    local.mkdir()
    shutil.copytree(spark_fixtures / "eventlog_v2_fixture" / ROLL_DIR, local / ROLL_DIR)
    shutil.copy(spark_fixtures / "eventlog_trimmed.jsonl", local / "local-1795951957158-single")
    _upload_tree(s3, local, "spark-events")
    for fmt in ("text", "json"):
        code_local, out_local, err_local = run_cli(["scan", "--format", fmt, str(local)], capsys)
        code_s3, out_s3, err_s3 = run_cli(["scan", "--format", fmt, f"s3a://{s3.bucket}/spark-events"], capsys)
        assert (code_s3, err_s3) == (code_local, err_local)
        assert out_s3 == out_local
    report = json.loads(out_s3)
    assert "wm_gt" in {q["name"] for q in report["queries"]}
    assert "Query wm_gt" in run_cli(["scan", f"s3://{s3.bucket}/spark-events/{ROLL_DIR}"], capsys)[1]


def test_scan_s3_missing_object_is_one_line_exit_2(s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(["scan", f"s3://{s3.bucket}/nothing-here"], capsys)
    assert code == 2
    assert err.strip() == f"tidegauge: error: s3://{s3.bucket}/nothing-here: no such file or directory"
    # a bucket that does not exist is said so (moto answers NoSuchBucket as S3 does)
    code, _out, err = run_cli(["scan", f"s3://{s3.bucket}-gone/x"], capsys)
    assert code == 2
    assert err.strip() == (
        f"tidegauge: error: s3://{s3.bucket}-gone/x: the bucket or container does not exist (NoSuchBucket)"
    )


def test_rolling_log_each_rolled_file_read_once_when_it_appears(s3: Any, spark_fixtures: Path) -> None:
    lines = _lines(spark_fixtures)
    prefix = f"spark-events/{ROLL_DIR}"
    collector = EventLogCollector([f"s3a://{s3.bucket}/spark-events"])
    # nothing written yet (a single-file .inprogress log would be just as invisible until closed)
    _put(s3, "spark-events/README", b"")  # the prefix exists; the file is of no known format and skipped
    first = collector.poll(NOW)
    assert _batches(first) == []
    _put(s3, f"{prefix}/appstatus_{APP}.inprogress", b"")
    _put(s3, f"{prefix}/events_1_{APP}", b"".join(lines[:12]))
    assert _batches(collector.poll(NOW)) == [0, 1]
    s3.reset_counts()
    assert _batches(collector.poll(NOW)) == []  # nothing new: the rolled file is not read again
    assert s3.counts()["get"] == 0
    _put(s3, f"{prefix}/events_2_{APP}", b"".join(lines[12:24]))
    s3.reset_counts()
    second = collector.poll(NOW)
    assert _batches(second) == [2, 3, 4, 5, 6, 7]
    assert collector.decompressed_bytes_read == len(b"".join(lines[12:24]))  # only the new file
    _put(s3, f"{prefix}/events_3_{APP}", b"".join(lines[24:]))
    s3.client().delete_object(Bucket=s3.bucket, Key=f"{prefix}/appstatus_{APP}.inprogress")
    _put(s3, f"{prefix}/appstatus_{APP}", b"")  # the application ended
    third = collector.poll(NOW)
    assert _batches(third) == [8, 9, 10, 11]
    assert third.errors == ()
    # finished: the directory is not listed again, its objects not read again
    s3.reset_counts()
    assert collector.poll(NOW).samples == ()
    counts = s3.counts()
    # spark-events/ listed after its newest name and after README (a family of its own); the directory not
    assert (counts["get"], counts["list"]) == (0, 2)


def test_replaced_deleted_and_lagging_objects_are_errors_of_their_kind(s3: Any, spark_fixtures: Path) -> None:
    lines = _lines(spark_fixtures)
    prefix = f"logs/{ROLL_DIR}"
    collector = EventLogCollector([f"s3://{s3.bucket}/logs"])
    _put(s3, f"{prefix}/appstatus_{APP}.inprogress", b"")
    _put(s3, f"{prefix}/events_1_{APP}", b"".join(lines[:12]))
    _put(s3, f"{prefix}/events_3_{APP}", b"".join(lines[24:]))  # events_2 not listed yet
    lagging = collector.poll(NOW)
    assert _batches(lagging) == [0, 1]  # events_3 waits for events_2
    assert [e.kind for e in lagging.errors] == [ErrorKind.LISTING]
    assert f"s3://{s3.bucket}/{prefix}: the listing shows later events files but not events_2_" in lagging.errors[0].message
    _put(s3, f"{prefix}/events_2_{APP}", b"".join(lines[12:24]))
    caught_up = collector.poll(NOW)
    assert (_batches(caught_up), caught_up.errors) == ([2, 3, 4, 5, 6, 7, 8, 9, 10, 11], ())
    # replaced: same key, other bytes (the ETag and size change): read again from the start
    _put(s3, f"{prefix}/events_1_{APP}", b"".join(lines[:8]))
    replaced = collector.poll(NOW)
    assert [e.kind for e in replaced.errors] == [ErrorKind.ROTATED]
    assert _batches(replaced) == [0]
    # deleted
    s3.client().delete_object(Bucket=s3.bucket, Key=f"{prefix}/events_1_{APP}")
    deleted = collector.poll(NOW)
    assert [(e.kind, e.target) for e in deleted.errors] == [(ErrorKind.DELETED, f"s3://{s3.bucket}/{prefix}/events_1_{APP}")]
    assert collector.poll(NOW).errors == ()  # said once


@pytest.mark.parametrize(("status", "code"), [(503, "SlowDown"), (429, "TooManyRequests")])
def test_throttling_is_retried_then_reported_and_polling_goes_on(
    s3: Any, spark_fixtures: Path, status: int, code: str
) -> None:
    _put(s3, f"t/{APP}", b"".join(_lines(spark_fixtures)))
    # botocore's own retries (with their longer backoff) off: s3fs's retries with backoff remain
    options = {"config_kwargs": {"retries": {"max_attempts": 1}}}
    collector = EventLogCollector([f"s3://{s3.bucket}/t"], storage_options=options)
    # two throttled answers: the library's retries absorb them
    s3.faults([{"match": f"/t/{APP}", "method": "GET", "status": status, "code": code, "times": 2}])
    retried = collector.poll(NOW)
    assert retried.errors == () and len(_batches(retried)) == 12
    # throttled on every attempt: one error of kind throttled, nothing lost, the next poll lists again
    _put(s3, f"t/{APP}-2", b"".join(_lines(spark_fixtures)[:12]))
    s3.faults([{"match": f"/t/{APP}-2", "method": "GET", "status": status, "code": code, "times": -1}])
    throttled = collector.poll(NOW)
    assert [e.kind for e in throttled.errors] == [ErrorKind.THROTTLED]
    assert throttled.errors[0].retryable
    assert f"throttled by the store ({code})" in throttled.errors[0].message
    s3.faults([])
    after = collector.poll(NOW)
    assert (after.errors, _batches(after)) == ((), [0, 1])


def test_expired_credentials_are_a_credentials_error_without_the_secret(s3: Any, spark_fixtures: Path) -> None:
    _put(s3, f"c/{APP}", b"".join(_lines(spark_fixtures)))
    collector = EventLogCollector([f"s3://{s3.bucket}/c"])
    s3.faults([{"match": "/", "status": 400, "code": "ExpiredToken", "times": -1}])
    refused = collector.poll(NOW)
    assert [e.kind for e in refused.errors] == [ErrorKind.CREDENTIALS]
    assert refused.errors[0].kind.target_down
    text = repr(refused)
    for secret in (s3.env["AWS_SECRET_ACCESS_KEY"], s3.env["AWS_ACCESS_KEY_ID"]):
        assert secret not in text
    assert "ExpiredToken" in refused.errors[0].message
    s3.faults([])
    assert len(_batches(collector.poll(NOW))) == 12  # renewed: the target is read again


def test_daemon_picks_up_rolled_files_uploaded_while_it_runs_and_prints_no_secret(
    s3: Any, spark_fixtures: Path, tmp_path: Path
) -> None:
    from monitor.store import upgrade
    from tests.daemon_process import DaemonProcess, free_port, metric_values, wait_for

    query = "be3a4786-e9ff-44d2-9c1a-ffa8ffe6c0c8"  # wm_gt: 24 input rows over batches 0-11 (test_daemon.py)
    lines = _lines(spark_fixtures)
    prefix = f"spark-events/{ROLL_DIR}"
    _put(s3, f"{prefix}/appstatus_{APP}.inprogress", b"")
    _put(s3, f"{prefix}/events_1_{APP}", b"".join(lines[:12]))
    key_id, secret = "AKIADAEMONTESTKEY77", "daemon-secret-Zq8f3Lk2Vb9Rt6Yp"
    db_url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(db_url)
    config = {
        "server": {"host": "127.0.0.1", "port": free_port()},
        "targets": {"spark_event_logs": [{
            "name": "s3-logs", "path": f"s3a://{s3.bucket}/spark-events", "poll_interval": "300ms",
            "storage_options": {"key": {"env": "TG_S3_KEY"}, "secret": {"env": "TG_S3_SECRET"},
                                "endpoint_url": s3.endpoint},
        }]},
        "evaluation_interval": "500ms",
    }
    env = {"TG_S3_KEY": key_id, "TG_S3_SECRET": secret, "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}
    daemon = DaemonProcess(config, db_url, tmp_path, env)
    try:
        daemon.start()

        def rows() -> float | None:
            values = [v for labels, v in metric_values(daemon.metrics(), "tidegauge_input_rows_total")
                      if labels.get("job_id") == query and labels.get("source", "") == ""]
            return values[0] if values else None

        first = wait_for("the first rolled file's batches on /metrics", rows)
        assert first < 24.0
        _put(s3, f"{prefix}/events_2_{APP}", b"".join(lines[12:24]))
        _put(s3, f"{prefix}/events_3_{APP}", b"".join(lines[24:]))
        wait_for("the rolled files uploaded while the daemon runs", lambda: rows() == 24.0)
        # expired credentials: an error of its kind on /healthz and /metrics, and polling goes on
        s3.faults([{"match": "/", "status": 400, "code": "ExpiredToken", "times": -1}])

        def refused() -> dict[str, Any] | None:
            target = httpx.get(f"{daemon.base}/healthz", timeout=5.0).json()["targets"][0]
            return target if target.get("errors_by_kind", {}).get("credentials") else None

        target = wait_for("a credentials error on /healthz", refused)
        assert target["up"] is False
        assert any(labels["kind"] == "credentials" and value >= 1
                   for labels, value in metric_values(daemon.metrics(), "tidegauge_collector_errors_total"))
        s3.faults([])
        wait_for("the target up again", lambda: httpx.get(f"{daemon.base}/healthz", timeout=5.0).json()["targets"][0]["up"])
        surfaces = [httpx.get(f"{daemon.base}/healthz", timeout=5.0).text, daemon.metrics()]
        assert daemon.terminate(timeout_s=10.0) == 0
        surfaces += [daemon.log(), (tmp_path / "tg.db").read_bytes().decode("latin-1")]
        for text in surfaces:
            assert secret not in text and key_id not in text
    finally:
        daemon.close()


def test_polls_between_full_listings_list_only_newer_names(s3: Any, spark_fixtures: Path) -> None:
    lines = _lines(spark_fixtures)
    log = b"".join(lines[:12])  # batches 0 and 1
    for i in range(3):
        _put(s3, f"ev/app-20261129120000-000{i}", log)
    _put(s3, f"ev/{ROLL_DIR}/events_1_{APP}", log)
    _put(s3, f"ev/{ROLL_DIR}/appstatus_{APP}", b"")  # finished
    collector = EventLogCollector([f"s3://{s3.bucket}/ev"], full_listing_every=3)
    assert len(_batches(collector.poll(NOW))) == 8  # poll 1: full listing, 4 logs of 2 batches
    # poll 2: a newer application appears, an older-named one too
    _put(s3, "ev/app-20261129130000-0000", log)
    _put(s3, "ev/app-20200101000000-0000", log)
    s3.reset_counts()
    second = collector.poll(NOW)
    assert _batches(second) == [0, 1]  # the newer one only
    counts = s3.counts()
    # StartAfter listings: after the newest name (eventlog_v2_...) and after the newest app-; one GET
    assert (counts["list"], counts["get"], counts["head"]) == (2, 1, 0)
    assert _batches(collector.poll(NOW)) == []  # poll 3: the older-named one is not listed yet
    # poll 4 (full_listing_every=3: polls 1, 4, 7...) lists in full again and finds it
    fourth = collector.poll(NOW)
    assert (_batches(fourth), fourth.errors) == ([0, 1], ())
    # a single-file log closed under its .inprogress name and renamed (S3A: copy + delete) is found by a HEAD
    _put(s3, "ev/app-20261129140000-0000.inprogress", log)
    assert _batches(collector.poll(NOW)) == [0, 1]
    s3.client().copy_object(Bucket=s3.bucket, Key="ev/app-20261129140000-0000",
                            CopySource={"Bucket": s3.bucket, "Key": "ev/app-20261129140000-0000.inprogress"})
    s3.client().delete_object(Bucket=s3.bucket, Key="ev/app-20261129140000-0000.inprogress")
    s3.reset_counts()
    renamed = collector.poll(NOW)
    assert (renamed.samples, renamed.errors) == ((), ())  # the cursor carried over: not read again
    assert s3.counts()["head"] == 1
