"""The alert lifecycle: a pure transition from (stored alert, this tick's finding, now) to the next alert.

States and transitions follow Prometheus's rule manager (``rules/alerting.go``, ``AlertingRule.Eval``)::

    (none|inactive|resolved) --finding--> pending --active for `for`--> firing --absent--> resolved
                                            |                             |   ^
                                            +--absent--> inactive          |   | absent for less than
                                                 (cleared, never notified) +---+ `keep_firing_for`

* A finding for an alert that is absent, inactive or resolved starts a new episode: ``pending`` with
  ``active_at = now`` (a resolved alert that re-activates starts pending again, as in Prometheus, which
  creates a fresh ``Alert`` for a label set whose old alert is inactive).
* ``pending`` becomes ``firing`` at the first evaluation where ``now - active_at >= for``; with
  ``for = 0`` that is the same evaluation that created it (Prometheus: ``ts.Sub(a.ActiveAt) >=
  r.holdDuration``).
* A ``pending`` alert whose finding is absent is dropped (state ``inactive``, event ``CLEARED``, never
  notified).
* A ``firing`` alert whose finding is absent keeps firing while ``now - keep_firing_since <
  keep_firing_for`` (``keep_firing_since`` is set at the first absent evaluation and cleared when the
  finding comes back); after that it becomes ``resolved`` with ``resolved_at = now``.

Every timestamp is part of :class:`Alert` and is persisted (see :mod:`monitor.store.alert_tables`), so a
restarted process continues an episode where it was: ``active_at`` keeps counting towards ``for`` and a
firing alert stays firing without emitting a second ``FIRING`` event.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from monitor.model import AlertState, Finding, RuleTiming, Severity, ensure_utc

__all__ = [
    "Alert",
    "AlertEvent",
    "EventKind",
    "RuleTiming",
    "group_key",
    "step",
    "step_all",
]

_ZERO = timedelta(0)


class EventKind(enum.StrEnum):
    """What a transition did. Only ``FIRING`` and ``RESOLVED`` lead to notifications."""

    PENDING = "pending"
    FIRING = "firing"
    RESOLVED = "resolved"
    CLEARED = "cleared"


@dataclass(frozen=True, slots=True)
class AlertEvent:
    """One transition of one alert at one evaluation time ``at`` (aware UTC); ``message`` is the alert's
    message at that time (a catch-up replays many instants in one tick: each transition says what was true
    then, not what the last instant says). Events compare by kind, fingerprint and time."""

    kind: EventKind
    fingerprint: str
    at: datetime
    message: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class Alert:
    """One alert instance: a rule + identifying labels, with its lifecycle state and timestamps.

    Attributes:
        fingerprint: :func:`monitor.model.fingerprint` of ``rule`` and ``labels`` (16 hex digits).
        rule: rule name (becomes ``alertname`` towards Alertmanager).
        labels: identifying labels (``engine``, ``job_id``, scope fields, the finding's extra labels).
        severity: the latest finding's severity (not part of the identity).
        state: lifecycle state.
        active_at: when the current episode's condition was first seen (start of ``pending``).
        fired_at: when it became ``firing`` in the current episode; ``None`` before.
        resolved_at: when it became ``resolved`` (or was cleared while pending); ``None`` while active.
        last_evaluated_at: the last evaluation that looked at this alert.
        message: the latest finding's message (cause and remedy).
        annotations: non-identifying text (``description``, ``job_name``, ...); values are strings.
        keep_firing_since: first evaluation at which a firing alert's finding was absent, while
            ``keep_firing_for`` holds it firing; ``None`` otherwise.
        episode_id: the id of the finding episode (:class:`monitor.model.FindingEpisode`) the alert's
            current or last finding belongs to, once stored; ``None`` before.

    All datetimes are aware UTC (naive ones raise :class:`ValueError`).
    """

    fingerprint: str
    rule: str
    labels: Mapping[str, str]
    severity: Severity
    state: AlertState
    active_at: datetime
    fired_at: datetime | None = None
    resolved_at: datetime | None = None
    last_evaluated_at: datetime | None = None
    message: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)
    keep_firing_since: datetime | None = None
    episode_id: str | None = None

    def __post_init__(self) -> None:
        for name in ("active_at", "fired_at", "resolved_at", "last_evaluated_at", "keep_firing_since"):
            object.__setattr__(self, name, ensure_utc(getattr(self, name), f"Alert.{name}"))
        object.__setattr__(self, "labels", dict(self.labels))
        object.__setattr__(self, "annotations", dict(self.annotations))

    @classmethod
    def from_finding(cls, finding: Finding, now: datetime) -> Alert:
        """A new ``pending`` alert for ``finding``, active since ``now``."""
        return cls(
            fingerprint=finding.fingerprint(),
            rule=finding.rule,
            labels=finding.identity_labels(),
            severity=finding.severity,
            state=AlertState.PENDING,
            active_at=now,
            last_evaluated_at=now,
            message=finding.message,
            annotations=annotations_of(finding),
        )

    def all_labels(self) -> dict[str, str]:
        """Labels as matchers and receivers see them: ``alertname`` (the rule), ``severity``, then ``labels``.

        Identifying labels win over the two added ones if a rule sets them itself.
        """
        out = {"alertname": self.rule, "severity": self.severity.label()}
        out.update(self.labels)
        return out


def annotations_of(finding: Finding) -> dict[str, str]:
    """Non-identifying annotations of a finding: ``description`` (the message) and job/run/batch details;
    ``culprit`` (``topic T partition P offset O``) when a located record is attached
    (``details["culprit"]``, :func:`rules.future.with_culprit`)."""
    out = {"description": finding.message}
    record = (finding.details.get("culprit") or {}).get("record")
    if isinstance(record, dict):
        out["culprit"] = f"topic {record.get('topic')} partition {record.get('partition')} offset {record.get('offset')}"
    if finding.job.name:
        out["job_name"] = finding.job.name
    if finding.job.run_id:
        out["run_id"] = finding.job.run_id
    if finding.batch_id is not None:
        out["batch_id"] = str(finding.batch_id)
    return out


def group_key(labels: Mapping[str, str]) -> str:
    """The notification group of an alert: its job, ``"<engine>/<job_id>"`` (``"-"`` where a label is missing)."""
    return f"{labels.get('engine', '-')}/{labels.get('job_id', '-')}"


def step(
    alert: Alert | None,
    finding: Finding | None,
    rule_for: timedelta,
    keep_firing_for: timedelta,
    now: datetime,
) -> tuple[Alert | None, list[AlertEvent]]:
    """Advance one alert by one evaluation (Prometheus ``AlertingRule.Eval`` for one label set).

    Args:
        alert: the stored alert with this fingerprint, or ``None`` if there is none.
        finding: this evaluation's finding for the same fingerprint, or ``None`` if the rule did not
            report it (the condition is absent).
        rule_for: the rule's ``for`` (time a condition must stay active before it fires).
        keep_firing_for: the rule's ``keep_firing_for`` (time a firing alert keeps firing once absent).
        now: evaluation time, aware UTC.

    Returns:
        ``(new_alert, events)``: ``new_alert`` is ``None`` only when both inputs are ``None``; ``events``
        lists the transitions in order (a ``for = 0`` alert yields ``[PENDING, FIRING]`` at once).
        An alert that did not change is returned as the same object with no events.

    Raises:
        ValueError: ``finding`` and ``alert`` have different fingerprints, ``now`` is naive, or a duration
            is negative.
    """
    now_utc = ensure_utc(now, "now")
    assert now_utc is not None
    timing = RuleTiming(rule_for, keep_firing_for)
    if finding is not None:
        if alert is not None and finding.fingerprint() != alert.fingerprint:
            raise ValueError(
                f"finding fingerprint {finding.fingerprint()} does not match alert {alert.fingerprint}"
            )
        return _present(alert, finding, timing, now_utc)
    if alert is None:
        return None, []
    return _absent(alert, timing, now_utc)


def _present(
    alert: Alert | None, finding: Finding, timing: RuleTiming, now: datetime
) -> tuple[Alert, list[AlertEvent]]:
    events: list[AlertEvent] = []
    if alert is None or alert.state in (AlertState.INACTIVE, AlertState.RESOLVED):
        new = Alert.from_finding(finding, now)
        events.append(AlertEvent(EventKind.PENDING, new.fingerprint, now, new.message))
    else:
        new = replace(
            alert,
            severity=finding.severity,
            message=finding.message,
            annotations=annotations_of(finding),
            last_evaluated_at=now,
            keep_firing_since=None,
        )
    if new.state is AlertState.PENDING and now - new.active_at >= timing.for_duration:
        new = replace(new, state=AlertState.FIRING, fired_at=now)
        events.append(AlertEvent(EventKind.FIRING, new.fingerprint, now, new.message))
    return new, events


def _absent(alert: Alert, timing: RuleTiming, now: datetime) -> tuple[Alert, list[AlertEvent]]:
    if alert.state is AlertState.PENDING:
        cleared = replace(alert, state=AlertState.INACTIVE, resolved_at=now, last_evaluated_at=now)
        return cleared, [AlertEvent(EventKind.CLEARED, alert.fingerprint, now, alert.message)]
    if alert.state is AlertState.FIRING:
        if timing.keep_firing_for > _ZERO:
            since = alert.keep_firing_since or now
            if now - since < timing.keep_firing_for:
                return replace(alert, keep_firing_since=since, last_evaluated_at=now), []
        resolved = replace(
            alert, state=AlertState.RESOLVED, resolved_at=now, last_evaluated_at=now, keep_firing_since=None
        )
        return resolved, [AlertEvent(EventKind.RESOLVED, alert.fingerprint, now, alert.message)]
    return alert, []


def step_all(
    alerts: Mapping[str, Alert],
    findings: Iterable[Finding],
    timing_for: Callable[[str], RuleTiming],
    now: datetime,
) -> tuple[dict[str, Alert], list[AlertEvent]]:
    """Apply :func:`step` to every fingerprint in ``alerts`` or ``findings`` (one evaluation tick).

    Args:
        alerts: stored alerts of the rules evaluated in this tick, by fingerprint.
        findings: this tick's findings; several findings with one fingerprint collapse to the most
            severe (the first of equals).
        timing_for: rule name -> its :class:`RuleTiming`.
        now: evaluation time, aware UTC.

    Returns:
        ``(changed, events)``: the alerts that changed (by fingerprint) and all events, ordered by
        fingerprint so the result does not depend on input order.
    """
    by_fp: dict[str, Finding] = {}
    for finding in findings:
        fp = finding.fingerprint()
        if fp not in by_fp or finding.severity > by_fp[fp].severity:
            by_fp[fp] = finding
    changed: dict[str, Alert] = {}
    events: list[AlertEvent] = []
    for fp in sorted(set(alerts) | set(by_fp)):
        old = alerts.get(fp)
        current = by_fp.get(fp)
        rule = current.rule if current is not None else old.rule if old is not None else ""
        timing = timing_for(rule)
        new, evs = step(old, current, timing.for_duration, timing.keep_firing_for, now)
        if new is not None and new is not old:
            changed[fp] = new
        events.extend(evs)
    return changed, events
