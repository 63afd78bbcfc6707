"""The ``tidegauge`` command line (Typer).

Each sub-command lives in its own module under :mod:`monitor.commands`; this module only registers them
(only the module of the command run: :func:`command_app`) and holds the one contract for failures of
every command:

* every message leaves through the process's redactor (:mod:`monitor.redaction`);
* tidegauge's own errors (:class:`monitor.errors.TidegaugeError`: bad input naming its file, field or
  value; an outdated schema; a database that cannot be opened; a part that cannot start) print ``tidegauge: error: MESSAGE`` on
  stderr (a multi-line message gets the prefix on every line) and exit with code 2 (:data:`EXIT_BAD_INPUT`);
* any other exception is a bug of ours: one line ``tidegauge: internal error: TYPE: MESSAGE`` and exit
  code 3 (:data:`EXIT_INTERNAL`), distinct from ``scan``'s 1 ("a finding reached --fail-on");
* the traceback is printed only with the global ``--debug`` (``tidegauge --debug scan ...``).
"""

from __future__ import annotations

import logging
import sys
import traceback

import typer

from monitor import redaction
from monitor.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, TidegaugeError

__all__ = ["EXIT_BAD_INPUT", "EXIT_INTERNAL", "app", "command_app", "command_modules", "main"]

_options = {"debug": False}

app = typer.Typer(
    name="tidegauge",
    help="Watermark, late-data and state monitoring for Spark Structured Streaming and Flink jobs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


_registered: set[str] = set()


def command_modules() -> list[str]:
    """The sub-command modules of :mod:`monitor.commands`, in name order: each ``monitor.commands.<name>``
    registers the top-level command ``<name>`` (a group for ``check``, ``db``, ...) with ``register(app)``.
    Discovery keeps this file free of per-command edits."""
    import pkgutil

    import monitor.commands as commands

    return sorted(info.name for info in pkgutil.iter_modules(commands.__path__) if not info.name.startswith("_"))


def command_app(command: str | None = None) -> typer.Typer:
    """The app with ``command``'s module registered, or every module when ``command`` is ``None`` or names
    none (the top-level ``--help``, a misspelt command). Only the named command's module is imported, so
    ``tidegauge whatif`` does not pay for the collectors, the store or the HTTP client it never uses.
    Registering is done once per module and process."""
    import importlib

    names = command_modules()
    for name in [command] if command in names else names:
        if name not in _registered:
            importlib.import_module(f"monitor.commands.{name}").register(app)
            _registered.add(name)
    return app


def _command_of(argv: list[str]) -> str | None:
    """The command an argument list names: its first argument that is not an option (the only global
    option, ``--debug``, takes no value)."""
    return next((a for a in argv if not a.startswith("-")), None)


@app.callback()
def _global_options(
    debug: bool = typer.Option(
        False, "--debug", help="On an error, also print the Python traceback (for bug reports)."
    ),
) -> None:
    """Watermark, late-data and state monitoring for Spark Structured Streaming and Flink jobs."""
    _options["debug"] = debug
    if not debug:
        # the object-store libraries log their own retries and failures, with tracebacks and unredacted,
        # straight to stderr; tidegauge reports each failure itself (a collector error of its own kind, or
        # one line and exit 2): their logs are shown only under --debug
        for library in _STORE_LIBRARY_LOGGERS:
            logging.getLogger(library).setLevel(logging.CRITICAL)


#: Loggers of the object-store libraries (s3fs/aiobotocore, gcsfs/google-auth, adlfs/azure, their HTTP).
_STORE_LIBRARY_LOGGERS = (
    "fsspec", "s3fs", "aiobotocore", "botocore", "gcsfs", "google", "google_auth_httplib2", "adlfs", "azure",
    "aiohttp", "urllib3",
)  # fmt: skip



def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``tidegauge`` console script.

    Exit codes: 0 ok; 1 a finding reached ``--fail-on`` (scan) or the schema is not at head
    (``db current``); 2 (:data:`EXIT_BAD_INPUT`) bad input or usage, or the database cannot be opened;
    3 (:data:`EXIT_INTERNAL`) an internal error. The traceback is printed only under ``--debug``.
    """
    _options["debug"] = False
    try:
        command_app(_command_of(sys.argv[1:] if argv is None else argv))
        app(args=argv, standalone_mode=True)
    except TidegaugeError as exc:
        if _options["debug"]:
            traceback.print_exc(file=sys.stderr)
        for line in redaction.redact(str(exc)).splitlines() or [type(exc).__name__]:
            print(f"tidegauge: error: {line}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT) from None
    except Exception as exc:
        if _options["debug"]:
            traceback.print_exc(file=sys.stderr)
        text = redaction.redact(str(exc)).strip()
        first = text.splitlines()[0][:300] if text else ""
        hint = "" if _options["debug"] else " (run with --debug for the traceback)"
        print(
            f"tidegauge: internal error: {type(exc).__name__}{': ' + first if first else ''}{hint}",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_INTERNAL) from None


if __name__ == "__main__":
    main()
