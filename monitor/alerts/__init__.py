"""Alert lifecycle (pure), silences, routes and the notification records receivers get."""

from monitor.alerts.lifecycle import Alert, AlertEvent, EventKind, RuleTiming, group_key, step, step_all
from monitor.alerts.notification import (
    AlertNotification,
    NotificationBatch,
    NotificationStatus,
    batch_key,
    notification_key,
)
from monitor.alerts.routing import Route, routes_for
from monitor.alerts.silences import Matcher, MatchOp, Silence, is_silenced, parse_matcher

__all__ = [
    "Alert",
    "AlertEvent",
    "AlertNotification",
    "EventKind",
    "MatchOp",
    "Matcher",
    "NotificationBatch",
    "NotificationStatus",
    "Route",
    "RuleTiming",
    "Silence",
    "batch_key",
    "group_key",
    "is_silenced",
    "notification_key",
    "parse_matcher",
    "routes_for",
    "step",
    "step_all",
]
