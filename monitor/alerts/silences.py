"""Silences: label matchers with a time window, checked when a notification is about to be sent.

Matcher syntax and semantics follow Alertmanager (``pkg/labels/matcher.go``): ``name=value``,
``name!=value``, ``name=~regex``, ``name!~regex``; a regex must match the whole value (it is anchored as
``^(?:regex)$``); a label the alert does not have is matched as the empty string. A silence mutes an
alert when every matcher matches and ``starts_at <= now < ends_at``. As in Alertmanager's silence
validation, at least one matcher must not match the empty string (``job_id=~.*`` alone would mute every
alert). :data:`KNOWN_LABELS` lists the label names tidegauge's alerts carry; :func:`unknown_label_names`
finds matchers naming others (they can only match as the empty string).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from functools import cached_property

from monitor.errors import InputError
from monitor.model import Scope, ensure_utc

__all__ = [
    "KNOWN_LABELS",
    "MatchOp",
    "Matcher",
    "Silence",
    "is_silenced",
    "matches_all",
    "parse_matcher",
    "unknown_label_names",
]

#: Label names an alert can carry: ``alertname``/``severity`` (:meth:`monitor.alerts.lifecycle.Alert.all_labels`),
#: ``engine``/``job_id`` and the :class:`monitor.model.Scope` fields (:meth:`monitor.model.Finding.identity_labels`),
#: ``job_name`` and ``rule`` (routing and notification payloads), and the finding labels rules set
#: (``scope``, by ``rules/late.py``).
KNOWN_LABELS: frozenset[str] = frozenset(
    {"alertname", "severity", "engine", "job_id", "job_name", "rule", "scope"} | {f.name for f in fields(Scope)}
)

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MATCHER = re.compile(r"^\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?P<op>=~|!~|!=|=)(?P<value>.*)$", re.S)


class MatchOp(enum.StrEnum):
    """Matcher operators (Alertmanager's ``MatchEqual``, ``MatchNotEqual``, ``MatchRegexp``, ``MatchNotRegexp``)."""

    EQ = "="
    NE = "!="
    RE = "=~"
    NRE = "!~"


@dataclass(frozen=True)
class Matcher:
    """One label matcher.

    Raises:
        InputError: the label name is not ``[A-Za-z_][A-Za-z0-9_]*`` or the regex does not compile.
    """

    name: str
    op: MatchOp
    value: str

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise InputError(f"matcher label name {self.name!r} is not [A-Za-z_][A-Za-z0-9_]*")
        object.__setattr__(self, "op", MatchOp(self.op))
        if self.op in (MatchOp.RE, MatchOp.NRE):
            _ = self._regex

    @cached_property
    def _regex(self) -> re.Pattern[str]:
        try:
            return re.compile(f"^(?:{self.value})$", re.S)
        except re.error as exc:
            raise InputError(f"matcher {self.name}{self.op}{self.value!r}: invalid regex: {exc}") from None

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this matcher (a missing label is the empty string)."""
        value = labels.get(self.name, "")
        if self.op is MatchOp.EQ:
            return value == self.value
        if self.op is MatchOp.NE:
            return value != self.value
        hit = self._regex.match(value) is not None
        return hit if self.op is MatchOp.RE else not hit

    def __str__(self) -> str:
        return f"{self.name}{self.op.value}{self.value}"

    def to_json(self) -> dict[str, str]:
        """``{"name", "op", "value"}``."""
        return {"name": self.name, "op": self.op.value, "value": self.value}

    @classmethod
    def from_json(cls, data: Mapping[str, str]) -> Matcher:
        """Inverse of :meth:`to_json`."""
        return cls(data["name"], MatchOp(data["op"]), data["value"])


def parse_matcher(text: str) -> Matcher:
    """Parse ``name=value``, ``name!=value``, ``name=~regex`` or ``name!~regex``.

    The value may be wrapped in double quotes (removed). Raises :class:`InputError` naming the text.
    """
    m = _MATCHER.match(text)
    if m is None:
        raise InputError(
            f"invalid matcher {text!r}: expected name=value, name!=value, name=~regex or name!~regex"
        )
    value = m.group("value").strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    return Matcher(m.group("name"), MatchOp(m.group("op")), value)


def unknown_label_names(matchers: Iterable[Matcher]) -> list[str]:
    """Label names used by ``matchers`` that are not in :data:`KNOWN_LABELS`, sorted, without repeats."""
    return sorted({m.name for m in matchers} - KNOWN_LABELS)


def matches_all(matchers: Iterable[Matcher], labels: Mapping[str, str]) -> bool:
    """True when every matcher matches ``labels`` (an empty list matches everything)."""
    return all(m.matches(labels) for m in matchers)


@dataclass(frozen=True)
class Silence:
    """A silence: mutes notifications of alerts matching all ``matchers`` during ``[starts_at, ends_at)``.

    Raises:
        InputError: no matchers, every matcher matches the empty string (the silence would mute every
            alert; Alertmanager refuses it too), or ``ends_at`` is before ``starts_at`` (equal: an empty
            window, as an expired not-yet-started silence has).
        ValueError: a naive datetime.
    """

    id: str
    matchers: tuple[Matcher, ...]
    starts_at: datetime
    ends_at: datetime
    created_by: str = ""
    comment: str = ""
    created_at: datetime | None = None

    def __post_init__(self) -> None:
        for name in ("starts_at", "ends_at", "created_at"):
            object.__setattr__(self, name, ensure_utc(getattr(self, name), f"Silence.{name}"))
        object.__setattr__(self, "matchers", tuple(self.matchers))
        if not self.matchers:
            raise InputError("a silence needs at least one matcher")
        if all(m.matches({}) for m in self.matchers):
            shown = ", ".join(str(m) for m in self.matchers)
            raise InputError(
                f"matchers {shown}: at least one matcher must not match the empty string "
                "(otherwise the silence mutes every alert), e.g. job_id=q-clicks"
            )
        if self.ends_at < self.starts_at:
            raise InputError("a silence must not end before it starts")

    def active(self, now: datetime) -> bool:
        """``starts_at <= now < ends_at``."""
        return self.starts_at <= now < self.ends_at

    def state(self, now: datetime) -> str:
        """``"active"``, ``"pending"`` (starts later) or ``"expired"`` (ended, or expired before it
        started: an empty window ``ends_at == starts_at`` never applies), as Alertmanager's silence states.
        """
        if self.ends_at <= now or self.ends_at <= self.starts_at:
            return "expired"
        return "pending" if now < self.starts_at else "active"

    def mutes(self, labels: Mapping[str, str], now: datetime) -> bool:
        """Active at ``now`` and every matcher matches ``labels``."""
        return self.active(now) and matches_all(self.matchers, labels)


def is_silenced(labels: Mapping[str, str], silences: Iterable[Silence], now: datetime) -> bool:
    """Whether any silence mutes an alert with ``labels`` at ``now`` (pure; ``now`` is aware UTC)."""
    return any(s.mutes(labels, now) for s in silences)
