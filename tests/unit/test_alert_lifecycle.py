"""Table-driven tests of the pure alert lifecycle (monitor.alerts.lifecycle.step).

Expected answers come from Prometheus's rule manager semantics (rules/alerting.go, AlertingRule.Eval):
pending -> firing when ``ts - ActiveAt >= holdDuration``; a pending alert that disappears is deleted; a
firing one resolves at the first absent evaluation unless ``ts - KeepFiringSince < keepFiringFor``;
a label set whose alert is inactive gets a fresh pending alert with ``ActiveAt = ts``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest

from monitor.alerts.lifecycle import Alert, EventKind, RuleTiming, step, step_all
from monitor.model import AlertState, Engine, Finding, JobRef, Scope, Severity, fingerprint

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
JOB = JobRef(Engine.SPARK, "q-clicks", "run-1", "clicks")
P, F, R, INACT = AlertState.PENDING, AlertState.FIRING, AlertState.RESOLVED, AlertState.INACTIVE
E_P, E_F, E_R, E_C = EventKind.PENDING, EventKind.FIRING, EventKind.RESOLVED, EventKind.CLEARED


def m(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def finding(severity: Severity = Severity.WARNING, message: str = "watermark flat for 14 min") -> Finding:
    return Finding("watermark_stall", severity, JOB, message, T0, scope=Scope(source="clicks", partition=3))


FP = finding().fingerprint()


def alert(
    state: AlertState,
    active: float,
    fired: float | None = None,
    resolved: float | None = None,
    keep_since: float | None = None,
) -> Alert:
    base = Alert.from_finding(finding(), m(active))
    return replace(
        base,
        state=state,
        fired_at=None if fired is None else m(fired),
        resolved_at=None if resolved is None else m(resolved),
        keep_firing_since=None if keep_since is None else m(keep_since),
    )


@dataclass(frozen=True)
class Case:
    prior: Alert | None
    present: bool
    for_min: float
    keep_min: float
    now_min: float
    state: AlertState | None
    events: tuple[EventKind, ...]
    active: float | None = None
    fired: float | None = None
    resolved: float | None = None
    keep_since: float | None = None


CASES = [
    # 1. Nothing stored and no finding: nothing to do, no alert is created.
    Case(None, False, 5, 0, 0, None, ()),
    # 2. A new condition starts pending at `now` (for=5m has not elapsed: 0 < 5m).
    Case(None, True, 5, 0, 0, P, (E_P,), active=0),
    # 3. for=0: the same evaluation that creates the alert fires it (0 >= 0), fired_at = now.
    Case(None, True, 0, 0, 0, F, (E_P, E_F), active=0, fired=0),
    # 4. Pending for 4m59s with for=5m: not yet (299 s < 300 s).
    Case(alert(P, 0), True, 5, 0, 4 + 59 / 60, P, (), active=0),
    # 5. Pending for exactly 5m with for=5m: fires (the comparison is >=), fired_at = now.
    Case(alert(P, 0), True, 5, 0, 5, F, (E_F,), active=0, fired=5),
    # 6. Pending and the condition is gone: dropped (inactive), never notified; Prometheus sets ResolvedAt.
    Case(alert(P, 0), False, 5, 0, 3, INACT, (E_C,), active=0, resolved=3),
    # 7. Firing (as loaded after a restart) and still present: stays firing, no second FIRING event,
    #    fired_at unchanged.
    Case(alert(F, 0, fired=5), True, 5, 0, 10, F, (), active=0, fired=5),
    # 8. Firing, condition gone, keep_firing_for=0: resolved at the first absent evaluation.
    Case(alert(F, 0, fired=5), False, 5, 0, 20, R, (E_R,), active=0, fired=5, resolved=20),
    # 9. Firing, first absent evaluation with keep_firing_for=10m: keeps firing, remembers since when.
    Case(alert(F, 0, fired=5), False, 5, 10, 20, F, (), active=0, fired=5, keep_since=20),
    # 10. Absent since 20m, now 29m59s: 9m59s < 10m, still firing; keep_firing_since not moved.
    Case(alert(F, 0, fired=5, keep_since=20), False, 5, 10, 29 + 59 / 60, F, (), fired=5, keep_since=20),
    # 11. Absent since 20m, now 30m: 10m is not < 10m, so it resolves at 30m.
    Case(alert(F, 0, fired=5, keep_since=20), False, 5, 10, 30, R, (E_R,), fired=5, resolved=30),
    # 12. Condition back during keep_firing_for: still firing, keep_firing_since cleared, no events.
    Case(alert(F, 0, fired=5, keep_since=20), True, 5, 10, 25, F, (), active=0, fired=5),
    # 13. A resolved alert that re-activates starts a new episode: pending, active_at = now, old
    #     fired_at/resolved_at cleared.
    Case(alert(R, 0, fired=5, resolved=30), True, 5, 0, 40, P, (E_P,), active=40),
    # 14. Resolved and still absent: unchanged, no events (no second resolved message).
    Case(alert(R, 0, fired=5, resolved=30), False, 5, 0, 40, R, (), active=0, fired=5, resolved=30),
    # 15. Cleared (inactive) alert that comes back with for=0: new episode fires at once.
    Case(alert(INACT, 0, resolved=3), True, 0, 0, 7, F, (E_P, E_F), active=7, fired=7),
    # 16. Pending restored from the database after a restart: `for` counts from the stored active_at
    #     (0m), not from the restart, so at 6m with for=5m it fires.
    Case(alert(P, 0), True, 5, 0, 6, F, (E_F,), active=0, fired=6),
    # 17. Pending and keep_firing_for set: keep_firing_for only applies to firing alerts; cleared.
    Case(alert(P, 0), False, 5, 10, 3, INACT, (E_C,), active=0, resolved=3),
]


@pytest.mark.parametrize("num,case", list(enumerate(CASES, start=1)))
def test_step_table(num: int, case: Case) -> None:
    now = m(case.now_min)
    new, events = step(
        case.prior,
        finding() if case.present else None,
        timedelta(minutes=case.for_min),
        timedelta(minutes=case.keep_min),
        now,
    )
    if case.state is None:
        assert new is None, f"case {num}"
        assert events == [], f"case {num}"
        return
    assert new is not None, f"case {num}"
    assert new.state is case.state, f"case {num}"
    assert [e.kind for e in events] == list(case.events), f"case {num}"
    assert all(e.at == now and e.fingerprint == FP for e in events), f"case {num}"
    assert new.fingerprint == FP, f"case {num}"
    if case.active is not None:
        assert new.active_at == m(case.active), f"case {num}"
    assert new.fired_at == (None if case.fired is None else m(case.fired)), f"case {num}"
    assert new.resolved_at == (None if case.resolved is None else m(case.resolved)), f"case {num}"
    assert new.keep_firing_since == (None if case.keep_since is None else m(case.keep_since)), f"case {num}"


def test_present_finding_updates_severity_and_message_but_not_identity() -> None:
    old = alert(F, 0, fired=5)
    new, events = step(old, finding(Severity.CRITICAL, "now 30 min flat"), timedelta(0), timedelta(0), m(9))
    assert new is not None and events == []
    assert (new.severity, new.message, new.fingerprint) == (Severity.CRITICAL, "now 30 min flat", FP)
    assert new.annotations["description"] == "now 30 min flat"
    assert new.last_evaluated_at == m(9)


def test_fingerprint_is_rule_plus_labels_not_text() -> None:
    # Hand-built label set: engine, job id and the scope fields that are set.
    labels = {"engine": "spark", "job_id": "q-clicks", "source": "clicks", "partition": "3"}
    assert fingerprint("watermark_stall", labels) == FP
    assert finding(message="other text").fingerprint() == FP
    other = Finding("idle_source", Severity.WARNING, JOB, "x", T0, scope=Scope(source="clicks", partition=3))
    assert other.fingerprint() != FP


def test_mismatched_fingerprint_and_naive_now_are_rejected() -> None:
    other = Finding("idle_source", Severity.WARNING, JOB, "x", T0)
    with pytest.raises(ValueError, match="does not match"):
        step(alert(P, 0), other, timedelta(0), timedelta(0), m(1))
    with pytest.raises(ValueError, match="now"):
        step(None, finding(), timedelta(0), timedelta(0), datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="negative"):
        step(None, finding(), timedelta(seconds=-1), timedelta(0), m(0))


def test_step_all_walks_a_whole_episode_and_collapses_duplicate_findings() -> None:
    timing = RuleTiming(for_duration=timedelta(minutes=2), keep_firing_for=timedelta(0))
    stored: dict[str, Alert] = {}
    kinds: list[tuple[float, EventKind]] = []
    # Present at 0,1,2,3 (two findings per tick, warning and critical), absent at 4.
    for minute, present in [(0, True), (1, True), (2, True), (3, True), (4, False), (5, False)]:
        findings = [finding(Severity.WARNING), finding(Severity.CRITICAL)] if present else []
        changed, events = step_all(stored, findings, lambda _rule: timing, m(minute))
        stored.update(changed)
        kinds.extend((minute, e.kind) for e in events)
    # pending at 0, firing at 2 (2m >= for=2m), resolved at 4; nothing at 5.
    assert kinds == [(0, E_P), (2, E_F), (4, E_R)]
    assert stored[FP].severity is Severity.CRITICAL  # the most severe of the duplicates
    assert stored[FP].state is R and stored[FP].resolved_at == m(4)


def test_each_transition_carries_the_message_of_its_own_evaluation() -> None:
    """A catch-up steps one alert through many instants in one tick; the daemon logs each transition with
    the event's message, so a firing at batch 2 never shows what batch 8 says."""
    first, _ = step(None, finding(message="1 of 11 input rows dropped"), timedelta(minutes=1), timedelta(0), m(0))
    assert first is not None
    fired, events = step(first, finding(message="3 of 17 input rows dropped"), timedelta(minutes=1), timedelta(0), m(1))
    later, _ = step(fired, finding(message="5 of 24 input rows dropped"), timedelta(minutes=1), timedelta(0), m(2))
    _, resolved = step(later, None, timedelta(minutes=1), timedelta(0), m(3))
    assert [(e.kind, e.message) for e in events] == [(E_F, "3 of 17 input rows dropped")]
    assert [(e.kind, e.message) for e in resolved] == [(E_R, "5 of 24 input rows dropped")]
