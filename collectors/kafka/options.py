"""What a Kafka lag target is: bootstrap servers, which groups, security, timeouts, lag-in-seconds method.

Security settings are librdkafka's (confluent-kafka's) names: ``security.protocol`` (``PLAINTEXT``,
``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``), ``sasl.mechanism`` (``PLAIN``, ``SCRAM-SHA-256``,
``SCRAM-SHA-512``, ``OAUTHBEARER``), ``sasl.username``/``sasl.password``, ``ssl.ca.location``,
``ssl.certificate.location``, ``ssl.key.location``, ``ssl.key.password``. The password values are held
by the caller (the composition root resolves them from ``{env: ...}``/``{file: ...}``) and only handed to
the client; :meth:`KafkaOptions.__repr__` and :meth:`KafkaOptions.describe` never show them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from collectors.kafka.lag import AUTO_OFFSET_RESETS

__all__ = ["KafkaOptions", "LagSecondsMethod"]

LagSecondsMethod = Literal["interpolated", "exact", "none"]


@dataclass(frozen=True)
class KafkaOptions:
    """One Kafka lag target.

    Attributes:
        cluster: a short name of the cluster; job ids are ``cluster/group``.
        bootstrap_servers: ``host:port[,host:port...]``.
        groups: exact group ids to watch; empty means every group the cluster lists.
        include: regular expressions (``re.fullmatch``); when given, only matching groups are watched.
        exclude: regular expressions; matching groups are not watched (applied after ``groups``/``include``).
        lag_seconds: ``"interpolated"`` (from sampled log-end offsets, no fetch), ``"exact"`` (the
            timestamp of the record at the committed offset, one fetch per partition, at most
            ``max_record_fetches`` per poll) or ``"none"``.
        max_record_fetches: bound on record fetches per poll (exact method; the interpolated method also
            probes partitions whose lag is 1, to tell a transaction marker from a record).
        request_timeout_s: timeout of each admin request and of the record fetches, seconds.
        concurrency: groups whose offsets are requested at once.
        table_points: points kept per partition for interpolation.
        security: librdkafka security settings (see the module docstring); secrets in ``secrets``.
        secrets: ``sasl.password`` / ``ssl.key.password`` values (never shown).
        auto_offset_reset: the watched groups' ``auto.offset.reset`` (Kafka ``ConsumerConfig``:
            ``earliest`` or ``latest``) when the user knows it; ``None`` (default): unknown, so a partition a
            member owns but never committed is read both ways (:class:`collectors.kafka.lag.Uncommitted`).
    """

    cluster: str
    bootstrap_servers: str
    groups: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    lag_seconds: LagSecondsMethod = "interpolated"
    max_record_fetches: int = 100
    request_timeout_s: float = 10.0
    concurrency: int = 16
    table_points: int = 60
    security: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict, repr=False)
    auto_offset_reset: str | None = None

    def __post_init__(self) -> None:
        for pattern in (*self.include, *self.exclude):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"invalid group regular expression {pattern!r}: {exc}") from None
        if self.lag_seconds not in ("interpolated", "exact", "none"):
            raise ValueError(f"lag_seconds must be interpolated, exact or none, not {self.lag_seconds!r}")
        if self.auto_offset_reset is not None and self.auto_offset_reset not in AUTO_OFFSET_RESETS:
            raise ValueError(f"auto_offset_reset must be earliest or latest, not {self.auto_offset_reset!r}")

    def client_config(self) -> dict[str, str]:
        """The librdkafka configuration (with secrets: hand it to the client only)."""
        conf = {"bootstrap.servers": self.bootstrap_servers, "client.id": f"tidegauge-{self.cluster}"}
        conf.update(self.security)
        conf.update(self.secrets)
        return conf

    def wanted(self, group: str) -> bool:
        """Whether ``group`` is watched: in ``groups`` or matching ``include`` (or both empty), and not
        matching ``exclude``."""
        if self.groups or self.include:
            listed = group in self.groups or any(re.fullmatch(p, group) for p in self.include)
            if not listed:
                return False
        return not any(re.fullmatch(p, group) for p in self.exclude)

    def describe(self) -> str:
        """The target for messages: bootstrap servers and protocol, never a secret."""
        proto = self.security.get("security.protocol", "PLAINTEXT")
        return f"kafka {self.cluster} ({self.bootstrap_servers}, {proto})"
