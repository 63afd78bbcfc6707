"""Slack incoming-webhook receiver: one Block Kit message per batch.

The message says what (rule, severity), which job, why (the finding's message), since when (Slack
``<!date^...>`` tokens render in the reader's time zone) and links to the job's dashboard page. Block Kit
limits respected here: at most 50 blocks, header text <= 150 characters, section text <= 3000, field text
<= 2000; ``&``, ``<`` and ``>`` in our text are escaped as Slack requires.

The webhook URL is itself the credential: it is kept out of ``repr`` and error messages.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx

from monitor.alerts.notification import AlertNotification, NotificationBatch, NotificationStatus, format_time
from monitor.notify.base import DEFAULT_TIMEOUT_SECONDS, dashboard_link, post

__all__ = ["MAX_ALERT_BLOCKS", "SlackNotifier", "slack_message"]

#: Alerts rendered per message (each is one section); the rest are counted in a context line.
MAX_ALERT_BLOCKS = 40
_HEADER_MAX = 150
_SECTION_MAX = 3000
_FIELD_MAX = 2000
_SCOPE_LABELS = ("source", "partition", "subtask", "operator")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _when(value: datetime) -> str:
    epoch = int(value.timestamp())
    return f"<!date^{epoch}^{{date_short_pretty}} {{time}}|{format_time(value)}>"


def _job_title(alert: AlertNotification) -> str:
    job_id = alert.labels.get("job_id", "?")
    name = alert.annotations.get("job_name")
    engine = alert.labels.get("engine", "?")
    return f"{name} ({engine} {job_id})" if name else f"{engine} {job_id}"


def _alert_section(alert: AlertNotification) -> dict[str, Any]:
    icon = ":rotating_light:" if alert.status is NotificationStatus.FIRING else ":white_check_mark:"
    text = f"{icon} *{_escape(alert.rule)}* ({alert.severity.label()})\n{_escape(alert.message)}"
    scope = ", ".join(f"{k}={alert.labels[k]}" for k in _SCOPE_LABELS if k in alert.labels)
    fields = [
        f"*Job*\n{_escape(_job_title(alert))}",
        f"*Active since*\n{_when(alert.active_at)}",
    ]
    if scope:
        fields.append(f"*Scope*\n{_escape(scope)}")
    if alert.resolved_at is not None:
        fields.append(f"*Resolved at*\n{_when(alert.resolved_at)}")
    return {
        "type": "section",
        "text": {"type": "mrkdwn", "text": _clip(text, _SECTION_MAX)},
        "fields": [{"type": "mrkdwn", "text": _clip(f, _FIELD_MAX)} for f in fields],
    }


def slack_message(batch: NotificationBatch, dashboard_url: str | None = None) -> dict[str, Any]:
    """The incoming-webhook JSON body (``text`` fallback + ``blocks``) for ``batch``."""
    firing, resolved = batch.firing(), batch.resolved()
    job = _job_title(batch.alerts[0]) if batch.alerts else batch.group_key
    counts = ", ".join(
        part for part in (f"{len(firing)} firing" if firing else "", f"{len(resolved)} resolved" if resolved else "")
        if part
    )
    title = f"[{batch.status.value.upper()}] {job}: {counts}"
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _clip(title, _HEADER_MAX), "emoji": True}}
    ]
    shown = batch.alerts[:MAX_ALERT_BLOCKS]
    blocks.extend(_alert_section(a) for a in shown)
    if len(batch.alerts) > len(shown):
        more = len(batch.alerts) - len(shown)
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"…and {more} more"}]})
    link = dashboard_link(dashboard_url, batch.alerts[0].labels if batch.alerts else {})
    if link:
        blocks.append(
            {
                "type": "actions",
                "elements": [
                    {"type": "button", "text": {"type": "plain_text", "text": "Open dashboard"}, "url": link}
                ],
            }
        )
    rules = ", ".join(sorted({a.rule for a in batch.alerts}))
    return {"text": _escape(f"{title} ({rules})"), "blocks": blocks}


@dataclass(frozen=True)
class SlackNotifier:
    """Slack incoming webhook.

    Attributes:
        name: receiver name.
        webhook_url: ``https://hooks.slack.com/services/...`` (secret: not in ``repr`` or messages).
        dashboard_url: base URL of the dashboard for the "Open dashboard" button.
        timeout_seconds: per-request timeout.
    """

    name: str
    webhook_url: str = field(repr=False)
    dashboard_url: str | None = None
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS

    def send(self, batch: NotificationBatch, client: httpx.Client) -> None:
        """POST the Block Kit message. Raises :class:`~monitor.errors.DeliveryError` (see :func:`post`)."""
        body = json.dumps(slack_message(batch, self.dashboard_url), ensure_ascii=False).encode()
        post(
            client,
            self.webhook_url,
            receiver=self.name,
            content=body,
            headers={},
            secrets=(self.webhook_url,),
            timeout_seconds=self.timeout_seconds,
        )
