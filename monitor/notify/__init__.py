"""Notifiers (webhook, Slack, Alertmanager) and the dispatcher that owns delivery policy."""

from monitor.notify.alertmanager import AlertmanagerNotifier
from monitor.notify.base import Notifier, is_retryable_status
from monitor.notify.dispatcher import DispatchReport, RetryPolicy, dispatch_due
from monitor.notify.slack import SlackNotifier
from monitor.notify.webhook import WebhookNotifier

__all__ = [
    "AlertmanagerNotifier",
    "DispatchReport",
    "Notifier",
    "RetryPolicy",
    "SlackNotifier",
    "WebhookNotifier",
    "dispatch_due",
    "is_retryable_status",
]
