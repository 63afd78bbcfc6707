"""A "live" Spark event log written by a test, line by line, from the recorded real one.

The recorded run (``tests/fixtures/spark/real-4.3.0/eventlog_v2_fixture``, PySpark 4.3.0, query
``wm_gt``: ``withWatermark("event_time", "10 minutes")``, 5-minute windows) is the source of every line:
:class:`LiveEventLog` appends copies of its real ``QueryStartedEvent`` / ``QueryProgressEvent`` lines
with the query id, run id, batch id and trigger ``timestamp`` rewritten consistently, so a daemon tailing
the file sees what it would see from a running query. Everything else in a line (event-time stats, state
operators, sources, durations) stays as Spark wrote it.

Recorded batches used as templates (read off the file by hand, see tests/unit/test_evaluation.py):

====  =========================  =========================  ======  ==========================================
batch watermark                  eventTime.max              rows    note
====  =========================  =========================  ======  ==========================================
2     2024-01-01T11:57:00Z       2024-01-01T12:15:00Z       6       first batch after a restart
4     2024-01-01T12:05:00Z       2024-01-01T12:20:00Z       6       data batch
5     2024-01-01T12:10:00Z       (none)                     0       no-data batch, watermark moved
6     2024-01-01T12:10:00Z       2099-01-01T00:00:00Z       3       one row dated 2099: the future jump
7     2098-12-31T23:50:00Z       (none)                     0       watermark jumped into the future
11    2099-01-01T00:10:00Z       (none)                     0       last batch of the recording
====  =========================  =========================  ======  ==========================================
"""

from __future__ import annotations

import copy
import json
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import zstandard
from sqlalchemy import select

RECORDED_DIR = Path("eventlog_v2_fixture") / "eventlog_v2_local-1795951957158"
RECORDED_FILE = "events_1_local-1795951957158.zstd"
RECORDED_QUERY_ID = "be3a4786-e9ff-44d2-9c1a-ffa8ffe6c0c8"
STARTED = "org.apache.spark.sql.streaming.StreamingQueryListener$QueryStartedEvent"
PROGRESS = "org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent"
TERMINATED = "org.apache.spark.sql.streaming.StreamingQueryListener$QueryTerminatedEvent"


def recorded_events(spark_fixtures: Path) -> list[dict[str, Any]]:
    """The streaming-listener events of the recorded event log, in file order."""
    with (spark_fixtures / RECORDED_DIR / RECORDED_FILE).open("rb") as f:
        data = zstandard.ZstdDecompressor().stream_reader(f).read()
    out = []
    for line in data.decode("utf-8").splitlines():
        if "StreamingQueryListener$Query" in line[:200]:
            out.append(json.loads(line))
    return out


def spark_time(value: datetime) -> str:
    """Spark's progress time format: ``2026-11-29T11:32:50.792Z`` (milliseconds, UTC)."""
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


class LiveEventLog:
    """Appends rewritten recorded lines to ``path`` (an ``.inprogress`` single-file event log).

    Args:
        path: the file (created empty).
        spark_fixtures: the recorded fixtures directory.
        start: time of the first appended event (aware UTC); each event is ``step`` after the previous.
        query_id: the query id to write (default: a new UUID).
    """

    def __init__(
        self,
        path: Path,
        spark_fixtures: Path,
        start: datetime,
        *,
        query_id: str | None = None,
        step: timedelta = timedelta(seconds=1),
    ) -> None:
        self.path = path
        self.query_id = query_id or str(uuid.uuid4())
        self.run_id = ""
        self.next_batch = 0
        self.clock = start
        self.step = step
        self.times: dict[int, datetime] = {}
        events = recorded_events(spark_fixtures)
        self._started = next(e for e in events if e["Event"] == STARTED)
        self._progress = {e["progress"]["batchId"]: e for e in events if e["Event"] == PROGRESS}
        self._terminated = next(e for e in events if e["Event"] == TERMINATED)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    def _append(self, events: list[dict[str, Any]]) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            for event in events:
                f.write(json.dumps(event, separators=(",", ":")) + "\n")

    def _tick(self) -> datetime:
        now = self.clock
        self.clock += self.step
        return now

    def start_run(self) -> str:
        """Append a ``QueryStartedEvent`` of a new run (new ``runId``); returns the run id."""
        self.run_id = str(uuid.uuid4())
        event = copy.deepcopy(self._started)
        event.update(id=self.query_id, runId=self.run_id, timestamp=spark_time(self._tick()))
        self._append([event])
        return self.run_id

    def terminate(self, exception: str | None = None) -> None:
        """Append the run's ``QueryTerminatedEvent`` (a recorded one with the ids rewritten; Spark writes
        no time in it) with ``exception`` (``None``: a clean stop)."""
        event = copy.deepcopy(self._terminated)
        event.update(id=self.query_id, runId=self.run_id, exception=exception)
        self._append([event])

    def batches(self, *templates: int) -> list[int]:
        """Append one progress line per recorded batch id in ``templates`` (next batch ids, next times).

        Returns:
            The batch ids written.
        """
        if not self.run_id:
            self.start_run()
        events = []
        written = []
        for template in templates:
            event = copy.deepcopy(self._progress[template])
            at = self._tick()
            event["progress"].update(
                id=self.query_id, runId=self.run_id, batchId=self.next_batch, timestamp=spark_time(at)
            )
            events.append(event)
            self.times[self.next_batch] = at
            written.append(self.next_batch)
            self.next_batch += 1
        self._append(events)
        return written

    def next_progress(self, template: int) -> dict[str, Any]:
        """The next progress event (next batch id and time, from recorded batch ``template``), not written:
        a test changes it into a poison line and writes it with :meth:`append_line`."""
        if not self.run_id:
            self.start_run()
        event = copy.deepcopy(self._progress[template])
        at = self._tick()
        event["progress"].update(id=self.query_id, runId=self.run_id, batchId=self.next_batch, timestamp=spark_time(at))
        self.times[self.next_batch] = at
        self.next_batch += 1
        return event

    def append_line(self, line: str | bytes) -> None:
        """Append one raw line (a newline is added) as Spark would append an event."""
        data = line.encode("utf-8", errors="surrogatepass") if isinstance(line, str) else line
        with self.path.open("ab") as f:
            f.write(data + b"\n")


def stored_progress_batches(store: Any) -> dict[str, list[int | None]]:
    """Each job's stored progress batch ids in ``store`` (a :class:`monitor.store.Store`), sorted; a batch
    stored twice shows twice. Keyed by job id (a live log's ``query_id``)."""
    from monitor.store.tables import JobRow, SampleRow

    with store.sessions() as session:
        rows = session.execute(
            select(JobRow.job_id, SampleRow.batch_id)
            .join(JobRow, JobRow.id == SampleRow.job_pk)
            .where(SampleRow.kind == "progress", SampleRow.scope_source.is_(None))
        ).all()
    out: dict[str, list[int | None]] = {}
    for job_id, batch_id in rows:
        out.setdefault(job_id, []).append(batch_id)
    return {k: sorted(v, key=lambda b: -1 if b is None else b) for k, v in out.items()}
