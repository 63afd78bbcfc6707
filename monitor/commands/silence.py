"""``tidegauge silence add|list|expire``: manage silences stored in the database.

A silence mutes notifications (not alert evaluation) of alerts whose labels match all its matchers,
from its start until its end; see :mod:`monitor.alerts.silences` for the matcher syntax. Labels available
to matchers: ``alertname`` (the rule), ``severity``, ``engine``, ``job_id``, the scope labels (``source``,
``partition``, ``subtask``, ``operator``) and rule labels.

The database is ``--db URL``, else the ``database:`` of ``-c FILE`` (as ``run``), else the per-user
default. This module is part of the composition root: it reads the wall clock and the environment (for
the database), and passes ``now`` down.
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import typer

from monitor.alerts.notification import format_time, parse_time
from monitor.alerts.silences import KNOWN_LABELS, Silence, parse_matcher, unknown_label_names
from monitor.commands._database import CONFIG_OPTION, DB_OPTION, with_store
from monitor.durations import parse_timedelta
from monitor.errors import InputError
from monitor.store import Store
from monitor.store.alert_repo import add_silence, expire_silence, list_silences

__all__ = ["register"]


_MATCHERS_ARG = typer.Argument(..., help="Matchers: name=value, name!=value, name=~regex, name!~regex.")


def _positive_duration(text: str) -> timedelta:
    """``--duration`` of a silence: a positive duration (``30m``, ``2h``, ``1h30m``, ``1d``).

    Raises:
        InputError: not a duration, or zero.
    """
    total = parse_timedelta(text, what="--duration")
    if total <= timedelta(0):
        raise InputError(f"--duration: invalid duration {text!r}: must be positive")
    return total


def _time_option(text: str | None, name: str) -> datetime | None:
    if text is None:
        return None
    try:
        return parse_time(text)
    except ValueError:
        raise InputError(f"{name}: expected an ISO 8601 time with offset, e.g. 2026-11-29T18:00:00Z") from None


def _row(s: Silence, now: datetime) -> str:
    state = s.state(now)
    matchers = ",".join(str(m) for m in s.matchers)
    return "\t".join([s.id, state, format_time(s.starts_at), format_time(s.ends_at), matchers, s.created_by, s.comment])


def register(app: typer.Typer) -> None:
    """Add the ``silence`` command group to ``app``."""
    silence_app = typer.Typer(help="Mute notifications of matching alerts for a while.", no_args_is_help=True)

    @silence_app.command("add")
    def add_cmd(
        matchers: list[str] = _MATCHERS_ARG,
        duration: str | None = typer.Option(None, "--duration", "-d", help="How long, e.g. 2h (default 1h)."),
        until: str | None = typer.Option(None, "--until", help="End time (ISO 8601 with offset)."),
        starts: str | None = typer.Option(None, "--starts", help="Start time (default: now)."),
        comment: str = typer.Option("", "--comment", "-m", help="Why."),
        author: str | None = typer.Option(None, "--author", help="Who (default: $USER)."),
        db: str | None = DB_OPTION,
        config: Path | None = CONFIG_OPTION,
    ) -> None:
        """Create a silence and print its id."""
        now = datetime.now(UTC)
        if duration is not None and until is not None:
            raise InputError("give --duration or --until, not both")
        starts_at = _time_option(starts, "--starts") or now
        ends_at = _time_option(until, "--until") or starts_at + _positive_duration(duration or "1h")
        if ends_at <= starts_at:
            raise InputError("--until must be after the start")
        silence = Silence(
            id=str(uuid.uuid4()),
            matchers=tuple(parse_matcher(m) for m in matchers),
            starts_at=starts_at,
            ends_at=ends_at,
            created_by=author if author is not None else os.environ.get("USER", ""),
            comment=comment,
            created_at=now,
        )
        for name in unknown_label_names(silence.matchers):
            typer.echo(
                f"tidegauge: warning: matcher label {name!r} is never set by tidegauge (known: "
                f"{', '.join(sorted(KNOWN_LABELS))}); it matches only as the empty string",
                err=True,
            )

        def store_it(store: Store) -> None:
            with store.sessions.begin() as session:
                add_silence(session, silence, now)

        with_store(db, config, store_it)
        typer.echo(silence.id)

    @silence_app.command("list")
    def list_cmd(
        all_: bool = typer.Option(False, "--all", help="Include expired and not yet started silences."),
        as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
        db: str | None = DB_OPTION,
        config: Path | None = CONFIG_OPTION,
    ) -> None:
        """List active silences (tab-separated: id, state, starts, ends, matchers, author, comment)."""
        now = datetime.now(UTC)

        def read(store: Store) -> list[Silence]:
            with store.sessions() as session:
                return list_silences(session, active_at=None if all_ else now)

        for s in with_store(db, config, read):
            if as_json:
                doc = {
                    "id": s.id, "starts_at": format_time(s.starts_at), "ends_at": format_time(s.ends_at),
                    "matchers": [m.to_json() for m in s.matchers], "created_by": s.created_by,
                    "comment": s.comment, "active": s.active(now), "state": s.state(now),
                }  # fmt: skip
                typer.echo(json.dumps(doc, sort_keys=True))
            else:
                typer.echo(_row(s, now))

    @silence_app.command("expire")
    def expire_cmd(
        silence_id: str = typer.Argument(..., metavar="ID", help="Silence id (from `silence add` or `list`)."),
        db: str | None = DB_OPTION,
        config: Path | None = CONFIG_OPTION,
    ) -> None:
        """End a silence now."""
        now = datetime.now(UTC)

        def expire(store: Store) -> bool:
            with store.sessions.begin() as session:
                return expire_silence(session, silence_id, now)

        if not with_store(db, config, expire):
            raise InputError(f"no active or pending silence with id {silence_id!r}")
        typer.echo(f"expired {silence_id}")

    app.add_typer(silence_app, name="silence")
