"""Routes: which receiver is told about which alerts, how often firing alerts are repeated, and whether
resolved messages are sent (a flat version of Alertmanager's route tree: every matching route receives).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta

from monitor.alerts.silences import Matcher, matches_all
from monitor.model import Severity

__all__ = ["DEFAULT_REPEAT_INTERVAL", "Route", "routes_for"]

#: Alertmanager's default ``repeat_interval``.
DEFAULT_REPEAT_INTERVAL = timedelta(hours=4)


@dataclass(frozen=True)
class Route:
    """One receiver's subscription.

    Attributes:
        receiver: name of the notifier (``Notifier.name``) that delivers.
        matchers: the alert's labels (:meth:`Alert.all_labels`) must match all of them.
        min_severity: alerts below this severity are not routed here.
        repeat_interval: a still-firing alert is notified again after this long (Alertmanager
            ``repeat_interval``).
        send_resolved: whether resolved notifications are sent (Alertmanager ``send_resolved``).

    Raises:
        ValueError: empty receiver or a non-positive ``repeat_interval``.
    """

    receiver: str
    matchers: tuple[Matcher, ...] = ()
    min_severity: Severity = Severity.INFO
    repeat_interval: timedelta = DEFAULT_REPEAT_INTERVAL
    send_resolved: bool = True

    def __post_init__(self) -> None:
        if not self.receiver:
            raise ValueError("Route.receiver must not be empty")
        if self.repeat_interval <= timedelta(0):
            raise ValueError("Route.repeat_interval must be positive")
        object.__setattr__(self, "matchers", tuple(self.matchers))

    def accepts(self, labels: Mapping[str, str], severity: Severity) -> bool:
        """Whether an alert with these labels and severity goes to this route's receiver."""
        return severity >= self.min_severity and matches_all(self.matchers, labels)


def routes_for(routes: Iterable[Route], labels: Mapping[str, str], severity: Severity) -> list[Route]:
    """The routes accepting an alert, first route per receiver only (a receiver is told once)."""
    seen: set[str] = set()
    out: list[Route] = []
    for route in routes:
        if route.receiver not in seen and route.accepts(labels, severity):
            seen.add(route.receiver)
            out.append(route)
    return out
