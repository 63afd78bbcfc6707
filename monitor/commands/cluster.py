"""``tidegauge cluster status -c FILE [--db URL] [--format text|json]``: the fleet as the database sees it.

Every ``tidegauge run`` on one database is an instance (:mod:`monitor.daemon.fleet`). ``cluster status``
prints each instance (last heartbeat, targets held, live or gone) and each target's holder and lease
expiry, and the receivers' the same way. JSON::

    {"instances": [{"name", "host", "pid", "started_at", "last_heartbeat", "alive", "targets"}],
     "targets":   [{"name", "collector", "holder", "lease_until", "held_since", "lease_expired"}],
     "receivers": [{"name", "holder", "lease_until", "held_since", "lease_expired"}]}

``holder`` is ``null`` for a lease that is free or expired (the previous holder is ``last_holder``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from monitor.alerts.notification import format_time
from monitor.commands._database import CONFIG_OPTION, DB_OPTION, with_store
from monitor.store import Store
from monitor.store.fleet_repo import InstanceInfo, LeaseInfo, list_instances, list_leases
from monitor.timefmt import format_duration

__all__ = ["cluster_status", "register"]


class _Format(StrEnum):
    TEXT = "text"
    JSON = "json"


@dataclass(frozen=True)
class _Fleet:
    instances: list[InstanceInfo]
    leases: list[LeaseInfo]


def _lease_doc(lease: LeaseInfo, now: datetime) -> dict[str, Any]:
    holder = lease.held_by(now)
    doc: dict[str, Any] = {
        "name": lease.resource,
        "holder": holder,
        "lease_until": format_time(lease.lease_until) if lease.lease_until else None,
        "held_since": format_time(lease.held_since) if holder and lease.held_since else None,
        "lease_expired": holder is None,
    }
    if holder is None and lease.holder is not None:
        doc["last_holder"] = lease.holder
    return doc


def cluster_status(instances: list[InstanceInfo], leases: list[LeaseInfo], now: datetime) -> dict[str, Any]:
    """The ``--format json`` document (see the module docstring) at ``now`` (aware UTC)."""
    targets = [
        {**_lease_doc(lease, now), "collector": lease.collector} for lease in leases if lease.kind == "target"
    ]
    receivers = [_lease_doc(lease, now) for lease in leases if lease.kind == "receiver"]
    held: dict[str, int] = {}
    for t in targets:
        if t["holder"] is not None:
            held[t["holder"]] = held.get(t["holder"], 0) + 1
    return {
        "instances": [
            {
                "name": i.name,
                "host": i.host,
                "pid": i.pid,
                "started_at": format_time(i.started_at),
                "last_heartbeat": format_time(i.last_heartbeat),
                "alive": i.alive(now),
                "targets": held.get(i.name, 0),
            }
            for i in instances
        ],
        "targets": targets,
        "receivers": receivers,
    }


def _ago(at: datetime, now: datetime) -> str:
    seconds = (now - at).total_seconds()
    if seconds >= 0:
        return f"{format_duration(now - at)} ago"
    return f"in {format_duration(at - now)}"


def _text(doc: dict[str, Any], fleet: _Fleet, now: datetime) -> list[str]:
    lines: list[str] = []
    live = sum(1 for i in doc["instances"] if i["alive"])
    lines.append(f"instances: {live} live of {len(doc['instances'])}")
    by_name = {i.name: i for i in fleet.instances}
    for i in doc["instances"]:
        info = by_name[i["name"]]
        state = "live" if i["alive"] else (
            f"gone: no heartbeat for {format_duration(now - info.last_heartbeat)} (ttl {format_duration(info.ttl)})"
        )
        lines.append(
            f"  {i['name']}  pid {i['pid']} on {i['host']}  last heartbeat {i['last_heartbeat']} "
            f"({_ago(info.last_heartbeat, now)})  {i['targets']} target(s)  {state}"
        )
    leases = {(lease.kind, lease.resource): lease for lease in fleet.leases}
    then = (
        "a live instance takes it at its next tick"
        if live
        else "no instance is live, so nothing polls or delivers it: start `tidegauge run`"
    )
    for title, kind, rows in (("targets", "target", doc["targets"]), ("receivers", "receiver", doc["receivers"])):
        unheld = sum(1 for r in rows if r["holder"] is None)
        lines.append(f"{title}: {len(rows) - unheld} held of {len(rows)}")
        for r in rows:
            lease = leases[(kind, r["name"])]
            what = f"  {r['name']}" + (f" ({r['collector']})" if r.get("collector") else "")
            if r["holder"] is not None and lease.lease_until is not None:
                lines.append(f"{what}  held by {r['holder']} until {r['lease_until']} ({_ago(lease.lease_until, now)})")
            elif lease.holder is not None and lease.lease_until is not None:
                lines.append(
                    f"{what}  NOT HELD: the lease of {lease.holder} expired {_ago(lease.lease_until, now)}; {then}"
                )
            else:
                lines.append(f"{what}  NOT HELD: free; {then}")
    return lines


def register(app: typer.Typer) -> None:
    """Add the ``cluster`` command group to ``app``."""
    cluster_app = typer.Typer(help="The fleet of `tidegauge run` instances on one database.", no_args_is_help=True)

    @cluster_app.command("status")
    def status_cmd(
        config: Path | None = CONFIG_OPTION,
        db: str | None = DB_OPTION,
        output: _Format = typer.Option(_Format.TEXT, "--format", help="text or json."),
    ) -> None:
        """Print the instances (last heartbeat, targets held) and each target's holder and lease expiry."""
        now = datetime.now(UTC)

        def read(store: Store) -> _Fleet:
            with store.sessions() as session:
                return _Fleet(list_instances(session), list_leases(session))

        fleet = with_store(db, config, read)
        doc = cluster_status(fleet.instances, fleet.leases, now)
        if output is _Format.JSON:
            typer.echo(json.dumps(doc, indent=2, sort_keys=True))
            return
        for line in _text(doc, fleet, now):
            typer.echo(line)

    app.add_typer(cluster_app, name="cluster")
