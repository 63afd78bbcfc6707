"""The one redactor: every URL and error text that leaves the process goes through :class:`Redactor`.

Where text leaves: log lines (:func:`install` wraps the formatter of every root handler, so records of
every library, tracebacks included, are redacted), stored error columns (outbox ``last_error``, collector
errors), ``/healthz`` bodies, and the CLI's error and status lines (:func:`monitor.cli.main`, URLs printed
by ``tidegauge db``/``run``).

What is hidden (each replaced by ``***``):

* every **configured secret value** (ingest and bearer tokens, webhook HMAC secrets, Slack webhook URLs,
  database URLs read from secret references), wherever it appears in a text;
* the **secret parts of configured URLs**, so a receiver echoing only part of its URL leaks nothing: the
  password of the user-info part, every query parameter value, and, for URLs that are credentials
  themselves (Slack incoming webhooks, webhook receivers), the path and its distinctive segments
  (``/services/T000/B000/XXXX`` and ``XXXX`` alone);
* by **pattern**, in any text, configured or not: the password of ``scheme://user:password@host``, every
  query parameter value of a URL (``?password=...``, ``?token=...``), the path of ``hooks.slack.com``
  URLs and Slack's ``/services/T…/B…/…`` paths, the value of ``Authorization:``/``Cookie:`` headers,
  ``Bearer …``/``Basic …`` credentials and
  ``password=``/``token=``/``secret=`` pairs (and their quoted JSON form ``"token": "…"``).

Fragments shorter than :data:`MIN_FRAGMENT_CHARS` are not replaced on their own (they would mask
unrelated text); whole configured secrets of any length are.

The composition roots (``tidegauge run``, ``serve``) build one redactor from the configuration
(:func:`monitor.config.secret_values`) and :func:`install` it; layers below receive it as a parameter.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

__all__ = [
    "MASK",
    "MIN_FRAGMENT_CHARS",
    "RedactingFormatter",
    "Redactor",
    "current",
    "install",
    "redact",
    "redact_url",
]

MASK = "***"
#: Shortest derived fragment (URL password, query value, path segment) replaced on its own.
MIN_FRAGMENT_CHARS = 4

_URL_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>`]+")
_USERINFO_RE = re.compile(r"(://[^/\s:@]*):[^@\s/]*@")
_QUERY_VALUE_RE = re.compile(r"([?&;][^=&#;\s]+=)[^&#;\s]*")
_SLACK_HOST_RE = re.compile(r"(hooks\.slack\.com)/[^\s\"'<>`]*", re.IGNORECASE)
_SLACK_PATH_RE = re.compile(r"/services/[A-Z0-9]{6,}/[A-Za-z0-9/_\-]+")
# An HTTP credential as written in a header: the scheme, then a credential-looking word (8+ characters
# with a digit or one of ._~+/=-), so that prose such as "token expired" is left alone.
_AUTH_RE = re.compile(r"\b(Bearer|Basic|Token|bearer)\s+(?=\S*[0-9._~+/=\-])[A-Za-z0-9._~+/=\-]{8,}")
_HEADER_RE = re.compile(r"\b((?:Proxy-)?Authorization|X-Api-Key|Cookie)(\s*:\s*)[^\s'\"]+(?:\s+[^\s'\"]+)?", re.IGNORECASE)
_PAIR_RE = re.compile(
    r"\b(password|passwd|pwd|token|access_token|api[_-]?key|secret|signature)(=|[\"']\s*:\s*[\"'])"
    r"(?!\*\*\*)[^\s&\"',;}]+",
    re.IGNORECASE,
)
#: Path segments that name an API, not a credential (kept when a secret URL's path is split).
_GENERIC_SEGMENTS = frozenset({"services", "hooks", "hook", "api", "webhook", "webhooks", "v1", "v2", "v3", "alerts"})


def _mask_url(url: str, *, hide_path: bool = False) -> str:
    """``url`` with its password and every query value masked (and its path, when ``hide_path``)."""
    url = _USERINFO_RE.sub(rf"\1:{MASK}@", url)
    url = _QUERY_VALUE_RE.sub(rf"\1{MASK}", url)
    if hide_path:
        try:
            parts = urlsplit(url)
        except ValueError:
            return MASK
        if parts.path not in ("", "/"):
            url = urlunsplit((parts.scheme, parts.netloc, "/" + MASK, parts.query, ""))
    return _SLACK_HOST_RE.sub(rf"\1/{MASK}", url)


def _url_fragments(url: str, *, secret_path: bool) -> list[str]:
    """The parts of ``url`` that are secret: password, query values, and (``secret_path``) the path."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return []
    out: list[str] = []
    if password:
        out += [password, unquote(password)]
    for _, value in parse_qsl(parts.query, keep_blank_values=False):
        out += [value, quote(value, safe="")]
    if secret_path or (parts.hostname or "").lower() == "hooks.slack.com":
        path = parts.path.strip("/")
        if path:
            out.append(path)
            out += [seg for seg in path.split("/") if seg.lower() not in _GENERIC_SEGMENTS]
    return [f for f in out if len(f) >= MIN_FRAGMENT_CHARS]


class Redactor:
    """Masks configured secrets, the secret parts of configured URLs and secret-looking patterns.

    Args:
        secrets: whole secret values (any length; empty ones ignored). A value that is a URL also
            contributes its secret parts, path included (a URL kept secret is a credential as a whole).
        urls: configured URLs that are not secret as a whole (an Alertmanager or target URL); their
            password and query values are hidden.
    """

    def __init__(self, secrets: Iterable[str] = (), urls: Iterable[str] = ()) -> None:
        fragments: set[str] = set()
        for value in secrets:
            if not value:
                continue
            fragments.add(value)
            if "://" in value:
                fragments.update(_url_fragments(value, secret_path=True))
        for url in urls:
            if url and "://" in url:
                fragments.update(_url_fragments(url, secret_path=False))
        # longest first, so a whole URL is replaced before its parts
        self._fragments = sorted(fragments, key=lambda f: (-len(f), f))
        self._secret_urls = tuple(v for v in secrets if v and "://" in v)

    def with_secrets(self, secrets: Iterable[str] = (), urls: Iterable[str] = ()) -> Redactor:
        """A redactor knowing this one's secrets and ``secrets``/``urls`` besides."""
        both = Redactor(secrets, urls)
        both._fragments = sorted(set(self._fragments) | set(both._fragments), key=lambda f: (-len(f), f))
        both._secret_urls = self._secret_urls + both._secret_urls
        return both

    def redact(self, text: str) -> str:
        """``text`` with every known secret, secret URL part and secret-looking pattern masked."""
        if not text:
            return text
        for fragment in self._fragments:
            if fragment in text:
                text = text.replace(fragment, MASK)
        text = _URL_RE.sub(lambda m: _mask_url(m.group(0)), text)
        text = _SLACK_PATH_RE.sub(f"/services/{MASK}", text)
        text = _HEADER_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
        text = _AUTH_RE.sub(lambda m: f"{m.group(1)} {MASK}", text)
        return _PAIR_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)

    def url(self, url: str) -> str:
        """A URL safe to print: password and query values masked; the path too when the URL is a
        configured secret or a Slack webhook; then :meth:`redact`."""
        return self.redact(_mask_url(str(url), hide_path=str(url) in self._secret_urls))

    def redact_json(self, value: Any) -> Any:
        """A copy of a JSON-like value (dicts, lists, strings) with every string redacted."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {k: self.redact_json(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.redact_json(v) for v in value]
        return value


class RedactingFormatter(logging.Formatter):
    """Formats with ``inner`` and passes the whole line (message, traceback, stack) through ``redactor``."""

    def __init__(self, inner: logging.Formatter, redactor: Redactor) -> None:
        super().__init__()
        self._inner = inner
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        """The inner formatter's text, redacted."""
        return self.redactor.redact(self._inner.format(record))


_PATTERNS_ONLY = Redactor()
_installed: Redactor | None = None


def install(redactor: Redactor, logger: logging.Logger | None = None) -> None:
    """Make ``redactor`` the process's redactor (:func:`current`) and redact every handler of ``logger``
    (default: the root logger; call after logging is configured). Idempotent: re-installing replaces it."""
    global _installed
    _installed = redactor
    target = logger if logger is not None else logging.getLogger()
    for handler in target.handlers:
        formatter = handler.formatter
        if isinstance(formatter, RedactingFormatter):
            formatter.redactor = redactor
        else:
            handler.setFormatter(RedactingFormatter(formatter or logging.Formatter(), redactor))


def current() -> Redactor:
    """The installed redactor, or one that knows only the patterns (before a configuration is read)."""
    return _installed if _installed is not None else _PATTERNS_ONLY


def redact(text: str) -> str:
    """:meth:`Redactor.redact` of the :func:`current` redactor."""
    return current().redact(text)


def redact_url(url: str) -> str:
    """:meth:`Redactor.url` of the :func:`current` redactor."""
    return current().url(url)
