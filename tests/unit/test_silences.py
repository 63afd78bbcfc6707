"""Tests of silences and matchers (Alertmanager semantics: anchored regexes, missing label == "")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from monitor.alerts.routing import Route, routes_for
from monitor.alerts.silences import (
    Matcher,
    MatchOp,
    Silence,
    is_silenced,
    parse_matcher,
    unknown_label_names,
)
from monitor.errors import InputError
from monitor.model import Severity

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
LABELS = {"alertname": "watermark_stall", "severity": "warning", "engine": "spark", "job_id": "q-clicks"}


@pytest.mark.parametrize(
    "text,expected",
    [
        # 1. Equality matches the exact value.
        ("job_id=q-clicks", True),
        # 2. Equality is not a substring match.
        ("job_id=q-click", False),
        # 3. Not-equal.
        ("engine!=flink", True),
        # 4. Regex is anchored at both ends: "q-" alone does not match "q-clicks".
        ("job_id=~q-", False),
        # 5. ... but "q-.*" does.
        ("job_id=~q-.*", True),
        # 6. Alternation inside the anchors: ^(?:watermark_stall|idle_source)$.
        ("alertname=~watermark_stall|idle_source", True),
        # 7. Negative regex.
        ("severity!~crit.*", True),
        # 8. A missing label is the empty string: `partition=""` matches an alert without one.
        ('partition=""', True),
        # 9. ... and `partition!=""` does not.
        ('partition!=""', False),
        # 10. Quoted values lose their quotes.
        ('job_id="q-clicks"', True),
    ],
)
def test_matcher_table(text: str, expected: bool) -> None:
    assert parse_matcher(text).matches(LABELS) is expected


def test_parse_matcher_ops_and_errors() -> None:
    assert parse_matcher("a=~b=c") == Matcher("a", MatchOp.RE, "b=c")
    assert parse_matcher(" a != b ") == Matcher("a", MatchOp.NE, "b")
    with pytest.raises(InputError, match="invalid matcher 'nolabel'"):
        parse_matcher("nolabel")
    with pytest.raises(InputError, match="invalid regex"):
        parse_matcher("a=~(")
    with pytest.raises(InputError, match="label name"):
        Matcher("1a", MatchOp.EQ, "x")
    assert Matcher.from_json(parse_matcher("a!~x+").to_json()) == Matcher("a", MatchOp.NRE, "x+")


def test_silence_window_is_half_open() -> None:
    s = Silence("s1", (parse_matcher("job_id=q-clicks"),), starts_at=T0, ends_at=T0 + timedelta(hours=1))
    assert not is_silenced(LABELS, [s], T0 - timedelta(microseconds=1))  # before it starts
    assert is_silenced(LABELS, [s], T0)  # starts_at is inclusive
    assert is_silenced(LABELS, [s], T0 + timedelta(minutes=59))
    assert not is_silenced(LABELS, [s], T0 + timedelta(hours=1))  # ends_at is exclusive
    assert not is_silenced(LABELS, [], T0)


def test_silence_needs_every_matcher() -> None:
    both = (parse_matcher("job_id=q-clicks"), parse_matcher("severity=critical"))
    s = Silence("s2", both, starts_at=T0, ends_at=T0 + timedelta(hours=1))
    assert not is_silenced(LABELS, [s], T0)  # severity is warning
    assert is_silenced({**LABELS, "severity": "critical"}, [s], T0)


def test_silence_validation() -> None:
    with pytest.raises(InputError, match="at least one matcher"):
        Silence("s", (), starts_at=T0, ends_at=T0 + timedelta(hours=1))
    with pytest.raises(InputError, match="end before"):
        Silence("s", (parse_matcher("a=b"),), starts_at=T0, ends_at=T0 - timedelta(seconds=1))
    empty = Silence("s", (parse_matcher("job_id=q-clicks"),), starts_at=T0, ends_at=T0)
    assert not is_silenced(LABELS, [empty], T0)  # [T0, T0) is empty


@pytest.mark.parametrize(
    "texts",
    [["job_id=~.*"], ["job_id=~.*", "severity!=critical"], ['job_id=""'], ["job_id!~x+"], ["a=~(x|)"]],
)
def test_silence_matching_the_empty_string_everywhere_is_refused(texts: list[str]) -> None:
    # Each of these matchers matches an alert without the label (value ""), so together they mute everything.
    with pytest.raises(InputError, match="at least one matcher must not match the empty string"):
        Silence("s", tuple(parse_matcher(t) for t in texts), starts_at=T0, ends_at=T0 + timedelta(hours=1))


def test_one_matcher_not_matching_the_empty_string_is_enough() -> None:
    matchers = (parse_matcher("job_id=~.*"), parse_matcher("engine=spark"))
    s = Silence("s", matchers, starts_at=T0, ends_at=T0 + timedelta(hours=1))
    assert s.mutes(LABELS, T0)


def test_unknown_label_names() -> None:
    known = ["alertname=x", "severity=warning", "engine=spark", "job_id=q", "job_name=n", "source=s",
             "partition=1", "subtask=0", "operator=o", "rule=r", "scope=total"]  # fmt: skip
    assert unknown_label_names(parse_matcher(t) for t in known) == []
    assert unknown_label_names(parse_matcher(t) for t in ["jobid=q", "engine=spark", "env=prod", "env=dev"]) == [
        "env",
        "jobid",
    ]


def test_routes_for_matches_severity_and_labels_once_per_receiver() -> None:
    routes = [
        Route("slack", (parse_matcher("engine=spark"),), min_severity=Severity.CRITICAL),
        Route("hook"),
        Route("hook", (parse_matcher("engine=spark"),)),
        Route("am", (parse_matcher("engine=flink"),)),
    ]
    chosen = routes_for(routes, LABELS, Severity.WARNING)
    # slack wants critical only; hook matches (first hook route only); am wants flink.
    assert [r.receiver for r in chosen] == ["hook"]
    assert [r.receiver for r in routes_for(routes, LABELS, Severity.CRITICAL)] == ["slack", "hook"]
