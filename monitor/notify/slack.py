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
from monitor.model import Severity
from monitor.notify.base import DEFAULT_TIMEOUT_SECONDS, ReportBatch, dashboard_link, job_title, post
from monitor.reports.scheduled import HealthReport, JobHealth
from monitor.text import clip

__all__ = ["MAX_ALERT_BLOCKS", "SlackNotifier", "slack_message", "slack_report_message"]

#: Alerts rendered per message (each is one section); the rest are counted in a context line.
MAX_ALERT_BLOCKS = 40
_HEADER_MAX = 150
_SECTION_MAX = 3000
_FIELD_MAX = 2000
_SCOPE_LABELS = ("source", "partition", "subtask", "operator")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _when(value: datetime) -> str:
    epoch = int(value.timestamp())
    return f"<!date^{epoch}^{{date_short_pretty}} {{time}}|{format_time(value)}>"


def _job_title(alert: AlertNotification) -> str:
    return job_title(alert.labels.get("engine"), alert.labels.get("job_id"), alert.annotations.get("job_name"))


def _header(title: str) -> dict[str, Any]:
    return {"type": "header", "text": {"type": "plain_text", "text": clip(title, _HEADER_MAX), "emoji": True}}


def _more(count: int) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": f"…and {count} more"}]}


def _button(link: str) -> dict[str, Any]:
    return {
        "type": "actions",
        "elements": [{"type": "button", "text": {"type": "plain_text", "text": "Open dashboard"}, "url": link}],
    }


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
        "text": {"type": "mrkdwn", "text": clip(text, _SECTION_MAX)},
        "fields": [{"type": "mrkdwn", "text": clip(f, _FIELD_MAX)} for f in fields],
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
    blocks: list[dict[str, Any]] = [_header(title)]
    shown = batch.alerts[:MAX_ALERT_BLOCKS]
    blocks.extend(_alert_section(a) for a in shown)
    if len(batch.alerts) > len(shown):
        blocks.append(_more(len(batch.alerts) - len(shown)))
    link = dashboard_link(dashboard_url, batch.alerts[0].labels if batch.alerts else {})
    if link:
        blocks.append(_button(link))
    rules = ", ".join(sorted({a.rule for a in batch.alerts}))
    return {"text": _escape(f"{title} ({rules})"), "blocks": blocks}


_HEALTH_ICON = {
    Severity.OK: ":large_green_circle:",
    Severity.INFO: ":large_blue_circle:",
    Severity.WARNING: ":large_orange_circle:",
    Severity.CRITICAL: ":red_circle:",
}


def _known(value: object, unit: str = "") -> str:
    return "unknown" if value is None else f"{value}{unit}"


def _job_section(job: JobHealth) -> dict[str, Any]:
    n = job.numbers
    watermark = "unknown" if n.watermark is None else format_time(n.watermark)
    lag = "unknown" if n.watermark_lag_seconds is None else f"{n.watermark_lag_seconds:.0f}s"
    lines = [
        f"{_HEALTH_ICON[job.health]} *{_escape(job_title(job.engine, job.job_id, job.name))}*: {job.health.label()}",
        f"watermark {watermark} (lag {lag}); input rows last hour {_known(n.input_rows_last_hour)}; "
        f"dropped by watermark last hour {_known(n.dropped_by_watermark_last_hour)}; state rows {_known(n.state_rows)}",
    ]
    lines.extend(f"• {a.state.value} *{_escape(a.rule)}* ({a.severity.label()}): {_escape(a.message)}" for a in job.alerts)
    return {"type": "section", "text": {"type": "mrkdwn", "text": clip("\n".join(lines), _SECTION_MAX)}}


def slack_report_message(report: HealthReport, dashboard_url: str | None = None) -> dict[str, Any]:
    """The incoming-webhook JSON body of a health report: a header with the overall health and job
    counts, one section per job (at most :data:`MAX_ALERT_BLOCKS`, worst first), and the dashboard button."""
    unhealthy = sum(1 for j in report.jobs if j.health > Severity.OK)
    title = (
        f"[REPORT] {report.name}: {report.health.label().upper()}, "
        f"{len(report.jobs)} jobs, {unhealthy} with firing alerts ({format_time(report.scheduled_at)[:16]}Z)"
    )
    blocks: list[dict[str, Any]] = [_header(title)]
    shown = report.jobs[:MAX_ALERT_BLOCKS]
    blocks.extend(_job_section(j) for j in shown)
    if len(report.jobs) > len(shown):
        blocks.append(_more(len(report.jobs) - len(shown)))
    link = dashboard_link(dashboard_url, {})
    if link:
        blocks.append(_button(link))
    return {"text": _escape(title), "blocks": blocks}


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
    #: Slack incoming webhooks have no idempotency key: a re-send after a crash during the send shows twice.
    honours_idempotency_key: bool = field(default=False, init=False)

    def send(self, batch: NotificationBatch, client: httpx.Client) -> None:
        """POST the Block Kit message. Raises :class:`~monitor.errors.DeliveryError` (see :func:`post`)."""
        self._post(slack_message(batch, self.dashboard_url), client)

    def send_report(self, batch: ReportBatch, client: httpx.Client) -> None:
        """POST the report's Block Kit message. Raises :class:`~monitor.errors.DeliveryError` (see :func:`post`)."""
        self._post(slack_report_message(batch.report, self.dashboard_url), client)

    def _post(self, message: dict[str, Any], client: httpx.Client) -> None:
        body = json.dumps(message, ensure_ascii=False).encode()
        post(
            client,
            self.webhook_url,
            receiver=self.name,
            content=body,
            headers={},
            secrets=(self.webhook_url,),
            timeout_seconds=self.timeout_seconds,
        )
