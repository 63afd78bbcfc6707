"""Exceptions raised by tidegauge.

Exception tree::

    TidegaugeError                 base of everything we raise on purpose
    ├── InputError                 bad user input: a file, field or value; names it (CLI exit code 2)
    │   ├── EventLogError          an event-log file cannot be read (corrupt frame, truncated line, codec)
    │   ├── ProgressFormatError    a progress document lacks required fields or has wrong types
    │   └── ConfigError            the YAML config is invalid (names file and field path)
    ├── SchemaOutdatedError        the database schema is older than this code: run `tidegauge db upgrade`
    ├── StoreError                 the database cannot be opened or used: unreachable, missing driver, no file
    ├── StartupError               a part of the daemon could not start (the port is taken); CLI exit code 2
    └── DeliveryError              a notification could not be delivered (``retryable`` says whether to retry)

Messages never contain secrets (tokens, webhook URLs with credentials, passwords).
"""

from __future__ import annotations

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INTERNAL",
    "ConfigError",
    "DeliveryError",
    "EventLogError",
    "InputError",
    "ProgressFormatError",
    "SchemaOutdatedError",
    "StartupError",
    "StoreError",
    "TidegaugeError",
]


#: CLI exit code for bad input or usage (a file, field or value named on stderr), or an unusable database.
EXIT_BAD_INPUT = 2
#: CLI exit code for an internal error (a bug): never used for anything the user gave us.
EXIT_INTERNAL = 3


class TidegaugeError(Exception):
    """Base class of tidegauge's own exceptions."""


class InputError(TidegaugeError):
    """Bad input named by its file/field; the CLI prints it on one line and exits with code 2."""


class EventLogError(InputError):
    """A Spark event-log file cannot be read: unknown codec, corrupt frame, truncated or invalid line."""


class ProgressFormatError(InputError):
    """A streaming progress document is missing required fields or has values of the wrong type or out of
    range (the message names the document and the field).

    Attributes:
        field: the field's JSON path in the document when one field is to blame (``progress.name``), else
            ``None`` (the document as a whole: invalid JSON, nested too deeply).
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ConfigError(InputError):
    """The configuration is invalid; the message names the file, the path to the field and what is allowed."""


class SchemaOutdatedError(TidegaugeError):
    """The database schema is not at the head revision; the message says to run ``tidegauge db upgrade``."""


class StoreError(TidegaugeError):
    """The database cannot be opened or used (server unreachable, login refused, driver not installed,
    unknown dialect, no SQLite file); the message names the URL with the password hidden and the cause.
    """


class StartupError(TidegaugeError):
    """A part of the daemon or of ``serve`` could not start, e.g. ``cannot listen on 127.0.0.1:8321:
    address already in use``; the CLI prints it on one line and exits with code 2."""


class DeliveryError(TidegaugeError):
    """A notifier failed to deliver one batch.

    Attributes:
        retryable: True for 429, 5xx, timeouts and connection errors; False for other 4xx.
        status_code: HTTP status if there was a response.
    """

    def __init__(self, message: str, *, retryable: bool, status_code: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status_code = status_code
