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
from collectors.kafka.collector import groups_samples
from collectors.kafka.exporters import parse_exporter_scrape
from monitor.errors import InputError
from monitor.model import CollectorError, ErrorKind, PollResult

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
        """Scrape once; an unreachable or unparseable endpoint is one error entry; values out of bounds
        (an offset beyond int64, a partition label beyond int32) are ``field`` error entries naming the
        series, and the rest of the scrape is kept."""
        target = safe_url(self.url)
        body = get_text(self._client, self.url, self._limits, self._limits.poll_deadline())
        if isinstance(body, HttpFailure):
            return PollResult(errors=(body.to_error(self.name, target, now),))
        try:
            scrape = parse_exporter_scrape(body, target)
        except InputError as exc:
            return PollResult(errors=(CollectorError(self.name, target, str(exc), now, retryable=False),))
        samples, refused = groups_samples(self.cluster, [g.lag for g in scrape.groups], now, self.name, target)
        errors = list(refused) + [
            CollectorError(self.name, target, problem, now, retryable=True, kind=ErrorKind.FIELD)
            for problem in scrape.problems
        ]
        return PollResult(samples=tuple(samples), errors=tuple(errors))
