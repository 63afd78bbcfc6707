"""Tests of the notifiers' payloads and of the one HTTP-status classification.

httpx.MockTransport captures the exact request bytes; expected values are written out by hand (the
HMAC is recomputed here with hmac/hashlib directly, not with the code under test).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import httpx
import jsonschema
import pytest

from monitor.alerts.lifecycle import Alert
from monitor.alerts.notification import AlertNotification, NotificationBatch, NotificationStatus
from monitor.errors import DeliveryError
from monitor.model import AlertState, Engine, Finding, JobRef, Scope, Severity
from monitor.notify.alertmanager import AlertmanagerNotifier, alertmanager_alerts, label_name
from monitor.notify.base import is_retryable_status
from monitor.notify.slack import SlackNotifier, slack_message
from monitor.notify.webhook import WebhookNotifier, payload_schema, webhook_payload

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SENT = datetime(2026, 11, 29, 12, 7, 30, 250000, tzinfo=UTC)  # 1795954050.25 s since the epoch
JOB = JobRef(Engine.SPARK, "q-clicks", "run-1", "clicks")
SECRET = "whsec-test-0123456789"
SLACK_URL = "https://hooks.slack.invalid/services/T000/B000/XXXXSECRETXXXX"


def _alert(rule: str, state: AlertState, message: str, **scope: object) -> Alert:
    finding = Finding(rule, Severity.CRITICAL, JOB, message, T0, scope=Scope(**scope))  # type: ignore[arg-type]
    resolved = T0 + timedelta(minutes=20) if state is AlertState.RESOLVED else None
    return replace(
        Alert.from_finding(finding, T0), state=state, fired_at=T0 + timedelta(minutes=5), resolved_at=resolved
    )


def batch(*notes: AlertNotification, key: str = "0123456789abcdef0123456789abcdef") -> NotificationBatch:
    return NotificationBatch("hook", "spark/q-clicks", key, notes, sent_at=SENT)


FIRING = AlertNotification.of(
    _alert("watermark_stall", AlertState.FIRING, "watermark flat for 14 min <while> 52k rows & more", source="clicks", partition=3),
    NotificationStatus.FIRING,
)
RESOLVED = AlertNotification.of(
    _alert("idle_source", AlertState.RESOLVED, "partition 3 idle", source="clicks", partition=3),
    NotificationStatus.RESOLVED,
)


def capture() -> tuple[list[httpx.Request], httpx.Client]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, text="ok")

    return seen, httpx.Client(transport=httpx.MockTransport(handler))


# --- status classification ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "status,retryable",
    [
        (400, False),  # malformed: the same body fails again
        (401, False),  # bad credentials: retrying will not fix them
        (403, False),
        (404, False),  # wrong URL
        (410, False),  # Slack: webhook removed
        (422, False),
        (302, False),  # redirects are not followed; the configuration is wrong
        (429, True),  # rate limited: come back later
        (500, True),
        (502, True),
        (503, True),
        (504, True),
    ],
)
def test_status_classification(status: int, retryable: bool) -> None:
    assert is_retryable_status(status) is retryable
    client = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(status, text="nope")))
    with pytest.raises(DeliveryError) as info:
        WebhookNotifier("hook", "http://receiver.invalid/x", SECRET).send(batch(FIRING), client)
    assert info.value.retryable is retryable
    assert info.value.status_code == status
    assert f"HTTP {status}: nope" in str(info.value)


@pytest.mark.parametrize("status", [200, 201, 202, 204])
def test_2xx_is_success(status: int) -> None:
    # success is "no DeliveryError": the request must really have been sent, once, to the receiver's URL
    # (a notifier that returned early without posting would otherwise pass)
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status)

    client = httpx.Client(transport=httpx.MockTransport(answer))
    WebhookNotifier("hook", "http://receiver.invalid/x", SECRET).send(batch(FIRING), client)
    assert [(r.method, str(r.url)) for r in seen] == [("POST", "http://receiver.invalid/x")]
    assert json.loads(seen[0].content)["alerts"][0]["status"] == "firing"


def test_timeouts_and_connection_errors_are_retryable_and_do_not_leak_the_url() -> None:
    def timeout(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout(f"timed out talking to {request.url}", request=request)

    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"refused: {request.url}", request=request)

    for handler, words in ((timeout, "timed out (ReadTimeout)"), (refused, "connection failed (ConnectError)")):
        client = httpx.Client(transport=httpx.MockTransport(handler))
        with pytest.raises(DeliveryError) as info:
            SlackNotifier("slack", SLACK_URL).send(batch(FIRING), client)
        assert info.value.retryable is True
        assert words in str(info.value)
        assert "SECRET" not in str(info.value)
        assert info.value.__context__ is None and info.value.__cause__ is None


def test_secrets_stay_out_of_repr_and_error_bodies() -> None:
    # A server echoing the request URL (with its token) in an error body.
    client = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(500, text=f"bad {r.url}")))
    with pytest.raises(DeliveryError) as info:
        SlackNotifier("slack", SLACK_URL).send(batch(FIRING), client)
    assert "XXXXSECRETXXXX" not in str(info.value) and "***" in str(info.value)
    for notifier in (
        SlackNotifier("slack", SLACK_URL),
        WebhookNotifier("hook", "https://h.invalid/?token=XXXXSECRETXXXX", SECRET),
        AlertmanagerNotifier("am", "https://user:XXXXSECRETXXXX@am.invalid"),
    ):
        assert "XXXXSECRETXXXX" not in repr(notifier)
    assert SECRET not in repr(WebhookNotifier("hook", "https://h.invalid/", SECRET))


# --- webhook ------------------------------------------------------------------------------------------


def test_webhook_payload_validates_against_the_schema() -> None:
    schema = payload_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    doc = webhook_payload(batch(FIRING, RESOLVED), dashboard_url="https://tg.invalid/job")
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert doc["status"] == "firing"  # one of the two still fires
    assert doc["job"] == {"engine": "spark", "job_id": "q-clicks", "name": "clicks"}
    assert doc["dashboard_url"] == "https://tg.invalid/job?engine=spark&job_id=q-clicks"
    assert doc["sent_at"] == "2026-11-29T12:07:30.250000Z"
    first = doc["alerts"][0]
    assert first["labels"] == {
        "alertname": "watermark_stall", "severity": "critical", "engine": "spark", "job_id": "q-clicks",
        "source": "clicks", "partition": "3",
    }
    assert (first["active_at"], first["fired_at"], first["resolved_at"]) == (
        "2026-11-29T12:00:00.000000Z", "2026-11-29T12:05:00.000000Z", None,
    )
    assert doc["alerts"][1]["resolved_at"] == "2026-11-29T12:20:00.000000Z"
    # The schema can fail: a wrong status and a missing field are rejected.
    for bad in ({**doc, "status": "pending"}, {k: v for k, v in doc.items() if k != "alerts"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.Draft202012Validator(schema).validate(bad)


def test_webhook_signature_and_idempotency_key_verify_independently() -> None:
    seen, client = capture()
    WebhookNotifier("hook", "http://receiver.invalid/x", SECRET).send(batch(FIRING), client)
    (request,) = seen
    assert request.headers["Idempotency-Key"] == "0123456789abcdef0123456789abcdef"
    assert request.headers["Content-Type"] == "application/json"
    header = request.headers["X-Tidegauge-Signature"]
    parts = dict(p.split("=", 1) for p in header.split(","))
    assert parts["t"] == "1795954050"  # SENT in whole Unix seconds: 2026-11-29T12:07:30Z
    body = request.content
    expected = hmac.new(SECRET.encode(), b"1795954050." + body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(parts["v1"], expected)
    tampered = hmac.new(SECRET.encode(), b"1795954050." + body + b" ", hashlib.sha256).hexdigest()
    assert parts["v1"] != tampered
    assert json.loads(body)["idempotency_key"] == "0123456789abcdef0123456789abcdef"


# --- Slack --------------------------------------------------------------------------------------------


def test_slack_block_kit_message_says_what_which_job_why_since_when_and_links() -> None:
    msg = slack_message(batch(FIRING, RESOLVED), dashboard_url="https://tg.invalid/job")
    blocks = msg["blocks"]
    assert blocks[0] == {
        "type": "header",
        "text": {"type": "plain_text", "text": "[FIRING] clicks (spark q-clicks): 1 firing, 1 resolved", "emoji": True},
    }
    section = blocks[1]
    assert section["type"] == "section"
    # what + why, with Slack's required escaping of & < >
    assert section["text"]["text"] == (
        ":rotating_light: *watermark_stall* (critical)\nwatermark flat for 14 min &lt;while&gt; 52k rows &amp; more"
    )
    fields = [f["text"] for f in section["fields"]]
    assert fields[0] == "*Job*\nclicks (spark q-clicks)"
    # since when: 2026-11-29T12:00:00Z is 1795953600 Unix seconds
    assert fields[1] == "*Active since*\n<!date^1795953600^{date_short_pretty} {time}|2026-11-29T12:00:00.000000Z>"
    assert fields[2] == "*Scope*\nsource=clicks, partition=3"
    resolved_fields = [f["text"] for f in blocks[2]["fields"]]
    assert resolved_fields[-1].startswith("*Resolved at*\n<!date^1795954800^")  # 12:20:00Z
    assert blocks[-1]["elements"][0]["url"] == "https://tg.invalid/job?engine=spark&job_id=q-clicks"
    assert "watermark_stall" in msg["text"] and "idle_source" in msg["text"]


def test_slack_message_respects_block_kit_limits() -> None:
    many = tuple(FIRING for _ in range(100))
    blocks = slack_message(batch(*many), dashboard_url="https://tg.invalid")["blocks"]
    assert len(blocks) <= 50  # Block Kit's per-message limit
    assert blocks[-2]["elements"][0]["text"] == "…and 60 more"  # 40 shown of 100
    long = AlertNotification.of(_alert("watermark_stall", AlertState.FIRING, "x" * 5000), NotificationStatus.FIRING)
    text = slack_message(batch(long))["blocks"][1]["text"]["text"]
    assert len(text) == 3000


def test_slack_posts_json_to_the_webhook_url() -> None:
    seen, client = capture()
    SlackNotifier("slack", SLACK_URL).send(batch(FIRING), client)
    assert str(seen[0].url) == SLACK_URL
    assert json.loads(seen[0].content)["blocks"][0]["type"] == "header"


# --- Alertmanager -------------------------------------------------------------------------------------


def test_alertmanager_postable_alerts() -> None:
    seen, client = capture()
    AlertmanagerNotifier("am", "http://am.invalid:9093/", dashboard_url="https://tg.invalid/job").send(
        batch(FIRING, RESOLVED), client
    )
    assert str(seen[0].url) == "http://am.invalid:9093/api/v2/alerts"
    firing, resolved = json.loads(seen[0].content)
    assert firing["labels"] == {
        "alertname": "watermark_stall", "engine": "spark", "job_id": "q-clicks", "partition": "3",
        "severity": "critical", "source": "clicks",
    }
    assert firing["startsAt"] == "2026-11-29T12:05:00.000000Z"  # fired_at, as Prometheus sends
    assert "endsAt" not in firing  # no firing_ttl: Alertmanager's resolve_timeout applies
    assert firing["annotations"]["summary"] == "watermark_stall on spark job q-clicks"
    assert firing["annotations"]["tidegauge_fingerprint"] == FIRING.fingerprint
    assert firing["generatorURL"] == "https://tg.invalid/job?engine=spark&job_id=q-clicks"
    assert resolved["endsAt"] == "2026-11-29T12:20:00.000000Z"


def test_alertmanager_firing_ttl_and_label_names() -> None:
    (item,) = alertmanager_alerts(batch(FIRING), firing_ttl=timedelta(minutes=4))
    assert item["endsAt"] == "2026-11-29T12:11:30.250000Z"  # SENT + 4 min
    assert [label_name(n) for n in ("job-id", "9lives", "ok_1", "a.b")] == ["job_id", "_9lives", "ok_1", "a_b"]
