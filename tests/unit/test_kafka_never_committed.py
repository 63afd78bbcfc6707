"""A partition a live member owns but the group never committed, while records wait (issue 17 §4): the
collector's two readings of the group's ``auto.offset.reset`` (collectors.kafka.lag.Uncommitted), carried
in the samples, the ``consumer_lag`` rule's NEVER_COMMITTED finding, the facts and the ``check kafka``
report. The broker is a fake here (its answers shaped as the real AdminClient's, see
tests/fixtures/kafka/never-committed for a recording); the real one is in
tests/integration/test_kafka_collector.py."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from collectors.kafka import KafkaLagCollector, KafkaOptions, group_samples
from collectors.kafka.admin import GroupDescription, RecordTime
from collectors.kafka.lag import TopicPartition, group_lag
from monitor.facts import job_facts
from monitor.model import Engine, Sample, Severity
from monitor.reports.kafka import KafkaReport, render_json, render_text
from rules.consumer_lag import LagParams, evaluate_lag
from rules.history import job_history

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
T0_MS = 1_795_953_600_000  # T0 in epoch ms, written out
MIN_TIME = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class FakeBroker:
    """What the AdminClient answers for one group ``g`` on topic ``t`` (2 partitions): partition 0
    committed, partition 1 owned by the one member and never committed (``OffsetFetch`` -1 -> ``None``)."""

    log: dict[TopicPartition, tuple[int, int]] = field(default_factory=dict)
    committed_offsets: dict[TopicPartition, int | None] = field(default_factory=dict)
    assigned: tuple[TopicPartition, ...] = (("t", 0), ("t", 1))
    record_ms: dict[TopicPartition, int] = field(default_factory=dict)
    probes: list[dict[TopicPartition, int]] = field(default_factory=list)

    def close(self) -> None:
        pass

    def topics(self) -> dict[str, int]:
        return {"t": 2}

    def list_groups(self) -> tuple[list[str], list[str]]:
        return ["g"], []

    def describe(self, groups: Iterable[str]) -> dict[str, GroupDescription | str]:
        return {g: GroupDescription(g, "Stable", 1, self.assigned) for g in groups}

    def committed(self, groups: Iterable[str]) -> dict[str, dict[TopicPartition, int | None] | str]:
        return {g: dict(self.committed_offsets) for g in groups}

    def log_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> tuple[dict[TopicPartition, tuple[int | None, int | None]], dict[str, str]]:
        return {k: self.log[k] for k in partitions if k in self.log}, {}

    def record_times(self, wanted: Mapping[TopicPartition, int], timeout_s: float) -> dict[TopicPartition, RecordTime]:
        self.probes.append(dict(wanted))
        return {k: RecordTime(o, self.record_ms[k], False) for k, o in wanted.items() if k in self.record_ms}


def collector(broker: FakeBroker, **kw: object) -> KafkaLagCollector:
    opts = KafkaOptions("prod", "127.0.0.1:9092", groups=("g",), **kw)  # type: ignore[arg-type]
    return KafkaLagCollector(opts, source=broker)  # type: ignore[arg-type]


def broker() -> FakeBroker:
    # partition 0: caught up (committed 50 of 50); partition 1: records 100..399 (log start 100 after retention), never
    # committed; its record at offset 100 was written 2026-11-29T11:50Z (10 min before T0)
    return FakeBroker(
        log={("t", 0): (0, 50), ("t", 1): (100, 400)},
        committed_offsets={("t", 0): 50},
        record_ms={("t", 0): T0_MS - 5_000, ("t", 1): T0_MS - 600_000},
    )


def test_both_readings_from_the_first_poll_that_saw_it_owned_and_uncommitted() -> None:
    b = broker()
    c = collector(b, lag_seconds="exact")
    g = c.snapshot(T0).groups[0]
    p1 = g.partitions[1]
    assert p1.committed is None and p1.lag is None and p1.assigned
    u = p1.uncommitted
    assert u is not None
    # earliest: 400 - 100 = 300 wait, the oldest written at T0 - 10 min (the probe read the log start, 100);
    # latest: the first sighting is this poll, so none yet
    assert (u.if_earliest, u.if_latest, u.since_ms, u.log_end_then, u.oldest_record_ms) == (
        300, 0, T0_MS, 400, T0_MS - 600_000,
    )
    assert b.probes[0][("t", 1)] == 100
    assert p1.note == (
        "never committed: 300 record(s) wait if auto.offset.reset=earliest, 0 if latest "
        "(the group's setting is not visible to tidegauge)"
    )
    assert g.lag == 0 and g.unknown_partitions == 1  # the committed partition's lag; the other is not 0
    assert g.notes[0] == (
        "1 partition(s) owned by a live member were never committed by the group: 300 record(s) wait if its "
        "auto.offset.reset is earliest, 0 if latest (tidegauge cannot see the group's setting: set "
        "auto_offset_reset on the target); not in the lag total"
    )
    # 70 records produced by the next poll: the latest reading counts them from the first sighting
    b.log[("t", 1)] = (100, 470)
    g2 = c.snapshot(T0 + timedelta(seconds=30)).groups[0]
    u2 = g2.partitions[1].uncommitted
    assert u2 is not None and (u2.if_earliest, u2.if_latest, u2.since_ms) == (370, 70, T0_MS)


def test_a_commit_or_a_lost_assignment_forgets_the_first_sighting() -> None:
    b = broker()
    c = collector(b, lag_seconds="none")
    c.snapshot(T0)
    b.committed_offsets[("t", 1)] = 400  # committed: lag known again
    g = c.snapshot(T0 + timedelta(seconds=30)).groups[0]
    assert g.partitions[1].uncommitted is None and g.partitions[1].lag == 0
    b.committed_offsets.pop(("t", 1))  # offsets deleted (a reset tool, expiry): seen again from now
    b.log[("t", 1)] = (100, 450)
    u = c.snapshot(T0 + timedelta(seconds=60)).groups[0].partitions[1].uncommitted
    assert u is not None and (u.since_ms, u.log_end_then, u.if_latest) == (T0_MS + 60_000, 450, 0)
    b.assigned = (("t", 0),)  # nobody owns it: no reading, the plain unknown lag
    p = c.snapshot(T0 + timedelta(seconds=90)).groups[0].partitions[1]
    assert p.uncommitted is None and p.note == "no committed offset"


def test_an_empty_partition_owned_and_uncommitted_has_no_note_but_is_tracked() -> None:
    b = broker()
    b.log[("t", 1)] = (0, 0)
    c = collector(b, lag_seconds="none")
    p = c.snapshot(T0).groups[0].partitions[1]
    assert p.uncommitted is not None and p.uncommitted.if_earliest == 0 and p.note == "no committed offset"
    b.log[("t", 1)] = (0, 25)  # 25 produced after the member got it: both readings say 25
    u = c.snapshot(T0 + timedelta(seconds=30)).groups[0].partitions[1].uncommitted
    assert u is not None and (u.if_earliest, u.if_latest) == (25, 25)


def test_the_configured_reset_gives_one_reading() -> None:
    lag = group_lag(
        "g", state="Stable", members=1, committed={}, assigned=[("t", 0)], partitions_of={"t": 1},
        log_offsets={("t", 0): (10, 110)}, first_seen={("t", 0): (T0_MS, 80)}, auto_offset_reset="latest",
    )
    p = lag.partitions[0]
    assert p.note == "never committed: 30 record(s) produced since it was assigned wait (auto.offset.reset=latest)"
    assert p.uncommitted is not None and p.uncommitted.waiting == 30
    assert lag.notes[0].endswith("30 record(s) produced since they were assigned wait (auto.offset.reset=latest), "
                                 "not in the lag total")
    with pytest.raises(ValueError, match="auto_offset_reset must be earliest or latest, not 'none'"):
        KafkaOptions("prod", "h:1", auto_offset_reset="none")


def test_the_samples_carry_the_numbers() -> None:
    c = collector(broker(), lag_seconds="exact")
    g = c.snapshot(T0).groups[0]
    samples = {(s.scope.source, s.scope.partition): s for s in group_samples("prod", g, T0)}
    p1 = samples[("t", 1)]
    assert p1.committed_offset is None and p1.lag_offsets is None
    assert {k: p1.extra[k] for k in ("uncommitted_if_earliest", "uncommitted_if_latest", "uncommitted_since_ms",
                                     "oldest_waiting_ms")} == {
        "uncommitted_if_earliest": 300, "uncommitted_if_latest": 0, "uncommitted_since_ms": T0_MS,
        "oldest_waiting_ms": T0_MS - 600_000,
    }
    assert "auto_offset_reset" not in p1.extra
    whole = samples[(None, None)].extra
    assert (whole["uncommitted_partitions"], whole["uncommitted_if_earliest"], whole["uncommitted_if_latest"]) == (
        1, 300, 0,
    )
    assert "uncommitted_partitions" not in samples[("t", None)].extra


def polls(b: FakeBroker, every_s: int, produce: int, count: int, **kw: object) -> list[Sample]:
    """``count`` polls ``every_s`` apart from T0, ``produce`` records added to partition 1 between polls."""
    c = collector(b, **kw)
    out: list[Sample] = []
    for i in range(count):
        start, end = b.log[("t", 1)]
        if i:
            b.log[("t", 1)] = (start, end + produce)
        out.extend(group_samples("prod", c.snapshot(T0 + timedelta(seconds=every_s * i)).groups[0],
                                 T0 + timedelta(seconds=every_s * i)))
    return out


def findings(samples: list[Sample], now: datetime, **params: object) -> list:  # type: ignore[type-arg]
    h = job_history(samples)
    assert h is not None
    return [f for f in evaluate_lag(LagParams(**params), h, now) if f.details["status"] == "NEVER_COMMITTED"]  # type: ignore[arg-type]


def test_rule_info_while_new_then_warning_once_records_wait_longer_than_the_threshold() -> None:
    # polls every 60 s, 10 records produced each; the first sighting at T0 (log end 400)
    samples = polls(broker(), 60, 10, 4, lag_seconds="exact")  # T0 .. T0+3min: 30 produced since
    [f] = findings(samples, T0 + timedelta(minutes=3))
    assert f.severity is Severity.INFO and f.scope.partition == 1
    assert f.details == {
        "status": "NEVER_COMMITTED", "lag": None, "waiting_if_earliest": 330, "waiting_if_latest": 30,
        "auto_offset_reset": None, "uncommitted_since": "2026-11-29T12:00Z", "oldest_waiting": "2026-11-29T11:50Z",
        "waited_seconds": 180.0,
    }
    assert f.message == (
        "source `t` partition 1: never committed — a live member of the group owns this partition but the group has no "
        "committed offset on it (OffsetFetch answers -1); if the group's auto.offset.reset is earliest, 330 "
        "record(s) wait from the log start (the oldest written 2026-11-29T11:50Z); if latest, 30 record(s) produced "
        "since it was first seen owned and uncommitted at 2026-11-29T12:00Z wait (tidegauge cannot see the setting: "
        "give it as auto_offset_reset on the Kafka target, or as --auto-offset-reset to check kafka, for one reading); "
        "records have waited 3 min so far. Kafka shows commits, not reads: the member may have read these records, "
        "but no commit covers them. Make the "
        "consumer commit after it processes records (enable.auto.commit, or commitSync/commitAsync): until it does, "
        "a restart or a rebalance starts this partition over from auto.offset.reset, re-reading every record "
        "(earliest) or skipping the ones produced meanwhile (latest). If it keeps its offsets outside Kafka (seek() "
        "on assignment), this is expected: exclude the group from this target."
    )
    # six minutes: the records produced since the first sighting wait under both readings, for longer than 5 min
    samples = polls(broker(), 60, 10, 7, lag_seconds="exact")
    [f] = findings(samples, T0 + timedelta(minutes=6))
    assert f.severity is Severity.WARNING and f.details["waiting_if_latest"] == 60
    assert "records have waited 6 min, longer than 5 min." in f.message
    # the committed partition 0 is judged by Burrow as before (caught up: no finding)
    h = job_history(samples)
    assert h is not None
    assert [x.scope.partition for x in evaluate_lag(LagParams(), h, T0 + timedelta(minutes=6))] == [1]


def test_rule_with_nothing_produced_since_the_assignment() -> None:
    # unknown reset: only the earliest reading has records, however long: INFO, said plainly
    samples = polls(broker(), 60, 0, 11, lag_seconds="none")
    [f] = findings(samples, T0 + timedelta(minutes=10))
    assert f.severity is Severity.INFO and f.details["oldest_waiting"] is None
    assert "if latest, no record was produced since it was first seen owned and uncommitted at 2026-11-29T12:00Z" in f.message
    assert f.message.split("; ")[3].startswith("records wait only if it reads from the earliest offset.")
    # the target says latest: nothing waits, no finding; earliest: 300 have waited since the first sighting
    assert findings(polls(broker(), 60, 0, 11, lag_seconds="none", auto_offset_reset="latest"),
                    T0 + timedelta(minutes=10)) == []
    [f] = findings(polls(broker(), 60, 0, 11, lag_seconds="none", auto_offset_reset="earliest"),
                   T0 + timedelta(minutes=10))
    assert f.severity is Severity.WARNING and f.details["auto_offset_reset"] == "earliest"
    assert ("auto.offset.reset=earliest: 300 record(s) wait from the log start; records have waited 10 min, "
            "longer than 5 min.") in f.message


def test_rule_reads_the_oldest_record_when_earliest_applies() -> None:
    # the oldest waiting record was written 10 min before T0: already past the 5 min threshold at the first poll
    samples = polls(broker(), 60, 0, 2, lag_seconds="exact", auto_offset_reset="earliest")
    [f] = findings(samples, T0 + timedelta(minutes=1))
    assert f.severity is Severity.WARNING and f.details["waited_seconds"] == 660.0


def test_facts_and_group_status_show_it() -> None:
    samples = polls(broker(), 60, 10, 7, lag_seconds="exact")
    f = job_facts(samples, MIN_TIME, T0 + timedelta(minutes=6, seconds=1))  # [since, until)
    assert f.lag_status == "NEVER_COMMITTED"
    p1 = next(p for p in f.lag if p.partition == 1)
    assert (p1.status, p1.lag_offsets, p1.waiting_if_earliest, p1.waiting_if_latest, p1.auto_offset_reset) == (
        "NEVER_COMMITTED", None, 360, 60, None,
    )
    assert p1.uncommitted_since == T0 and p1.oldest_waiting == T0 - timedelta(minutes=10)
    assert [p.partition for p in f.lag] == [1, 0]  # worst first
    p0 = next(p for p in f.lag if p.partition == 0)
    assert p0.waiting_if_earliest is None and p0.status == "OK"


def test_check_kafka_report() -> None:
    b = broker()
    c = collector(b, lag_seconds="exact")
    history: list[Sample] = []
    for i in range(2):
        now = T0 + timedelta(minutes=6 * i)
        if i:
            b.log[("t", 1)] = (100, 460)
        snap = c.snapshot(now)
        history.extend(group_samples("prod", snap.groups[0], now))
    h = job_history(history)
    assert h is not None and h.engine is Engine.KAFKA
    report = KafkaReport(snap.groups, evaluate_lag(LagParams(), h, now), polls=2)
    doc = json.loads(render_json(report))
    g = doc["groups"][0]
    assert (g["status"], g["uncommitted_partitions"], g["lag"]) == ("NEVER_COMMITTED", 1, 0)
    assert g["partitions"][1]["status"] == "NEVER_COMMITTED"
    assert g["partitions"][1]["uncommitted"] == {
        "waiting_if_earliest": 360, "waiting_if_latest": 60, "auto_offset_reset": None,
        "since": "2026-11-29T12:00:00.000Z", "oldest_waiting": "2026-11-29T11:50:00.000Z",
    }
    assert g["partitions"][0]["uncommitted"] is None
    assert doc["findings"][0]["severity"] == "warning"
    text = render_text(report)
    assert "status NEVER_COMMITTED" in text
    assert "never committed: 360 record(s) wait if auto.offset.reset=earliest, 60 if latest" in text


def seed_store(root: Path) -> str:
    """A SQLite store holding seven polls of the fake group (partition 1 owned, never committed, 10 records
    produced a minute): what the daemon's Kafka collector stores. Returns its URL (used by the dashboard
    test below and for the page's screenshot)."""
    from monitor.model import PollResult
    from monitor.store import open_store, save_poll, upgrade

    url = f"sqlite:///{root / 'never-committed.db'}"
    upgrade(url)
    store = open_store(url)
    try:
        with store.sessions.begin() as session:
            save_poll(session, PollResult(samples=tuple(polls(broker(), 60, 10, 7, lag_seconds="exact"))))
    finally:
        store.engine.dispose()
    return url


def test_dashboard_job_page_shows_the_never_committed_partition(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from dashboard import data

    url = seed_store(tmp_path)
    monkeypatch.setenv(data.DB_ENV, url)
    monkeypatch.setattr(data, "now", lambda: T0 + timedelta(minutes=6, seconds=5))
    st.cache_data.clear()
    st.cache_resource.clear()
    try:
        at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "dashboard" / "views" / "job.py"),
                               default_timeout=60)
        at.query_params["engine"] = "kafka"
        at.query_params["job_id"] = "prod/g"
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert next(m.value for m in at.metric if m.label == "group status (Burrow)") == "NEVER_COMMITTED"
        # the header's lag is the committed partition's 0, with the never-committed partition counted apart
        assert next(m.value for m in at.metric if m.label == "lag (offsets)") == "0 + 1 never committed"
        waiting = ("360 if auto.offset.reset is earliest (oldest 2026-11-29T11:50Z) · 60 if latest "
                   "(produced since 2026-11-29T12:00Z)")
        assert [w.value for w in at.warning if "never committed" in w.value] == [
            f"**t partition 1** is owned by a live member but the group has never committed an offset on it: records "
            f"waiting: {waiting}. Until the consumer commits, a restart or a rebalance starts it over from its "
            "auto.offset.reset (see the consumer_lag finding)."
        ]
        table = next(d.value for d in at.dataframe if "status (Burrow)" in d.value.columns)
        rows = {r["partition"]: r for r in table.to_dict("records")}
        assert (rows[1]["status (Burrow)"], rows[1]["lag (offsets)"], rows[1]["records waiting (never committed)"]) == (
            "NEVER_COMMITTED", "never committed", "360 if earliest · 60 if latest",
        )
        assert not [w for w in at.warning if w.value.startswith("Most lag")]  # the most lag is 0: nothing to say
        assert (rows[0]["status (Burrow)"], rows[0]["lag (offsets)"], rows[0]["records waiting (never committed)"]) == (
            "OK", "0", "",
        )
    finally:
        st.cache_resource.clear()
        st.cache_data.clear()


def test_waiting_text_and_the_detailed_report_rows() -> None:
    from dataclasses import replace

    from monitor.facts import waiting_text
    from monitor.reports.detailed import _job_report
    from monitor.reports.render import _lag_rows

    f = job_facts(polls(broker(), 60, 10, 7, lag_seconds="exact"), MIN_TIME, T0 + timedelta(minutes=6, seconds=1))
    p1 = next(p for p in f.lag if p.partition == 1)
    assert waiting_text(replace(p1, auto_offset_reset="earliest")) == (
        "360 (auto.offset.reset earliest) (oldest 2026-11-29T11:50Z)"
    )
    assert waiting_text(replace(p1, auto_offset_reset="latest")) == (
        "60 (auto.offset.reset latest; produced since 2026-11-29T12:00Z)"
    )
    assert waiting_text(replace(p1, auto_offset_reset="latest"), short=True) == "60 (latest)"
    assert waiting_text(replace(p1, auto_offset_reset="earliest"), short=True) == "360 (earliest)"
    assert waiting_text(next(p for p in f.lag if p.partition == 0)) == ""
    j = _job_report(f, [])
    assert _lag_rows(j)[0] == [
        "t", "1", "never committed: 360 if auto.offset.reset is earliest (oldest 2026-11-29T11:50Z) · 60 if latest "
        "(produced since 2026-11-29T12:00Z) waiting", "unknown", "unknown", "NEVER_COMMITTED",
    ]
    lag = j.to_json()["lag"][0]
    assert (lag["waiting_if_earliest"], lag["waiting_if_latest"], lag["uncommitted_since"]) == (
        360, 60, "2026-11-29T12:00:00.000Z",
    )


def test_the_setting_reaches_the_collector_from_the_config_and_the_cli_refuses_a_bad_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from monitor.config import parse_config
    from monitor.daemon.compose import kafka_options
    from tests.cli import run_cli

    cfg = parse_config({"targets": {"kafka": [{"name": "prod", "bootstrap_servers": "k1:9092",
                                               "auto_offset_reset": "latest"}]}})
    assert kafka_options(cfg.targets.kafka[0], {}, "targets.kafka[0]").auto_offset_reset == "latest"
    assert parse_config({"targets": {"kafka": [{"name": "p", "bootstrap_servers": "k1:9092"}]}}).targets.kafka[0] \
        .auto_offset_reset is None
    code, _out, err = run_cli(["check", "kafka", "127.0.0.1:9", "--auto-offset-reset", "none"], capsys)
    assert code == 2 and "--auto-offset-reset: 'none' (allowed: earliest, latest)" in err


def test_a_record_timestamp_outside_the_time_range_is_not_kept_nor_read() -> None:
    from dataclasses import replace

    b = broker()
    b.record_ms[("t", 1)] = 9_223_372_036_854_775_807  # Long.MAX_VALUE, as a producer may set it
    c = collector(b, lag_seconds="exact")
    u = c.snapshot(T0).groups[0].partitions[1].uncommitted
    assert u is not None and u.oldest_record_ms is None and u.if_earliest == 300
    samples = polls(broker(), 60, 10, 2, lag_seconds="none")
    bad = [replace(s, extra={**s.extra, "oldest_waiting_ms": 10**19}) if s.scope.partition == 1 else s
           for s in samples]
    [f] = findings(bad, T0 + timedelta(minutes=1))
    assert f.details["oldest_waiting"] is None
    f2 = job_facts(bad, MIN_TIME, T0 + timedelta(minutes=1, seconds=1))
    assert next(p for p in f2.lag if p.partition == 1).oldest_waiting is None
