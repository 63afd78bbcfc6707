"""Logging set-up shared by the commands that serve (``run``, ``serve``); not a command itself."""

from __future__ import annotations

import logging

import typer

__all__ = ["configure_logging"]


def configure_logging(log_level: str) -> int:
    """stderr logging at ``log_level`` for a command that serves (``run``, ``serve``); returns the level.

    Raises:
        typer.BadParameter: an unknown level name.
    """
    level = logging.getLevelName(log_level.upper())
    if not isinstance(level, int):
        raise typer.BadParameter(f"unknown log level {log_level!r}", param_hint="--log-level")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("apscheduler", "httpx", "httpcore", "alembic"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
    return level
