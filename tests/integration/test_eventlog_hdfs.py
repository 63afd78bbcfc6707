"""Spark event logs on a real HDFS (Hadoop's MiniDFSCluster, tests/hdfs_cluster.py), read over WebHDFS.

* Real PySpark writes its event log to ``hdfs://`` while a streaming query runs (spark_hdfs_app.py), as one
  file and as a rolling directory (Spark 4's default): the collector tails the growing zstd file
  (``<app>.zstd.inprogress``, or ``events_1_<app>.zstd`` beside ``appstatus_<app>.inprogress``) by ranged
  reads from its stored offset (zstd frames included) while the NameNode still lists the file at its
  first-hflush length, carries its cursor over the renames at ``spark.stop()``, and reads every batch
  exactly once; the daemon (a real subprocess) sees batches before the query ends.
* ``tidegauge scan hdfs://...`` of the recorded real Spark 4.3.0 runs, uploaded to the cluster, prints what
  ``scan`` of the same files on disk prints.
* A stopped NameNode, a deleted file and a permission denied are each a collector error of their kind, and
  the target reads again once the NameNode is back.

The NameNode's HTTP port reaches tidegauge as it would on an edge node: ``$HADOOP_CONF_DIR/hdfs-site.xml``
(``dfs.namenode.http-address``) and ``$HADOOP_USER_NAME`` (collectors/hdfs.py).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from collectors.spark.eventlog import EventLogCollector
from monitor.model import ErrorKind, PollResult, SampleKind
from monitor.store import upgrade
from tests.cli import run_cli
from tests.daemon_process import DaemonProcess, free_port, wait_for
from tests.hdfs_cluster import HdfsCluster

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow, pytest.mark.hdfs]

APP = Path(__file__).with_name("spark_hdfs_app.py")
RECORDED = ("eventlog_v2_fixture/eventlog_v2_local-1795951957158", "eventlog_trimmed.jsonl")


@pytest.fixture(scope="module")
def hadoop_conf(hdfs_cluster: HdfsCluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """``HADOOP_CONF_DIR`` (an ``hdfs-site.xml`` naming the cluster's HTTP address) and ``HADOOP_USER_NAME``."""
    conf = tmp_path_factory.mktemp("hadoop-conf")
    (conf / "hdfs-site.xml").write_text(
        "<?xml version=\"1.0\"?>\n<configuration>\n  <property>\n    <name>dfs.namenode.http-address</name>\n"
        f"    <value>127.0.0.1:{hdfs_cluster.http_port}</value>\n  </property>\n</configuration>\n"
    )
    return {"HADOOP_CONF_DIR": str(conf), "HADOOP_USER_NAME": "root"}


@pytest.fixture
def hadoop_env(hadoop_conf: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """:func:`hadoop_conf` set in this process's environment for the test."""
    for key, value in hadoop_conf.items():
        monkeypatch.setenv(key, value)
    return hadoop_conf


def _progress_batches(results: list[PollResult]) -> list[int]:
    return [
        s.batch_id
        for r in results
        for s in r.samples
        if s.kind is SampleKind.PROGRESS and s.scope.is_job() and s.batch_id is not None
    ]


def _listing(cluster: HdfsCluster, path: str) -> dict[str, int]:
    """``name -> length`` as the NameNode lists ``path``."""
    statuses = json.loads(cluster.rest(path, "LISTSTATUS"))["FileStatuses"]["FileStatus"]
    return {s["pathSuffix"]: int(s["length"]) for s in statuses}


@pytest.fixture
def spark_app(
    hdfs_cluster: HdfsCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[subprocess.Popen[str], Path, str]]:
    """The live PySpark query writing to ``hdfs://.../<dir>`` (``request.param``: rolling event logs or not);
    yields the process, the file whose creation stops it, and the event-log directory's HDFS path."""
    rolling = bool(request.param)
    log_dir = f"/live-events-{'rolling' if rolling else 'single'}"
    hdfs_cluster.rest(log_dir, "MKDIRS", method="PUT")
    stop = tmp_path / "stop"
    with (tmp_path / "spark.err").open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, str(APP), f"{hdfs_cluster.url}{log_dir}", str(tmp_path / "ckpt"), str(stop),
             str(rolling).lower()],
            stdout=subprocess.PIPE, stderr=err, text=True,
        )
    try:
        yield proc, stop, log_dir
    finally:
        stop.touch()
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.parametrize("spark_app", [False, True], ids=["single-file", "rolling"], indirect=True)
def test_live_pyspark_query_tailed_over_hdfs(
    hdfs_cluster: HdfsCluster,
    hadoop_conf: dict[str, str],
    hadoop_env: dict[str, str],
    spark_app: tuple[subprocess.Popen[str], Path, str],
    tmp_path: Path,
) -> None:
    proc, stop, log_dir = spark_app
    rolling = log_dir.endswith("rolling")
    url = f"{hdfs_cluster.url}{log_dir}"
    db_url = f"sqlite:///{tmp_path / 'tg.db'}"
    upgrade(db_url)
    daemon = DaemonProcess(
        {
            "server": {"host": "127.0.0.1", "port": free_port()},
            "targets": {"spark_event_logs": [{"name": "hdfs-live", "path": url, "poll_interval": "500ms"}]},
            "evaluation_interval": "500ms",
        },
        db_url,
        tmp_path,
        env=hadoop_conf,
    )
    try:
        assert proc.stdout is not None
        app_id = json.loads(proc.stdout.readline())["app_id"]
        # the growing file: <app>.zstd.inprogress, or the rolling directory's events_1_<app>.zstd (whose
        # appstatus_<app>.inprogress says the application runs)
        growing_dir = f"{log_dir}/eventlog_v2_{app_id}" if rolling else log_dir
        name = f"events_1_{app_id}.zstd" if rolling else f"{app_id}.zstd.inprogress"
        final_name = name.removesuffix(".inprogress")
        collector = EventLogCollector([url])
        polls: list[PollResult] = []

        def batches_seen(count: int) -> bool:
            polls.append(collector.poll(datetime.now(UTC)))
            return len(_progress_batches(polls)) >= count

        # the collector tails the growing compressed file while the query runs
        wait_for("3 batches read from the growing zstd file", lambda: batches_seen(3), timeout_s=180, interval_s=0.5)
        assert proc.poll() is None  # the query is still running
        assert all(r.errors == () for r in polls), [e.message for r in polls for e in r.errors]
        # the NameNode lists the file at the length of its first hflush; the reader went past it
        listed = _listing(hdfs_cluster, growing_dir)[name]
        state = collector.cursors.get(f"{hdfs_cluster.url}{growing_dir}/{name}")
        assert state is not None and state["size"] > listed
        # the daemon sees batches of the running query too (its own process, its own cursor)
        daemon.start(ready_timeout_s=90.0)

        def daemon_batches() -> list[int] | None:
            with sqlite3.connect(tmp_path / "tg.db") as db:
                rows = db.execute(
                    "SELECT batch_id FROM samples WHERE app_id = ? AND kind = 'progress' AND scope_source IS NULL "
                    "ORDER BY batch_id",
                    (app_id,),
                ).fetchall()
            ids = [r[0] for r in rows]
            return ids if len(ids) >= 2 else None

        live_ids = wait_for("the daemon storing 2 batches of the live query", daemon_batches, timeout_s=120)
        assert proc.poll() is None  # before the query ends
        assert live_ids == list(range(live_ids[0], live_ids[0] + len(live_ids)))

        # more batches: each poll reads on from the stored offset, never a batch twice
        seen = len(_progress_batches(polls))
        wait_for("more batches", lambda: batches_seen(seen + 3), timeout_s=120, interval_s=0.5)
        stop.touch()
        assert proc.wait(120) == 0
        # Spark renamed app.zstd.inprogress to app.zstd (or appstatus_<app>.inprogress to appstatus_<app>):
        # the cursor carries over (same inode id), nothing is read twice
        after = _listing(hdfs_cluster, growing_dir)
        assert final_name in after
        assert not rolling or f"appstatus_{app_id}" in after
        polls.append(collector.poll(datetime.now(UTC)))
        assert all(r.errors == () for r in polls), [e.message for r in polls for e in r.errors]
        ids = _progress_batches(polls)
        assert ids == list(range(ids[0], ids[0] + len(ids)))  # consecutive, none repeated
        kinds = [s.kind for r in polls for s in r.samples if s.scope.is_job()]
        assert kinds[0] is SampleKind.STARTED and kinds[-1] is SampleKind.TERMINATED

        # a fresh reader of the finished file finds exactly the batches the tailing reader found
        fresh = EventLogCollector([url]).poll(datetime.now(UTC))
        assert fresh.errors == ()
        assert _progress_batches([fresh]) == ids

        def daemon_has_all() -> bool:
            stored = daemon_batches()
            return stored is not None and stored == ids

        wait_for("the daemon storing every batch once", daemon_has_all, timeout_s=60)
        assert daemon.terminate(timeout_s=15.0) == 0
    finally:
        daemon.close()


def _scan_json(target: str, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    code, out, err = run_cli(["scan", target, "--format", "json"], capsys)
    assert code == 0, err
    report: dict[str, object] = json.loads(out)
    return report


def test_scan_of_recorded_runs_on_hdfs_equals_local(
    hdfs_cluster: HdfsCluster,
    hadoop_env: dict[str, str],
    spark_fixtures: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    local = tmp_path / "recorded"
    for rel in RECORDED:
        src = spark_fixtures / rel
        dst = local / src.name
        if src.is_dir():
            dst.mkdir(parents=True)
            for f in src.iterdir():
                dst.joinpath(f.name).write_bytes(f.read_bytes())
        else:
            dst.write_bytes(src.read_bytes())
    written = hdfs_cluster.upload_tree(local, "/recorded")
    assert len(written) == 3
    expected = _scan_json(str(local), capsys)
    assert expected["queries"]  # the recorded runs hold queries: a comparison of two empty reports proves nothing
    for url in (f"{hdfs_cluster.url}/recorded", f"{hdfs_cluster.webhdfs_url}/recorded"):
        got = _scan_json(url, capsys)
        assert json.loads(json.dumps(got).replace(url, str(local))) == expected


def _errors(result: PollResult) -> list[tuple[ErrorKind, bool, str]]:
    return [(e.kind, e.retryable, e.message) for e in result.errors]


def test_hdfs_failures_are_collector_errors_of_their_kind(
    hdfs_cluster: HdfsCluster, hadoop_env: dict[str, str], spark_fixtures: Path
) -> None:
    trimmed = (spark_fixtures / "eventlog_trimmed.jsonl").read_bytes()
    hdfs_cluster.put("/failures/app-1.jsonl", trimmed)
    hdfs_cluster.put("/failures/app-2.jsonl", trimmed)
    url = f"{hdfs_cluster.url}/failures"
    collector = EventLogCollector([url])
    first = collector.poll(datetime.now(UTC))
    assert first.errors == () and first.samples

    # permission: the files are the superuser's, 700; a reader named 'nobody' is refused
    hdfs_cluster.rest("/failures/app-2.jsonl", "SETPERMISSION", method="PUT", permission="700")
    outsider = EventLogCollector([url], storage_options={"user": "nobody"})
    denied = outsider.poll(datetime.now(UTC))
    assert [(k, r) for k, r, _ in _errors(denied)] == [(ErrorKind.CREDENTIALS, True)]
    assert f"{url}/app-2.jsonl" in denied.errors[0].message
    assert {s.job.app_id for s in denied.samples} != set()  # app-1 was still read

    # deleted between two polls: DELETED, the other file still read
    hdfs_cluster.rest("/failures/app-2.jsonl", "DELETE", method="DELETE")
    gone = collector.poll(datetime.now(UTC))
    assert [(k, r) for k, r, _ in _errors(gone)] == [(ErrorKind.DELETED, False)]
    assert f"{url}/app-2.jsonl" in gone.errors[0].message

    # the NameNode stops: the target is unreachable, and reads again once it is back
    hdfs_cluster.kill()
    try:
        down = collector.poll(datetime.now(UTC))
        assert [(k, r) for k, r, _ in _errors(down)] == [(ErrorKind.UNREACHABLE, True)]
        assert url in down.errors[0].message
    finally:
        hdfs_cluster.restart()
    wait_for("the NameNode out of safe mode", lambda: collector.poll(datetime.now(UTC)).errors == (), timeout_s=120, interval_s=1)
