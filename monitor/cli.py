"""The ``tidegauge`` command line (Typer).

Each sub-command lives in its own module under :mod:`monitor.commands`; this module only registers them
and maps tidegauge's own errors (:class:`monitor.errors.TidegaugeError`: bad input, an outdated schema, a
database that cannot be opened, a part that cannot start) to ``tidegauge: error: MESSAGE`` on stderr and
exit code 2 (a multi-line message gets the prefix on every line), through the process's redactor
(:mod:`monitor.redaction`).
"""

from __future__ import annotations

import sys

import typer

from monitor import redaction
from monitor.errors import TidegaugeError

app = typer.Typer(
    name="tidegauge",
    help="Watermark, late-data and state monitoring for Spark Structured Streaming and Flink jobs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register() -> None:
    """Register every sub-command module in :mod:`monitor.commands` (each exposes ``register(app)``).

    Discovery keeps this file free of per-command edits; modules are registered in name order.
    """
    import importlib
    import pkgutil

    import monitor.commands as commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"monitor.commands.{info.name}")
        module.register(app)


_register()


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``tidegauge`` console script.

    Exit codes: 0 ok, 1 a finding reached ``--fail-on`` (scan) or the schema is not at head
    (``db current``), 2 bad input or usage, or the database cannot be opened.
    """
    try:
        app(args=argv, standalone_mode=True)
    except TidegaugeError as exc:
        for line in redaction.redact(str(exc)).splitlines() or [type(exc).__name__]:
            print(f"tidegauge: error: {line}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
