"""Migration 0005_finding_episodes on SQLite and a real PostgreSQL: it creates the episode tables and the
``alerts.episode_id`` column, drops them again on downgrade without touching the other tables, the ORM
matches what it creates, and episodes (with their links and an alert's reference) round-trip and are
purged by retention."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from monitor.alerts.lifecycle import Alert
from monitor.model import AlertState, Engine, EpisodeEnd, FindingEpisode, JobRef, Scope, Severity
from monitor.store.alert_repo import apply_transitions, load_alerts
from monitor.store.base import Base
from monitor.store.database import make_engine, make_session_factory
from monitor.store.episode_repo import load_episodes, record_episodes
from monitor.store.migrate import current, downgrade, head, upgrade
from monitor.store.repo import purge_before
from tests.migration_cases import migration_url  # noqa: F401 (the `url` fixture)

EPISODE_TABLES = {"finding_episodes", "finding_episode_links"}
T0 = datetime(2026, 12, 1, 9, 43, 23, 562000, tzinfo=UTC)
JOB = JobRef(Engine.SPARK, "ea529203", run_id="171b2fcb", name="backfill_future_row")


def _inspect(url: str) -> tuple[set[str], set[str]]:
    """(table names, the alerts table's columns) at ``url``."""
    engine = make_engine(url)
    try:
        inspector = sa.inspect(engine)
        return set(inspector.get_table_names()), {c["name"] for c in inspector.get_columns("alerts")}
    finally:
        engine.dispose()


def test_upgrade_adds_and_downgrade_drops(url: str) -> None:
    upgrade(url, "0004_flink_sample_fields")
    tables, alert_columns = _inspect(url)
    assert tables & EPISODE_TABLES == set()
    assert "episode_id" not in alert_columns
    assert upgrade(url, "0005_finding_episodes") == ("0004_flink_sample_fields", "0005_finding_episodes")
    tables_after, alert_columns_after = _inspect(url)
    assert tables_after == tables | EPISODE_TABLES
    assert alert_columns_after == alert_columns | {"episode_id"}
    assert downgrade(url, "0004_flink_sample_fields") == ("0005_finding_episodes", "0004_flink_sample_fields")
    assert _inspect(url) == (tables, alert_columns)
    upgrade(url)
    assert current(url) == head()


def test_models_match_migration(url: str) -> None:
    upgrade(url)

    def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
        table = obj if type_ == "table" else getattr(obj, "table", None)
        return table is None or table.name in EPISODE_TABLES | {"alerts"}

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"include_object": include_object, "compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
    finally:
        engine.dispose()


def _episode(ident: str, rule: str, first: datetime, last: datetime, **kw: Any) -> FindingEpisode:
    return FindingEpisode(
        id=ident, fingerprint=ident[:16], rule=rule, job=JOB, scope=kw.pop("scope", Scope()),
        severity=kw.pop("severity", Severity.CRITICAL), first_at=first, last_at=last,
        message=kw.pop("message", f"{rule} held"), **kw,
    )  # fmt: skip


def test_episodes_round_trip_link_and_are_purged(url: str) -> None:
    upgrade(url)
    jump = _episode("a" * 32, "future_timestamp", T0, T0 + timedelta(minutes=2), first_batch_id=6, last_batch_id=9,
                    causes=("b" * 32,), history=True, labels={"check": "x"},
                    details={"ahead_seconds": 2.3e9, "at": T0})  # fmt: skip
    drops = _episode("b" * 32, "late_drop_surge", T0 + timedelta(minutes=1), T0 + timedelta(hours=2),
                     scope=Scope(source="KafkaV2[Subscribe[clicks]]", partition=3), severity=Severity.WARNING,
                     first_batch_id=7, last_batch_id=None, ended_by=EpisodeEnd.TERMINATED, notified=True,
                     cause="future_row", remedy="filter rows ahead of now")  # fmt: skip
    engine = make_engine(url)
    sessions = make_session_factory(engine)
    try:
        with sessions.begin() as session:
            assert record_episodes(session, [jump, drops]).inserted == 2
            alert = Alert("f" * 16, "late_drop_surge", {"engine": "spark", "job_id": JOB.job_id}, Severity.WARNING,
                          AlertState.FIRING, T0, episode_id=drops.id)  # fmt: skip
            apply_transitions(session, [alert], [], [], T0)
        with sessions() as session:
            loaded = load_episodes(session)
            assert load_alerts(session)["f" * 16].episode_id == drops.id
        assert [e.id for e in loaded] == [jump.id, drops.id]
        assert loaded[0] == jump  # the link is read back from both sides
        assert loaded[1] == drops.__class__(**{**_fields(drops), "caused_by": (jump.id,)})
        assert loaded[0].details == {"ahead_seconds": 2.3e9, "at": "2026-12-01T09:43:23.562000+00:00"}
        assert loaded[0].labels == {"check": "x"}
        # retention: the jump ended before the cutoff and goes with its link; the drops are kept
        with sessions.begin() as session:
            counts = purge_before(session, T0 + timedelta(minutes=3))
        assert counts.episodes == 1
        with sessions() as session:
            (kept,) = load_episodes(session)
            assert (kept.id, kept.caused_by) == (drops.id, ())
    finally:
        engine.dispose()


def _fields(episode: FindingEpisode) -> dict[str, Any]:
    return {name: getattr(episode, name) for name in episode.__dataclass_fields__}
