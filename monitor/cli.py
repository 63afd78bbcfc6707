"""The ``tidegauge`` command line (Typer).

Each sub-command lives in its own module under :mod:`monitor.commands`; this module only registers them
and maps :class:`monitor.errors.InputError` to a one-line message and exit code 2.
"""

from __future__ import annotations

import sys

import typer

from monitor.errors import InputError, SchemaOutdatedError

app = typer.Typer(
    name="tidegauge",
    help="Watermark, late-data and state monitoring for Spark Structured Streaming and Flink jobs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register() -> None:
    from monitor.commands import scan as _scan
    from monitor.commands import whatif as _whatif

    _scan.register(app)
    _whatif.register(app)


_register()


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``tidegauge`` console script.

    Exit codes: 0 ok, 1 a finding reached ``--fail-on`` (scan), 2 bad input or usage.
    """
    try:
        app(args=argv, standalone_mode=True)
    except (InputError, SchemaOutdatedError) as exc:
        print(f"tidegauge: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
