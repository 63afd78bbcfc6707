"""Reading speed of an event log on HDFS (a MiniDFSCluster on loopback, tests/hdfs_cluster.py, read over
WebHDFS) against the same log on disk: ``EventLogCollector.poll`` of one ~40 MB plain log and its zstd form,
MB/s of events (median and best of 5, the two alternated) and the HDFS/local ratio (target >= 80%).

Run: ``python -m tests.benchmarks.bench_eventlog_hdfs`` (``make bench``). Figures only; nothing asserted.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tests.benchmarks.eventlog_speed import big_logs, read_speeds_mb_s, speed_line
from tests.hdfs_cluster import start_hdfs


def main() -> None:
    cluster = start_hdfs()
    try:
        print(f"MiniDFSCluster up in {cluster.startup_seconds:.1f} s")
        body, files = big_logs()
        options = {"port": cluster.http_port, "user": "root"}
        with tempfile.TemporaryDirectory() as tmp:
            for name, data in files.items():
                local = Path(tmp) / name
                local.write_bytes(data)
                cluster.put(f"/big/{name}", data)
                figures = read_speeds_mb_s(
                    {"local": str(local), "hdfs": f"{cluster.url}/big/{name}"}, len(body), {"hdfs": options}
                )
                print(f"{name} ({len(data) / 1e6:.1f} MB stored, {len(body) / 1e6:.1f} MB of events): "
                      f"{speed_line(figures, 'hdfs')}")
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
