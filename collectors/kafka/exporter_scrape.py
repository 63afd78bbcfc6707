"""Scrape an exporter users already run (kafka_exporter, KMinion, kafka-lag-exporter, Burrow's
``/metrics``) instead of reading the brokers: the text is parsed by :func:`collectors.kafka.exporters.parse_exporter_text`
and becomes the same samples as the broker collector's (:func:`collectors.kafka.collector.group_samples`,
collector name ``kafka-exporter``), so the same rules judge them. The exporter's own verdicts (Burrow's
status) are not copied into alerts: tidegauge's ``consumer_lag`` rule judges the offsets itself.
"""

from __future__ import annotations

from datetime import datetime

import httpx

from collectors.base import PollsOnce
from collectors.http import DEFAULT_READ_LIMITS, HttpFailure, ReadLimits, get_text, safe_url
from collectors.kafka.collector import group_samples
from collectors.kafka.exporters import parse_exporter_text
from monitor.errors import InputError
from monitor.model import CollectorError, PollResult

__all__ = ["COLLECTOR_NAME", "ExporterScrapeCollector"]

COLLECTOR_NAME = "kafka-exporter"


class ExporterScrapeCollector(PollsOnce):
    """Polls one exporter endpoint.

    Args:
        url: the exporter's metrics URL (``http://kminion:8080/metrics``).
        client: the HTTP client (timeouts, auth headers), owned by the caller.
        cluster: the name jobs are prefixed with (``cluster/group``), the target's name.
        limits: the bounds of the scrape (:class:`collectors.http.ReadLimits`).
    """

    name = COLLECTOR_NAME

    def __init__(
        self, url: str, client: httpx.Client, cluster: str, limits: ReadLimits = DEFAULT_READ_LIMITS
    ) -> None:
        self.url, self._client, self.cluster, self._limits = url, client, cluster, limits

    def poll(self, now: datetime) -> PollResult:
        """Scrape once; an unreachable or unparseable endpoint is one error entry."""
        target = safe_url(self.url)
        body = get_text(self._client, self.url, self._limits, self._limits.poll_deadline())
        if isinstance(body, HttpFailure):
            return PollResult(errors=(body.to_error(self.name, target, now),))
        try:
            groups = parse_exporter_text(body, target)
        except InputError as exc:
            return PollResult(errors=(CollectorError(self.name, target, str(exc), now, retryable=False),))
        samples = [s for g in groups for s in group_samples(self.cluster, g.lag, now, collector=self.name)]
        return PollResult(samples=tuple(samples))
