"""Measuring real ``tidegauge run`` subprocesses from outside: CPU and memory from /proc, the database they
write to (SQLite file or a throw-away PostgreSQL server) and PostgreSQL's own counters (pg_stat_database,
pg_stat_activity). Shared by the one-instance and fleet benchmarks (tests/benchmarks/bench_one_instance.py,
bench_fleet.py). Not a test: these are instruments.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

_TICKS = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far (/proc/PID/stat utime, stime)."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14, 15)


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of process ``pid``, its reaped children (cutime, cstime) and its live children: a
    PostgreSQL postmaster and its backends, including backends that already exited."""
    fields = _stat_fields(pid)
    total = sum(int(f) for f in fields[11:15]) / _TICKS
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            child = _stat_fields(int(entry.name))
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(child[1]) == pid:  # ppid (field 4)
            total += (int(child[11]) + int(child[12])) / _TICKS
    return total


def rss_mib(pid: int) -> tuple[float, float]:
    """``(resident, peak resident)`` memory of process ``pid`` in MiB (/proc/PID/status VmRSS, VmHWM)."""
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024


@contextmanager
def database(backend: str, work: Path) -> Iterator[tuple[str, Any]]:
    """``(SQLAlchemy URL, PostgresServer or None)`` of an empty database: ``sqlite`` (a file in ``work``) or
    ``postgresql`` (a throw-away server from tests/pg.py, stopped on exit)."""
    if backend == "sqlite":
        yield f"sqlite:///{work / 'tg.db'}", None
        return
    from tests.pg import start_postgres

    server = start_postgres(os.environ)
    try:
        yield server.create_database(), server
    finally:
        server.stop()


def postmaster_pid(server: Any) -> int:
    """The PostgreSQL server's main process id (first line of ``postmaster.pid``)."""
    return int((Path(server.data_dir) / "postmaster.pid").read_text().split()[0])


def _connect(server: Any, url: str) -> Any:
    import psycopg

    return psycopg.connect(
        host="127.0.0.1", port=server.port, user="postgres", dbname=url.rsplit("/", 1)[1], autocommit=True
    )


class PgCounters(NamedTuple):
    """pg_stat_database counters of one database (cumulative since the server started)."""

    xact_commit: int
    tup_inserted: int
    tup_updated: int
    tup_deleted: int

    @property
    def rows_written(self) -> int:
        """Rows inserted + updated + deleted."""
        return self.tup_inserted + self.tup_updated + self.tup_deleted

    def __sub__(self, other: tuple[Any, ...]) -> PgCounters:
        return PgCounters(*(a - b for a, b in zip(self, other, strict=True)))


def pg_counters(server: Any, url: str) -> PgCounters:
    """The database's transactions committed and rows written so far (pg_stat_database; PostgreSQL 15+
    flushes a backend's counts when it goes idle, at most once a second)."""
    name = url.rsplit("/", 1)[1]
    with _connect(server, url) as conn:
        row = conn.execute(
            "SELECT xact_commit, tup_inserted, tup_updated, tup_deleted FROM pg_stat_database WHERE datname = %s",
            (name,),
        ).fetchone()
    assert row is not None
    return PgCounters(*(int(v) for v in row))


class ActivitySampler:
    """Samples pg_stat_activity of one database every ``interval_s`` in a thread: what the daemons'
    connections are doing (``state``, ``wait_event_type:wait_event``) and the oldest open transaction.

    ``counts()`` gives ``{"active" | "idle in transaction" | "idle" | "active wait Lock:transactionid", ...:
    samples}`` summed over connections; ``longest_xact_s`` the longest transaction seen open, ``longest_xact_query`` its statement then."""

    def __init__(self, server: Any, url: str, interval_s: float = 0.5) -> None:
        self._server, self._url, self._interval_s = server, url, interval_s
        self._stop = threading.Event()
        self._counts: Counter[str] = Counter()
        self.longest_xact_s = 0.0
        self.longest_xact_query = ""  # the last statement of that transaction when it was seen longest
        self.samples = 0
        self._thread = threading.Thread(target=self._run, name="pg-activity", daemon=True)

    def __enter__(self) -> ActivitySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        name = self._url.rsplit("/", 1)[1]
        with _connect(self._server, self._url) as conn:
            while not self._stop.wait(self._interval_s):
                rows = conn.execute(
                    "SELECT state, wait_event_type, wait_event, EXTRACT(EPOCH FROM now() - xact_start), query "
                    "FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid() AND backend_type = 'client backend'",
                    (name,),
                ).fetchall()
                self.samples += 1
                for state, wait_type, wait, xact_age, query in rows:
                    key = str(state)
                    if wait_type and wait_type != "Client":
                        key += f" wait {wait_type}:{wait}"
                    self._counts[key] += 1
                    if xact_age is not None and float(xact_age) > self.longest_xact_s:
                        self.longest_xact_s = float(xact_age)
                        self.longest_xact_query = " ".join(str(query).split())[:160]

    def counts(self) -> dict[str, int]:
        """Samples per connection state (see the class)."""
        return dict(self._counts.most_common())


def enable_statement_stats(server: Any, url: str) -> None:
    """Load ``pg_stat_statements`` into the throw-away server (restarts it: a preload library) and create the
    extension in ``url``'s database, so :func:`statement_stats` can count the statements the daemons run
    (a server that has it loaded already is not restarted)."""
    with _connect(server, url) as conn:
        loaded = "pg_stat_statements" in str(conn.execute("SHOW shared_preload_libraries").fetchone())
    if not loaded:
        with (Path(server.data_dir) / "postgresql.auto.conf").open("a") as f:
            f.write("shared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track = 'top'\n")
        server.halt()
        server.resume()
    with _connect(server, url) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")


def reset_statement_stats(server: Any, url: str) -> None:
    """Zero the pg_stat_statements counters (all databases of the server)."""
    with _connect(server, url) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")


class StatementStats(NamedTuple):
    """pg_stat_statements of one database since the last reset: ``calls`` statement executions (each row of
    a client-side ``executemany`` is one execution), ``rows`` rows they returned or wrote, ``exec_s`` server
    execution time, and the ``top`` statements by execution time as ``(calls, rows, exec_s, query text)``."""

    calls: int
    rows: int
    exec_s: float
    top: list[tuple[int, int, float, str]]


def statement_stats(server: Any, url: str, top: int = 6) -> StatementStats:
    """The statements run in ``url``'s database since :func:`reset_statement_stats` (see :class:`StatementStats`)."""
    name = url.rsplit("/", 1)[1]
    with _connect(server, url) as conn:
        rows = conn.execute(
            "SELECT s.calls, s.rows, s.total_exec_time / 1000.0, s.query FROM pg_stat_statements s "
            "JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = %s AND s.query NOT LIKE %s "
            "ORDER BY s.total_exec_time DESC",
            (name, "%pg_stat%"),
        ).fetchall()
    return StatementStats(
        calls=sum(int(r[0]) for r in rows),
        rows=sum(int(r[1]) for r in rows),
        exec_s=sum(float(r[2]) for r in rows),
        top=[(int(c), int(n), float(t), " ".join(str(q).split())[:150]) for c, n, t, q in rows[:top]],
    )


def stored_batches(engine: Any) -> int:
    """Progress batches stored so far (job-level ``progress`` samples) in the database of ``engine`` (give
    it a READ_ONLY engine, see monitor.store.database, so the count never queues behind a daemon's writes)."""
    from sqlalchemy import func, select

    from monitor.store.tables import SampleRow

    query = select(func.count()).select_from(SampleRow).where(
        SampleRow.kind == "progress", SampleRow.scope_source.is_(None)
    )
    with engine.connect() as conn:
        return int(conn.scalar(query) or 0)


def evaluated_jobs(engine: Any) -> int:
    """Jobs with an evaluation cursor (evaluated at least once) in the database of ``engine`` (READ_ONLY, as
    :func:`stored_batches`)."""
    from sqlalchemy import func, select

    from monitor.daemon.histories import EVAL_CURSOR
    from monitor.store.tables import CollectorCursorRow

    query = select(func.count()).select_from(CollectorCursorRow).where(CollectorCursorRow.collector == EVAL_CURSOR)
    with engine.connect() as conn:
        return int(conn.scalar(query) or 0)
