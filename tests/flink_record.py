"""Record and replay a ``check flink`` run against a real Flink cluster, request by request.

:class:`RecordingTransport` forwards every request to the real JobManager and keeps, in order, the
request (path and query) and the JSON answer; :func:`save` writes them with the poll times as
``exchanges.json`` (``{"polls": [iso, ...], "exchanges": [{"poll", "path", "query", "status", "body"}]}``).
:func:`replay_transport` answers the n-th request of a path (with its query) with the n-th recorded answer
(the last one again if asked more often), 404 for an unknown path, as Flink does; a metric ``?get=`` query
that was not recorded as asked (a newer collector asks for more ids, e.g. the split-level watermarks) is
answered with the n-th recorded ``?get=`` answer of that path, keeping only the ids asked for; :func:`replay_clock`
gives the recorded poll times one after another.

Run as a script to record the test job's ``idle-late`` mode (tests/flink_job) on a fresh cluster::

    PYTHONPATH=$PWD python -m tests.flink_record OUT_DIR [SECONDS_BEFORE_FIRST_POLL] [INTERVAL_SECONDS]
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

__all__ = ["RecordingTransport", "replay_clock", "replay_transport", "save"]


class RecordingTransport(httpx.BaseTransport):
    """Forwards to the network and keeps every exchange (``poll`` is set by the caller between polls)."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.exchanges: list[dict[str, Any]] = []
        self.poll = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        body = response.read()
        try:
            doc: Any = json.loads(body)
        except ValueError:
            doc = body.decode("utf-8", "replace")
        self.exchanges.append(
            {
                "poll": self.poll,
                "path": request.url.path,
                "query": request.url.query.decode(),
                "status": response.status_code,
                "body": doc,
            }
        )
        return httpx.Response(response.status_code, headers=response.headers, content=body)


def save(out: Path, polls: list[datetime], exchanges: list[dict[str, Any]]) -> None:
    """Write ``out/exchanges.json``."""
    out.mkdir(parents=True, exist_ok=True)
    doc = {"polls": [p.isoformat() for p in polls], "exchanges": exchanges}
    (out / "exchanges.json").write_text(json.dumps(doc, indent=1) + "\n")


def load_exchanges(folder: Path) -> tuple[list[datetime], list[dict[str, Any]]]:
    """The poll times and exchanges of ``folder/exchanges.json``, plus the JobManager's ``/config`` answer
    where it was recorded beside them (``flink_config.json``, asked by the recorder of the same run; the
    collector asks ``/config`` for the cluster's version)."""
    doc = json.loads((folder / "exchanges.json").read_text())
    exchanges: list[dict[str, Any]] = doc["exchanges"]
    config = folder / "flink_config.json"
    if config.exists() and not any(ex["path"] == "/config" for ex in exchanges):
        body = json.loads(config.read_text())
        exchanges = [*exchanges, {"poll": 0, "path": "/config", "query": "", "status": 200, "body": body}]
    return [datetime.fromisoformat(p) for p in doc["polls"]], exchanges


def replay_transport(exchanges: list[dict[str, Any]]) -> httpx.MockTransport:
    """Answer each (path, query) with its recorded answers in order (the last again when exhausted)."""
    answers: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for ex in exchanges:
        answers.setdefault((ex["path"], ex["query"]), []).append(ex)
        if ex["query"].startswith("get="):  # every metric ?get= answer of a path, in order
            answers.setdefault((ex["path"], "get=*"), []).append(ex)
    served: dict[tuple[str, str], int] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        key = (request.url.path, request.url.query.decode())
        recorded = answers.get(key)
        if not recorded and key[1].startswith("get=") and (key[0], "get=*") in answers:
            asked = set(request.url.params.get("get", "").split(","))
            n = served.get((key[0], "get=*"), 0)
            served[(key[0], "get=*")] = n + 1
            kept = answers[(key[0], "get=*")]
            body = kept[min(n, len(kept) - 1)]["body"]
            return httpx.Response(200, json=[e for e in body if isinstance(e, dict) and e.get("id") in asked])
        if not recorded:
            return httpx.Response(404, json={"errors": ["Not found: " + request.url.path]})
        n = served.get(key, 0)
        served[key] = n + 1
        ex = recorded[min(n, len(recorded) - 1)]
        return httpx.Response(ex["status"], json=ex["body"])

    return httpx.MockTransport(handler)


def replay_clock(polls: list[datetime]) -> Callable[[], datetime]:
    """A clock giving the recorded poll times in turn (the last one again when exhausted)."""
    it: Iterator[datetime] = iter(polls)
    last = [polls[0]]

    def clock() -> datetime:
        last[0] = next(it, last[0])
        return last[0]

    return clock


def _record(out: Path, wait_s: float, interval_s: float) -> None:  # pragma: no cover - needs Flink
    from monitor.commands._check_flink import run_check_flink
    from tests.flink_cluster import TEST_JOB_SOURCE, compile_job, start_cluster

    work = out.parent / (out.name + ".work")
    with start_cluster(work, extra_config={"metrics.fetcher.update-interval": 1000}) as cluster:
        jar = compile_job(cluster.home, [TEST_JOB_SOURCE], work / "job")
        jid = cluster.run_jar(cluster.upload_jar(jar), "tidegauge.TestJob", "idle-late")
        print("job", jid, "waiting", wait_s, "s", file=sys.stderr)
        time.sleep(wait_s)
        # warm the REST metric store as an open web UI does (its first answer to a vertex's metrics is [])
        for vertex in cluster.get_json(f"/jobs/{jid}")["vertices"]:
            cluster.get_json(f"/jobs/{jid}/vertices/{vertex['id']}/metrics")
        time.sleep(3)
        rec = RecordingTransport()
        polls: list[datetime] = []

        def clock() -> datetime:
            now = datetime.now(UTC)
            rec.poll = len(polls)
            polls.append(now)
            return now

        run_check_flink(
            cluster.rest_url, fmt="json", interval=timedelta(seconds=interval_s), clock=clock, transport=rec
        )
        save(out, polls, rec.exchanges)
        (out / "flink_config.json").write_text(json.dumps(cluster.get_json("/config"), indent=1) + "\n")


if __name__ == "__main__":  # pragma: no cover
    _record(
        Path(sys.argv[1]),
        float(sys.argv[2]) if len(sys.argv) > 2 else 60.0,
        float(sys.argv[3]) if len(sys.argv) > 3 else 11.0,
    )
