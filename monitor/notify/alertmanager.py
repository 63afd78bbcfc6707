"""Prometheus Alertmanager receiver: ``POST /api/v2/alerts`` (Alertmanager's OpenAPI ``postableAlerts``).

Each alert becomes ``{labels, annotations, startsAt, endsAt, generatorURL}`` the way Prometheus's
notifier builds them (``rules/manager.go`` ``sendAlerts``): ``startsAt`` is when the alert started
firing; a resolved alert carries ``endsAt`` = its resolution time; a firing alert carries ``endsAt`` =
send time + ``firing_ttl`` when that is set (Prometheus uses 4 x its resend delay), else none, in which
case Alertmanager applies its ``resolve_timeout``. Either way a firing alert must be re-sent before it
expires: give Alertmanager routes a ``repeat_interval`` shorter than ``firing_ttl``/``resolve_timeout``.

Label names are made valid Prometheus label names (``[a-zA-Z_][a-zA-Z0-9_]*``; other characters become
``_``); empty label values are dropped (Prometheus treats them as absent).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import httpx

from monitor.alerts.notification import AlertNotification, NotificationBatch, NotificationStatus, format_time
from monitor.notify.base import DEFAULT_TIMEOUT_SECONDS, dashboard_link, post

__all__ = ["AlertmanagerNotifier", "alertmanager_alerts", "label_name"]

_INVALID = re.compile(r"[^a-zA-Z0-9_]")


def label_name(name: str) -> str:
    """A valid Prometheus label name for ``name`` (invalid characters -> ``_``, leading digit prefixed)."""
    out = _INVALID.sub("_", name) or "_"
    return f"_{out}" if out[0].isdigit() else out


def _alert(
    alert: AlertNotification, batch: NotificationBatch, dashboard_url: str | None, firing_ttl: timedelta | None
) -> dict[str, Any]:
    labels = {label_name(k): v for k, v in sorted(alert.labels.items()) if v != ""}
    annotations = {label_name(k): v for k, v in sorted(alert.annotations.items())}
    annotations.setdefault("summary", f"{alert.rule} on {labels.get('engine', '?')} job {labels.get('job_id', '?')}")
    annotations["tidegauge_fingerprint"] = alert.fingerprint
    item: dict[str, Any] = {
        "labels": labels,
        "annotations": annotations,
        "startsAt": format_time(alert.fired_at or alert.active_at),
    }
    if alert.status is NotificationStatus.RESOLVED and alert.resolved_at is not None:
        item["endsAt"] = format_time(alert.resolved_at)
    elif firing_ttl is not None:
        item["endsAt"] = format_time(batch.sent_at + firing_ttl)
    link = dashboard_link(dashboard_url, alert.labels)
    if link:
        item["generatorURL"] = link
    return item


def alertmanager_alerts(
    batch: NotificationBatch, dashboard_url: str | None = None, firing_ttl: timedelta | None = None
) -> list[dict[str, Any]]:
    """The ``postableAlerts`` JSON list for ``batch``."""
    return [_alert(a, batch, dashboard_url, firing_ttl) for a in batch.alerts]


@dataclass(frozen=True)
class AlertmanagerNotifier:
    """Alertmanager API v2 client.

    Attributes:
        name: receiver name.
        base_url: e.g. ``http://alertmanager:9093`` (may hold credentials: not in ``repr`` or messages).
        dashboard_url: base URL of the dashboard, sent as ``generatorURL``.
        firing_ttl: see the module docstring; ``None`` leaves ``endsAt`` of firing alerts unset.
        timeout_seconds: per-request timeout.
    """

    name: str
    base_url: str = field(repr=False)
    dashboard_url: str | None = None
    firing_ttl: timedelta | None = None
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    #: Alertmanager deduplicates alerts by their labels.
    honours_idempotency_key: bool = field(default=True, init=False)

    def send(self, batch: NotificationBatch, client: httpx.Client) -> None:
        """POST the batch's alerts. Raises :class:`~monitor.errors.DeliveryError` (see :func:`post`)."""
        body = json.dumps(alertmanager_alerts(batch, self.dashboard_url, self.firing_ttl)).encode()
        post(
            client,
            self.base_url.rstrip("/") + "/api/v2/alerts",
            receiver=self.name,
            content=body,
            headers={},
            secrets=(self.base_url,),
            timeout_seconds=self.timeout_seconds,
        )
