"""`targets.kafka` validation and its collector options: errors name the field; secrets never leak."""

from __future__ import annotations

import pytest

from collectors.kafka import KafkaOptions
from monitor.config import parse_config
from monitor.daemon.compose import kafka_options
from monitor.errors import ConfigError


def kafka(**fields: object) -> dict[str, object]:
    return {"targets": {"kafka": [{"name": "prod", "bootstrap_servers": "k1:9092,k2:9092", **fields}]}}


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"bootstrap_servers": "k1"}, "targets.kafka[0].bootstrap_servers: expected host:port[,host:port...], got 'k1'"),
        ({"include": ["(unclosed"]}, "invalid regular expression '(unclosed'"),
        ({"security_protocol": "SASL_SSL"}, "security_protocol SASL_SSL needs sasl_mechanism"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "u"},
         "sasl_mechanism SCRAM-SHA-512 needs sasl_username and sasl_password"),
        ({"lag_seconds": "guess"}, "targets.kafka[0].lag_seconds"),
        ({"auto_offset_reset": "none"}, "targets.kafka[0].auto_offset_reset"),
        ({"sasl_password": "hunter2"}, "targets.kafka[0].sasl_password: a secret is never written in the config"),
    ],
)
def test_bad_kafka_targets_name_the_field(fields: dict[str, object], expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(kafka(**fields))
    assert expected in str(info.value)
    assert "hunter2" not in str(info.value)


def test_options_resolve_secrets_and_never_show_them() -> None:
    cfg = parse_config(kafka(groups=["clicks"], exclude=[".*-canary"], lag_seconds="exact", timeout="3s",
                             security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username="tg",
                             sasl_password={"env": "KAFKA_PW"}))
    opts = kafka_options(cfg.targets.kafka[0], {"KAFKA_PW": "s3cret-pw"}, "targets.kafka[0]")
    assert (opts.cluster, opts.groups, opts.exclude, opts.lag_seconds, opts.request_timeout_s) == (
        "prod", ("clicks",), (".*-canary",), "exact", 3.0
    )
    assert opts.client_config()["sasl.password"] == "s3cret-pw"
    assert "s3cret-pw" not in repr(opts) and "s3cret-pw" not in opts.describe()
    with pytest.raises(ConfigError, match=r"targets.kafka\[0\].sasl_password: environment variable KAFKA_PW"):
        kafka_options(cfg.targets.kafka[0], {}, "targets.kafka[0]")


@pytest.mark.parametrize(
    ("groups", "include", "exclude", "group", "watched"),
    [
        ((), (), (), "anything", True),  # nothing given: every group
        (("a",), (), (), "b", False),
        ((), ("team-.*",), (".*-canary",), "team-etl", True),
        ((), ("team-.*",), (".*-canary",), "team-etl-canary", False),  # exclude wins
        ((), ("team",), (), "team-etl", False),  # whole-id match, not a substring search
    ],
)
def test_group_selection(groups: tuple[str, ...], include: tuple[str, ...], exclude: tuple[str, ...],
                         group: str, watched: bool) -> None:
    assert KafkaOptions("c", "k:9092", groups=groups, include=include, exclude=exclude).wanted(group) is watched
