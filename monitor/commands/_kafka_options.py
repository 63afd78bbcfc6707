"""The Kafka connection options of the one-shot checks (``check kafka``, ``check flink --locate-event-time``):
the same ``--security-protocol``/``--sasl-*``/``--ssl-ca`` options give the same :class:`KafkaOptions`."""

from __future__ import annotations

import os
from typing import Any

from collectors.kafka import KafkaOptions
from monitor.durations import parse_timedelta
from monitor.errors import InputError

__all__ = ["kafka_options"]


def kafka_options(
    bootstrap: str,
    *,
    timeout: str,
    security_protocol: str,
    sasl_mechanism: str | None,
    sasl_username: str | None,
    sasl_password_env: str | None,
    ssl_ca: str | None,
    **kw: Any,
) -> KafkaOptions:
    """The cluster of ``check kafka`` (and of ``check flink --locate-event-time``) from its options (the lag
    collector's :class:`KafkaOptions`; ``timeout`` is duration text, ``**kw`` more fields of it).

    Raises:
        InputError: a bad option, or the SASL password variable not set.
    """
    security = {"security.protocol": security_protocol}
    secrets: dict[str, str] = {}
    if sasl_mechanism:
        security["sasl.mechanism"] = sasl_mechanism
    if sasl_username:
        security["sasl.username"] = sasl_username
    if sasl_password_env:
        value = os.environ.get(sasl_password_env)
        if not value:
            raise InputError(f"--sasl-password-env: environment variable {sasl_password_env} is not set")
        secrets["sasl.password"] = value
    if ssl_ca:
        security["ssl.ca.location"] = ssl_ca
    try:
        return KafkaOptions(
            cluster="check", bootstrap_servers=bootstrap,
            request_timeout_s=parse_timedelta(timeout, what="--timeout").total_seconds(),
            security=security, secrets=secrets, **kw,
        )  # fmt: skip
    except ValueError as exc:
        raise InputError(str(exc)) from None
