"""Freshness SLO with multiwindow, multi-burn-rate alerts (Google SRE workbook, ch. 5 "Alerting on SLOs").

Configuration (off until ``freshness`` is set; per job through ``rules.overrides``)::

    rules:
      freshness_slo: {freshness: 5m, objective: 99.5%, window: 28d}
      overrides:
        - {match: {job_name: clicks}, rule: freshness_slo, params: {freshness: 2m}}

The SLI is the share of *minutes* in which the job was fresh: at each whole UTC minute ``m``, the delay is
``m - watermark`` for the watermark in effect then (the newest sample observed at or before ``m``, the
watermark :func:`rules.freshness.job_watermark` defines for the ``freshness`` rule), or for a Kafka
consumer group its lag in seconds as of its newest poll (the ``lag_seconds`` the ``consumer_lag_seconds``
rule reads). A Spark query in real-time mode (``RealTimeTrigger``, Spark 4.1+) holds each batch's watermark
for the whole long batch (``MicroBatchExecution`` moves it only at the batch's end, ``markMicroBatchEnd``) and
reports once per batch: the time a batch has run, up to its usual duration (:attr:`rules.cadence.Cadence.
batch_span`), is not counted as delay, so each minute is judged by how far the watermark trailed when its
batch started, as ``freshness`` judges each batch (a batch that overruns its duration counts again; a real
stall still shows one batch later, when the next batch starts with the old watermark). A minute is good
when the delay is at most ``freshness``; a minute before the job's first
sample, or with an unknown watermark, is not counted. The error ratio over a window is bad minutes /
counted minutes; the *burn rate* is that ratio over the error budget ``1 - objective`` (1x spends exactly
the budget over the SLO window).

Alerts, the workbook's table 5-8 (both windows of a row must burn faster than its factor)::

    page    1h  and 5m   > 14.4x   (2% of a 30-day budget in an hour)
    page    6h  and 30m  >  6x     (5% in 6 hours)
    ticket  3d  and 6h   >  1x     (10% in 3 days)

A page is a ``CRITICAL`` finding, a ticket a ``WARNING`` one; one finding per job, naming the row that
holds (the first of the table). Evaluated like every rule at each batch's own time on the data's clock, so
``tidegauge scan`` of a recorded history gives the alerts the daemon would have given live. The rule reads
3 days of history (the ticket's long window); the error budget left is what the bad minutes of that history
leave of the SLO window's budget (older bad minutes are not seen: it is an upper bound when the window is
longer than the history).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import Annotated, Any

from pydantic import BeforeValidator

from monitor.model import Engine, Finding, Sample, Severity
from monitor.timefmt import format_duration
from rules.cadence import report_cadence
from rules.freshness import job_watermark
from rules.history import JobHistory, kept_state
from rules.params import Duration, RuleParams

__all__ = [
    "BURN_WINDOWS",
    "HISTORY_NEEDED",
    "MINUTE",
    "RULE",
    "Burn",
    "BurnWindows",
    "MinuteLedger",
    "Objective",
    "SloParams",
    "burn",
    "evaluate_slo",
    "first_minute",
    "floor_minute",
    "format_objective",
    "minute_statuses",
    "parse_objective",
]

RULE = "freshness_slo"

MINUTE = timedelta(minutes=1)
_TIME = attrgetter("observed_at")


@dataclass(frozen=True, slots=True)
class BurnWindows:
    """One row of the workbook's table: alert when both windows burn faster than ``factor``."""

    alert: str
    """``"page"`` or ``"ticket"``."""
    long: timedelta
    short: timedelta
    factor: float


#: The workbook's recommended rows (SRE workbook ch. 5, table 5-8), in the order they are checked.
BURN_WINDOWS: tuple[BurnWindows, ...] = (
    BurnWindows("page", timedelta(hours=1), timedelta(minutes=5), 14.4),
    BurnWindows("page", timedelta(hours=6), timedelta(minutes=30), 6.0),
    BurnWindows("ticket", timedelta(days=3), timedelta(hours=6), 1.0),
)

_LONGEST = max(row.long for row in BURN_WINDOWS)
HISTORY_NEEDED = _LONGEST
"""The history the burn-rate table reads: the ticket's long window (3 days)."""


def _objective(value: Any) -> Any:
    if isinstance(value, str):
        text = value.strip()
        if not text.endswith("%"):
            raise ValueError(f"expected a percentage like 99.5%, got {value!r}")
        try:
            value = float(text[:-1]) / 100
        except ValueError:
            raise ValueError(f"expected a percentage like 99.5%, got {value!r}") from None
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("expected a percentage like 99.5%")
    elif value >= 1:
        raise ValueError(f"expected a percentage like 99.5% (a bare {value} is ambiguous)")
    if not 0 < value < 1:
        raise ValueError("the objective must be above 0% and below 100% (100% leaves no error budget)")
    return float(value)


Objective = Annotated[float, BeforeValidator(_objective)]
"""An SLO objective written ``99.5%`` (or a share ``0.995``), held as the share ``0.995``."""


def parse_objective(text: str) -> float:
    """``"99.5%"`` -> ``0.995``: the share of good minutes an SLO promises.

    Raises:
        ValueError: not a percentage above 0% and below 100% (the message says which form is expected).
    """
    share: float = _objective(text)
    return share


def format_objective(share: float) -> str:
    """``0.995`` -> ``"99.5%"`` (up to three decimals, trailing zeros dropped)."""
    return f"{share * 100:.3f}".rstrip("0").rstrip(".") + "%"


class SloParams(RuleParams):
    """``freshness_slo`` parameters.

    ``freshness``: the delay a good minute stays within (``None``: the rule is off); ``objective``: the share
    of good minutes promised (default 99.5%); ``window``: the SLO's period, over which the error budget
    ``1 - objective`` is spent (default 28d).
    """

    freshness: Duration | None = None
    objective: Objective = 0.995
    window: Duration = timedelta(days=28)

    def history_needed(self) -> tuple[timedelta, timedelta]:
        """The ticket's long window (3d) of batches and series, when the SLO is set."""
        if self.freshness is None:
            return timedelta(0), timedelta(0)
        return _LONGEST, _LONGEST


@dataclass(frozen=True, slots=True)
class _Point:
    at: datetime
    watermark: datetime | None
    lag_seconds: float | None
    span_seconds: float = 0.0
    """How long this batch holds its watermark by design (real-time mode: :attr:`rules.cadence.Cadence.
    batch_span`); that much of the time since ``at`` is not counted as delay."""

    def delay_seconds(self, minute: datetime) -> float | None:
        if self.lag_seconds is not None:
            return self.lag_seconds
        if self.watermark is None:
            return None
        delay = (minute - self.watermark).total_seconds()
        if self.span_seconds:
            delay -= min(max(0.0, (minute - self.at).total_seconds()), self.span_seconds)
        return delay


def _batch_point(history: JobHistory, batch: Sample, span: timedelta) -> _Point | None:
    if history.engine is Engine.KAFKA:
        return None if batch.lag_seconds is None else _Point(batch.observed_at, None, batch.lag_seconds)
    return _Point(batch.observed_at, job_watermark(batch, ()), None, span.total_seconds())


def _batch_span(history: JobHistory) -> timedelta:
    """How long a batch of this job holds its watermark by design (:attr:`rules.cadence.Cadence.batch_span`:
    a Spark query in real-time mode, its usual batch duration; zero otherwise)."""
    return report_cadence(history).batch_span if history.engine is Engine.SPARK else timedelta(0)


def _uses_series(history: JobHistory) -> bool:
    """Whether the job's watermark comes from its scopes (no job-scope sample has one: Flink subtasks)."""
    if history.engine is not Engine.FLINK or not history.series:
        return False  # Spark's watermark is query-wide (its sources carry none); Kafka reads lag seconds
    return not any(job_watermark(b, ()) is not None for b in history.batches)


def _series_points(history: JobHistory, now: datetime) -> list[_Point]:
    """The minimum of every scope's newest watermark over time, as the freshness rule takes it."""
    merged = sorted((s for ss in history.series.values() for s in ss if s.observed_at <= now), key=_TIME)
    newest: dict[object, Sample] = {}
    scopes = len(history.series)
    out: list[_Point] = []
    for i, sample in enumerate(merged):
        newest[sample.scope] = sample
        if len(newest) == scopes and (i + 1 == len(merged) or merged[i + 1].observed_at != sample.observed_at):
            out.append(_Point(sample.observed_at, job_watermark(None, newest.values()), None))
    return out


def floor_minute(at: datetime) -> datetime:
    """The whole UTC minute at or before ``at``."""
    return at.astimezone(UTC).replace(second=0, microsecond=0)


def first_minute(first_at: datetime, now: datetime) -> datetime:
    """The first minute a ledger gives a status: the first whole minute at or after the first observation
    ``first_at``, but not more than 3 days (:data:`HISTORY_NEEDED`) before ``now``."""
    first = floor_minute(first_at)
    if first < first_at:
        first += MINUTE
    return max(first, floor_minute(now) - _LONGEST + MINUTE)


_KEEP = int(_LONGEST / MINUTE)


@dataclass(slots=True)
class MinuteLedger:
    """Per-minute good/bad statuses (of a job, or of a pipeline's end) as prefix sums, extended minute by
    minute in time order: :meth:`record` one minute's delay, or :meth:`advance` over a job's points."""

    target_seconds: float
    end: datetime | None = None
    """The newest minute with a status."""
    point: _Point | None = None
    """The point in effect at ``end``."""
    pending: list[_Point] = field(default_factory=list)
    """Points taken from the history after ``end``, oldest first."""
    seen: datetime | None = None
    """The newest point time taken from the history."""
    bad: list[int] = field(default_factory=lambda: [0])
    counted: list[int] = field(default_factory=lambda: [0])

    def advance(self, points: Sequence[_Point], now: datetime) -> None:
        """Add ``points`` (newer than ``seen``, at most ``now``) and give every minute up to ``now`` a status."""
        self.pending.extend(points)
        if points:
            self.seen = points[-1].at
        last = floor_minute(now)
        if self.end is None:
            if not self.pending:
                return
            minute = first_minute(self.pending[0].at, now)
        else:
            minute = self.end + MINUTE
        pending, k = self.pending, 0
        while minute <= last:
            while k < len(pending) and pending[k].at <= minute:
                self.point = pending[k]
                k += 1
            self.record(minute, None if self.point is None else self.point.delay_seconds(minute))
            minute += MINUTE
        del pending[:k]
        self.trim()

    def trim(self) -> int:
        """Forget minutes older than 3 days (:data:`HISTORY_NEEDED`) once twice that many are held (amortised
        O(1) per minute). Returns how many minutes were dropped (from the oldest)."""
        bad, counted = self.bad, self.counted
        if len(bad) <= 2 * _KEEP + 1:
            return 0
        dropped = len(bad) - _KEEP - 1
        del bad[:dropped], counted[:dropped]
        return dropped

    def copy(self) -> MinuteLedger:
        """An independent copy (its minutes can be extended without changing this one)."""
        return MinuteLedger(self.target_seconds, self.end, self.point, list(self.pending), self.seen,
                            list(self.bad), list(self.counted))

    def record(self, minute: datetime, delay_seconds: float | None) -> None:
        """Give ``minute`` (the one after :attr:`end`) its status: bad when ``delay_seconds`` is above the
        target, not counted when it is ``None`` (unknown)."""
        self.bad.append(self.bad[-1] + (delay_seconds is not None and delay_seconds > self.target_seconds))
        self.counted.append(self.counted[-1] + (delay_seconds is not None))
        self.end = minute

    def window(self, window: timedelta) -> tuple[int, int]:
        """(bad, counted) minutes of the last ``window`` up to ``end``."""
        i = max(0, len(self.bad) - 1 - int(window / MINUTE))
        return self.bad[-1] - self.bad[i], self.counted[-1] - self.counted[i]


def _ledger(history: JobHistory, now: datetime, target: timedelta) -> MinuteLedger:
    """The job's minute ledger up to ``now``: kept on the history (:func:`rules.history.kept_state`) and
    extended by the batches added since, when the history is a :class:`rules.history.RollingHistory`'s (the
    replay's); rebuilt from the window otherwise (and always for a watermark taken from the scopes)."""
    series = _uses_series(history)
    target_seconds = target.total_seconds()
    key = f"{RULE}:{target_seconds}"
    kept = None if series else kept_state(history, key, lambda: MinuteLedger(target_seconds))
    ledger = kept if kept is not None and (kept.seen is None or kept.seen <= now) else MinuteLedger(target_seconds)
    if series:
        ledger.advance(_series_points(history, now), now)
        return ledger
    batches = history.batches
    lo = 0 if ledger.seen is None else bisect_right(batches, ledger.seen, key=_TIME)
    hi = bisect_right(batches, now, key=_TIME)
    span = _batch_span(history) if hi > lo else timedelta(0)
    new = [p for p in (_batch_point(history, b, span) for b in batches[lo:hi]) if p is not None]
    ledger.advance(new, now)
    if kept is not None:
        history.rule_state[key] = ledger  # (a fresh one, when the kept one stood past ``now``)
    return ledger


def minute_statuses(history: JobHistory, now: datetime, target: timedelta) -> list[bool | None]:
    """Whether each whole UTC minute of the last 3 days up to ``now`` was bad (delay above ``target``):
    ``True`` bad, ``False`` good, ``None`` not counted (unknown watermark); oldest first, the last entry
    is the minute at or before ``now``. Minutes before the job's first sample are left out (the list is
    shorter than 3 days then)."""
    ledger = _ledger(history, now, target)
    out: list[bool | None] = []
    for i in range(max(1, len(ledger.bad) - _KEEP), len(ledger.bad)):
        counted = ledger.counted[i] > ledger.counted[i - 1]
        out.append(ledger.bad[i] > ledger.bad[i - 1] if counted else None)
    return out


def _current_delay(history: JobHistory, now: datetime) -> float | None:
    """The delay at ``now`` (the newest point's), as the minute ledger measures it."""
    if _uses_series(history):
        points = _series_points(history, now)
        return points[-1].delay_seconds(now) if points else None
    for batch in reversed(history.batches):
        if batch.observed_at <= now:
            point = _batch_point(history, batch, _batch_span(history))
            if point is not None:
                return point.delay_seconds(now)
    return None


def _pct(share: float) -> str:
    return f"{share:.1%}" if share < 0.1 else f"{share:.0%}"


@dataclass(frozen=True, slots=True)
class Burn:
    """A row of :data:`BURN_WINDOWS` burning on both its windows, as judged on a :class:`MinuteLedger`.

    Attributes:
        row: the first row of the table that holds.
        rates: window -> burn rate (bad share of counted minutes over the error budget), for every window of
            the table with counted minutes.
        freshness / objective / window: the SLO (a good minute's delay bound, the promised share, the period).
        left: the error budget left (``1`` whole, ``<= 0`` spent), judged on ``measured`` of counted history
            (at most 3 days).
        long_counted: the counted minutes of the row's long window (less than it while data is short).
    """

    row: BurnWindows
    rates: dict[timedelta, float]
    freshness: timedelta
    objective: float
    window: timedelta
    left: float
    measured: timedelta
    long_counted: timedelta

    @property
    def rate(self) -> float:
        """The row's long-window burn rate (1.0 spends exactly the budget over the SLO window)."""
        return self.rates[self.row.long]

    @property
    def severity(self) -> Severity:
        """``CRITICAL`` for a page, ``WARNING`` for a ticket."""
        return Severity.CRITICAL if self.row.alert == "page" else Severity.WARNING

    def rates_text(self, subject: str, behind: str) -> str:
        """``<subject> burning 15.0x too fast: in the last 1 h 15% of the minutes (and 100% of the last
        5 min) had <behind>, against an objective of ... (an error budget of 1% of minutes). ``; ``behind``
        says what was late (``the watermark more than 5 min behind``)."""
        budget = 1 - self.objective
        long_w, short_w = format_duration(self.row.long), format_duration(self.row.short)
        data = "" if self.long_counted >= self.row.long else f" ({format_duration(self.long_counted)} of data)"
        target = format_duration(self.freshness)
        return (
            f"{subject} burning {self.rate:.1f}x too fast: in the last {long_w}{data} {_pct(self.rate * budget)} of "
            f"the minutes (and {_pct(self.rates[self.row.short] * budget)} of the last {short_w}) had {behind}, "
            f"against an objective of {format_objective(self.objective)} of minutes within {target} over "
            f"{format_duration(self.window)} (an error budget of {_pct(budget)} of minutes). "
        )

    def meaning_text(self) -> str:
        """What the page or ticket means and how urgent it is."""
        long_w, short_w = format_duration(self.row.long), format_duration(self.row.short)
        if self.row.alert == "page":
            return (
                f"Page: both the {long_w} and {short_w} windows burn above {self.row.factor:g}x, so this is "
                "happening now and will spend the budget within days. "
            )
        return (
            f"Ticket: both the {long_w} and {short_w} windows burn above {self.row.factor:g}x: a slow leak that "
            "spends the whole budget before the window ends; fix it in working hours. "
        )

    def budget_text(self) -> str:
        """How much of the error budget is left and when it runs out at this rate."""
        measured = format_duration(self.measured)
        window = format_duration(self.window)
        if self.left <= 0:
            return (
                f"The error budget of {window} is spent (the last {measured} alone used {_pct(1 - self.left)}). "
            )
        lasts = format_duration(timedelta(seconds=self.left * self.window.total_seconds() / self.rate))
        return (
            f"At most {_pct(self.left)} of the error budget of {window} is left (the last {measured} used "
            f"{_pct(1 - self.left)}); at this rate it is gone in {lasts}. "
        )

    def details(self) -> dict[str, object]:
        """The finding details every SLO finding carries (what :func:`monitor.facts.slo_facts` reads)."""
        return {
            "alert": self.row.alert,
            "burn_rate": self.rate,
            "burn_factor": self.row.factor,
            "long_window_seconds": self.row.long.total_seconds(),
            "short_window_seconds": self.row.short.total_seconds(),
            "burn_rates": {str(int(w.total_seconds())): rate for w, rate in self.rates.items()},
            "budget_left_share": self.left,
            "budget_measured_seconds": self.measured.total_seconds(),
            "objective": self.objective,
            "target_seconds": self.freshness.total_seconds(),
            "window_seconds": self.window.total_seconds(),
        }


def burn(ledger: MinuteLedger, freshness: timedelta, objective: float, window: timedelta) -> Burn | None:
    """The first row of :data:`BURN_WINDOWS` whose long and short windows both burn above its factor, on
    ``ledger``'s minutes up to its newest (``freshness``: the target the ledger judged minutes against;
    ``objective``: the promised share of good minutes, ``0.995``; ``window``: the SLO period). ``None``:
    no row holds, or the ledger has no minute yet."""
    if ledger.end is None:
        return None
    budget = 1 - objective
    rates: dict[timedelta, float] = {}
    for w in sorted({w for row in BURN_WINDOWS for w in (row.long, row.short)}):
        bad, counted = ledger.window(w)
        if counted:
            rates[w] = bad / counted / budget
    row = next(
        (r for r in BURN_WINDOWS if rates.get(r.long, 0) > r.factor and rates.get(r.short, 0) > r.factor), None
    )
    if row is None:
        return None
    bad_minutes, counted = ledger.window(min(window, _LONGEST))
    left = 1 - bad_minutes / (budget * (window / MINUTE))
    _, long_counted = ledger.window(row.long)
    return Burn(row, rates, freshness, objective, window, left, counted * MINUTE, long_counted * MINUTE)


def evaluate_slo(params: SloParams, history: JobHistory, now: datetime) -> list[Finding]:
    """The job's ``freshness_slo`` finding at ``now``: ``CRITICAL`` (page) or ``WARNING`` (ticket) when a
    row of :data:`BURN_WINDOWS` burns on both its windows; none otherwise.

    ``details``: ``alert`` (page/ticket), ``burn_rate`` (the long window's), ``long_window_seconds``,
    ``short_window_seconds``, ``burn_factor``, ``burn_rates`` (window seconds -> burn rate, every window of
    the table with counted minutes), ``budget_left_share`` (may be negative: overspent),
    ``budget_measured_seconds`` (the counted history the budget was judged on), ``objective``,
    ``target_seconds``, ``window_seconds``, ``delay_seconds`` (now's, when known), ``batch_span_seconds``
    (a Spark query in real-time mode: how long each batch holds its watermark, not counted as delay).
    """
    if params.freshness is None:
        return []
    found = burn(_ledger(history, now, params.freshness), params.freshness, params.objective, params.window)
    if found is None:
        return []
    delay = _current_delay(history, now)
    target = format_duration(params.freshness)
    measure = "consumer lag" if history.engine is Engine.KAFKA else "watermark"
    now_text = (
        f"The delay now is {format_duration(timedelta(seconds=delay))}; "
        if delay is not None
        else "The delay now is unknown; "
    )
    advice = (
        "the freshness, watermark_stall, idle_source, falling_behind and consumer_lag findings of this job "
        "say why it is behind."
    )
    details = found.details()
    if delay is not None:
        details["delay_seconds"] = delay
    span = _batch_span(history)
    rhythm = ""
    if span:
        details["batch_span_seconds"] = span.total_seconds()
        rhythm = (
            f"The query runs in real-time mode: each {format_duration(span)} batch holds its watermark until it "
            "ends, and that time is not counted as delay, so these minutes were late beyond the batch rhythm. "
        )
    return [
        Finding(
            rule=RULE,
            severity=found.severity,
            job=history.job,
            message=found.rates_text("freshness SLO", f"the {measure} more than {target} behind")
            + rhythm
            + found.meaning_text()
            + found.budget_text()
            + now_text
            + advice,
            observed_at=now,
            details=details,
        )
    ]
