"""The store on SQLite: migrations, round trips, idempotent saves, atomic bad input, schema check, WAL,
default path, URL redaction and the ``tidegauge db`` commands. Shared checks: tests/store_cases.py."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory

from monitor import cli
from monitor.errors import ConfigError, InputError, SchemaOutdatedError
from monitor.model import CollectorError, Engine, JobRef, PollResult, Sample
from monitor.store import (
    check_schema,
    current,
    default_db_path,
    downgrade,
    get_cursor,
    head,
    iter_raw_documents,
    load_samples,
    make_engine,
    make_session_factory,
    open_store,
    redact_url,
    save_poll,
    set_cursor,
    upgrade,
)
from monitor.store import migrate as migrate_module
from monitor.store.tables import JobRow, SampleRow
from tests import store_cases


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'tidegauge.db'}"


@pytest.fixture
def store_url(db_url: str) -> str:
    upgrade(db_url)
    return db_url


# ---------------------------------------------------------------------------------------------- migrations


def test_upgrade_downgrade_upgrade(db_url: str) -> None:
    store_cases.check_migration_cycle(db_url)


def test_models_match_migrations(db_url: str) -> None:
    store_cases.check_models_match_migrations(db_url)


def test_initial_revision_is_first() -> None:
    script = ScriptDirectory.from_config(migrate_module.alembic_config())
    initial = script.get_revision("0001_initial")
    assert initial is not None
    assert initial.down_revision is None


def test_unknown_revision_is_input_error(store_url: str) -> None:
    with pytest.raises(InputError, match=r"cannot downgrade database sqlite:///.* to 'nope'"):
        downgrade(store_url, "nope")
    assert current(store_url) == head()


# --------------------------------------------------------------------------------------------- round trip


def test_sample_round_trip(db_url: str, spark_fixtures: Path) -> None:
    store_cases.check_round_trip(db_url, spark_fixtures)


def test_duplicate_save_is_idempotent(db_url: str, spark_fixtures: Path) -> None:
    store_cases.check_idempotent(db_url, spark_fixtures)


def test_times_are_stored_as_utc_text(store_url: str) -> None:
    # 2099-01-01 02:10 at +02:00 is 00:10 UTC; SQLite holds naive UTC text with microseconds.
    when = datetime(2099, 1, 1, 2, 10, tzinfo=timezone(timedelta(hours=2)))
    store = open_store(store_url)
    try:
        with store.sessions.begin() as session:
            save_poll(session, PollResult((Sample(JobRef(Engine.SPARK, "q"), when, batch_id=0),)))
    finally:
        store.dispose()
    path = store_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT observed_at FROM samples").fetchall() == [("2099-01-01 00:10:00.000000",)]


def test_replace_overwrites_values_of_the_same_observation(store_url: str) -> None:
    job = JobRef(Engine.SPARK, "q", run_id="r")
    when = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    store = open_store(store_url)
    try:
        with store.sessions.begin() as session:
            save_poll(session, PollResult((Sample(job, when, batch_id=3, num_input_rows=None),)))
        fixed = Sample(job, when, batch_id=3, num_input_rows=42)
        with store.sessions.begin() as session:
            assert save_poll(session, PollResult((fixed,))).samples_skipped == 1
        with store.sessions() as session:
            assert load_samples(session)[0].num_input_rows is None  # first write wins without replace
        with store.sessions.begin() as session:
            assert save_poll(session, PollResult((fixed,)), replace=True).samples_replaced == 1
        with store.sessions() as session:
            assert load_samples(session) == [fixed]
    finally:
        store.dispose()


def test_raw_documents_are_compressed(store_url: str, spark_fixtures: Path) -> None:
    raw = store_cases.real_raw_documents(spark_fixtures)
    store = open_store(store_url)
    try:
        with store.sessions.begin() as session:
            save_poll(session, PollResult(raw=tuple(raw)), collector="spark-listener")
        with store.engine.connect() as conn:
            sizes = conn.execute(
                sa.text("SELECT codec, length(payload) FROM raw_documents ORDER BY id")
            ).all()
        originals = [
            len((spark_fixtures / name).read_bytes()) for name in (store_cases.GT_FILE, store_cases.IDLE_FILE)
        ]
        assert [codec for codec, _ in sizes] == ["zstd", "zstd"]
        assert all(size < original / 2 for (_, size), original in zip(sizes, originals, strict=True))
        with store.sessions() as session:
            assert [d.kind for d in iter_raw_documents(session, kind="progress", collector="other")] == []
    finally:
        store.dispose()


def test_raw_documents_without_a_collector_name_are_refused(store_url: str, spark_fixtures: Path) -> None:
    store = open_store(store_url)
    try:
        with store.sessions.begin() as session, pytest.raises(ValueError, match="pass collector="):
            save_poll(session, PollResult(raw=tuple(store_cases.real_raw_documents(spark_fixtures))))
    finally:
        store.dispose()


# ----------------------------------------------------------------------------------------------- bad input


def test_bad_input_writes_nothing_and_keeps_earlier_work(store_url: str) -> None:
    store = open_store(store_url)
    good_job, bad_job = JobRef(Engine.SPARK, "good"), JobRef(Engine.SPARK, "new-job")
    when = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    good = PollResult((Sample(good_job, when, batch_id=1),))
    try:
        with store.sessions.begin() as session:
            save_poll(session, good)
            # NaN is not JSON: refused before any write, naming the field.
            nan = Sample(bad_job, when, extra={"x": float("nan")})
            with pytest.raises(ValueError, match=r"PollResult\.samples\[1\]\.extra is not storable as JSON"):
                save_poll(session, PollResult((Sample(bad_job, when, batch_id=2), nan)))
            # A value the database cannot hold (2**70 overflows 64-bit): the poll's savepoint is rolled back,
            # including the new job row it had already flushed; earlier work in the transaction stays.
            # (the model refuses such a sample, so force the value in, as a buggy collector could)
            with pytest.raises(ValueError, match=r"Sample\.num_input_rows: integer out of range"):
                Sample(bad_job, when, num_input_rows=2**70)
            overflow = Sample(bad_job, when + timedelta(seconds=1), batch_id=3)
            object.__setattr__(overflow, "num_input_rows", 2**70)
            with pytest.raises(OverflowError):
                save_poll(session, PollResult((overflow,)))
            # Naive raw-document time.
            with pytest.raises(ValueError, match=r"PollResult\.raw\[0\] observed_at must be timezone-aware"):
                save_poll(
                    session, PollResult(raw=((bad_job, datetime(2026, 1, 1), "progress", {}),)), collector="c"
                )
        with store.sessions() as session:
            assert [s.job.job_id for s in load_samples(session)] == ["good"]
            assert session.scalars(sa.select(JobRow.job_id)).all() == ["good"]
    finally:
        store.dispose()


def test_failed_transaction_keeps_what_was_committed(store_url: str) -> None:
    store = open_store(store_url)
    when = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    try:
        with store.sessions.begin() as session:
            save_poll(session, PollResult((Sample(JobRef(Engine.SPARK, "a"), when),)))
        with pytest.raises(RuntimeError, match="crash"), store.sessions.begin() as session:
            save_poll(session, PollResult((Sample(JobRef(Engine.SPARK, "b"), when),)))
            raise RuntimeError("crash")
        with store.sessions() as session:
            assert session.scalars(sa.select(JobRow.job_id)).all() == ["a"]
            assert session.scalar(sa.select(sa.func.count()).select_from(SampleRow)) == 1
    finally:
        store.dispose()


def test_naive_datetimes_are_refused_on_query(store_url: str) -> None:
    store = open_store(store_url)
    try:
        with store.sessions() as session, pytest.raises(ValueError, match="since must be timezone-aware"):
            load_samples(session, since=datetime(2026, 1, 1))
    finally:
        store.dispose()


# ----------------------------------------------------------------------------------------------- cursors


def test_cursor_round_trip_and_update(store_url: str) -> None:
    store = open_store(store_url)
    t0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    path = "/data/events/eventlog_v2_app-1/events_1_app-1.zstd"
    try:
        with store.sessions.begin() as session:
            assert get_cursor(session, "spark-eventlog", path) is None
            set_cursor(session, "spark-eventlog", path, {"offset": 4096, "inode": 12, "size": 9000}, t0)
        with store.sessions.begin() as session:
            set_cursor(session, "spark-eventlog", path, {"offset": 9000, "inode": 12, "size": 9000}, t0)
            set_cursor(session, "spark-eventlog", "/other", {"offset": 1}, t0)
        with store.sessions() as session:
            assert get_cursor(session, "spark-eventlog", path) == {"offset": 9000, "inode": 12, "size": 9000}
            assert get_cursor(session, "spark-eventlog", "/other") == {"offset": 1}
            assert get_cursor(session, "flink-rest", path) is None
    finally:
        store.dispose()


# ------------------------------------------------------------------------------------------- schema check


def test_empty_database_is_refused(db_url: str) -> None:
    sqlite3.connect(db_url.removeprefix("sqlite:///")).close()  # an empty SQLite file
    with pytest.raises(SchemaOutdatedError) as info:
        open_store(db_url)
    assert str(info.value) == (
        f"database {db_url} has no tidegauge schema (empty database): "
        f"run `tidegauge db upgrade --db {db_url}`"
    )


def test_downgraded_database_is_refused(store_url: str) -> None:
    downgrade(store_url, "base")
    with pytest.raises(
        SchemaOutdatedError, match=r"empty database\): run `tidegauge db upgrade --db sqlite:///"
    ):
        open_store(store_url)


def test_outdated_database_is_refused(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    upgrade(db_url, "0001_initial")
    if head() == "0001_initial":  # until a second revision exists, pretend the code's head moved on
        monkeypatch.setattr(migrate_module, "head", lambda: "0002_future")
    need = migrate_module.head()
    with pytest.raises(SchemaOutdatedError) as info:
        open_store(db_url)
    assert str(info.value) == (
        f"database schema at 0001_initial, code needs {need}: run `tidegauge db upgrade --db {db_url}`"
    )


def test_newer_database_is_refused(store_url: str) -> None:
    engine = make_engine(store_url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE alembic_version SET version_num = '0999_from_the_future'"))
        with pytest.raises(SchemaOutdatedError, match=r"does not know .*upgrade tidegauge"):
            check_schema(engine)
    finally:
        engine.dispose()


def test_message_hides_the_password() -> None:
    url = "postgresql+psycopg://alice:s3cret@db.example:5432/tidegauge"
    assert redact_url(url) == "postgresql+psycopg://alice:***@db.example:5432/tidegauge"


# --------------------------------------------------------------------------------------------- connection


def test_sqlite_pragmas(store_url: str) -> None:
    engine = make_engine(store_url)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 10_000
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        engine.dispose()


def test_sqlite_foreign_keys_are_enforced(store_url: str) -> None:
    engine = make_engine(store_url)
    sessions = make_session_factory(engine)
    try:
        with pytest.raises(sa.exc.IntegrityError, match="FOREIGN KEY"), sessions.begin() as session:
            session.execute(
                sa.insert(SampleRow).values(
                    dedup_key="x" * 64,
                    job_pk=999,
                    observed_at=datetime(2026, 1, 1, tzinfo=UTC),
                    kind="gauge",
                    collector="c",
                    extra={},
                )
            )
    finally:
        engine.dispose()


def test_default_path_follows_xdg() -> None:
    assert default_db_path({"XDG_DATA_HOME": "/srv/data", "HOME": "/home/a"}) == Path(
        "/srv/data/tidegauge/tidegauge.db"
    )
    # A relative XDG_DATA_HOME is ignored (XDG base-directory spec).
    assert default_db_path({"XDG_DATA_HOME": "rel", "HOME": "/home/a"}) == Path(
        "/home/a/.local/share/tidegauge/tidegauge.db"
    )
    assert default_db_path({"HOME": "/home/a"}) == Path("/home/a/.local/share/tidegauge/tidegauge.db")
    with pytest.raises(ConfigError, match="neither XDG_DATA_HOME nor HOME"):
        default_db_path({})


def test_default_database_is_created_under_xdg(tmp_path: Path) -> None:
    environ = {"XDG_DATA_HOME": str(tmp_path / "xdg")}
    upgrade(None, environ=environ)
    assert (tmp_path / "xdg" / "tidegauge" / "tidegauge.db").is_file()
    assert current(None, environ=environ) == head()


def test_invalid_url_is_config_error() -> None:
    with pytest.raises(ConfigError, match="invalid database URL"):
        make_engine("not a url")


# ------------------------------------------------------------------------------------------------------ CLI


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        cli.main(argv)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_upgrade_current_downgrade(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    fix = f"run `tidegauge db upgrade --db {db_url}`"
    path = db_url.removeprefix("sqlite:///")
    assert run_cli(["db", "current", "--db", db_url], capsys) == (
        2, "", f"tidegauge: error: no database at {path}: {fix}\n"
    )  # fmt: skip
    assert not Path(path).exists()
    upgraded = f"{db_url}: upgraded from empty (no schema) to {head()}\n"
    assert run_cli(["db", "upgrade", "--db", db_url], capsys) == (0, upgraded, "")
    assert run_cli(["db", "upgrade", "--db", db_url], capsys)[1] == f"{db_url}: already at {head()}\n"
    assert run_cli(["db", "current", "--db", db_url], capsys)[1] == f"{db_url}: {head()} (head)\n"
    assert run_cli(["db", "downgrade", "base", "--db", db_url], capsys)[1] == (
        f"{db_url}: downgraded from {head()} to empty (no schema)\n"
    )
    assert run_cli(["db", "current", "--db", db_url], capsys) == (
        1, f"{db_url}: empty (no schema) (code needs {head()}: {fix})\n", ""
    )  # fmt: skip
    code, out, err = run_cli(["db", "downgrade", "nope", "--db", db_url], capsys)
    assert (code, out) == (2, "")
    assert err.startswith("tidegauge: error: cannot downgrade database")


def test_cli_never_prints_the_password(capsys: pytest.CaptureFixture[str]) -> None:
    # Nothing listens on port 9 of the loopback: the connection is refused at once.
    code, out, err = run_cli(
        ["db", "current", "--db", "postgresql+psycopg://bob:hunter2@127.0.0.1:9/x"], capsys
    )
    assert code == 2
    assert "hunter2" not in out + err
    assert err.startswith("tidegauge: error: database postgresql+psycopg://bob:***@127.0.0.1:9/x: ")


def test_collector_errors_keep_retryable_flag(store_url: str) -> None:
    store = open_store(store_url)
    when = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    try:
        with store.sessions.begin() as session:
            save_poll(
                session,
                PollResult(errors=(CollectorError("c", "t", "404 not found", when, retryable=False),)),
            )
        with store.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT retryable FROM collector_errors")).scalar() == 0
    finally:
        store.dispose()


def test_json_columns_decode_what_the_standard_library_wrote() -> None:
    # the engine's JSON decoder (orjson, falling back to the standard library) reads back everything
    # json.dumps writes: NaN/Infinity literals and integers beyond 64 bits included
    import json
    import math

    from monitor.store.database import decode_json_column

    value = {"num_sources": 2, "big": 2**70, "rate": float("nan"), "inf": float("inf"), "name": "é"}
    decoded = decode_json_column(json.dumps(value))
    assert decoded["big"] == 2**70 and math.isnan(decoded["rate"]) and decoded["inf"] == math.inf
    assert {k: decoded[k] for k in ("num_sources", "name")} == {"num_sources": 2, "name": "é"}
    assert decode_json_column(b'{"a": [1, 2.5, null]}') == {"a": [1, 2.5, None]}
    with pytest.raises(ValueError):
        decode_json_column("{not json")
