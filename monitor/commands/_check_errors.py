"""The failure contract of ``tidegauge check kafka`` and ``check flink`` under ``--format json``.

A check that fails as a whole (bad input, the cluster or JobManager cannot be reached, the client library
not installed) prints one JSON document on stdout, ``{"error": "<the message>"}``, so a script reading
stdout always gets JSON; the CLI then prints the usual ``tidegauge: error:`` line on stderr and exits 2.
A check that ran but could not read everything prints its report, whose ``errors`` list says what failed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from monitor import redaction
from monitor.errors import TidegaugeError

__all__ = ["json_error_document"]


@contextmanager
def json_error_document(fmt: str) -> Iterator[None]:
    """Under ``fmt == "json"``, a :class:`~monitor.errors.TidegaugeError` raised in the block also prints
    ``{"error": MESSAGE}`` (redacted, one document) on stdout; the error is re-raised either way."""
    try:
        yield
    except TidegaugeError as exc:
        if fmt == "json":
            typer.echo(json.dumps({"error": redaction.redact(str(exc))}))
        raise
