"""An external desk's webhook: the changes of its profiles' escalations posted signed, in order, retried and then
logged (docs/external-desk.md). A real receiver (tests/webhook_receiver.py) on a real port; PostgreSQL and, for the
Celery path, Redis and a worker."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time

import pytest

from agents.escalation import EscalationSettings
from agents.models import ExternalDesk
from common.config_version import config_version_bump
from conversations.desk.escalations import (
    Person,
    desk_reply,
    escalation_hand_back,
    escalation_take,
    escalation_transfer,
)
from conversations.desk.webhook import desk_webhooks_flush
from conversations.models import Escalation, ExternalDeskEvent
from tests.webhook_receiver import Receiver

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "s3cret-shared-with-the-desk-0123"
ANA = Person(name="Ana", ref="agent-4711")


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.stop()


@pytest.fixture
def in_process(settings):
    """Posts from this process's courier thread (the embedded default), retried quickly."""
    settings.DESK_WEBHOOK_EXECUTOR = "inprocess"
    settings.DESK_WEBHOOK_RETRIES = 2
    settings.DESK_WEBHOOK_RETRY_SECONDS = 0.05
    yield
    assert desk_webhooks_flush(10)


@pytest.fixture
def acme(telecom, receiver):
    """``telecom_contas`` sends its escalations to the external desk ``acme_desk``, whose URL is the receiver's."""
    desk = ExternalDesk.objects.create(name="acme_desk", url=receiver.url, secret=SECRET, timeout=2.0)
    desk_for(telecom, "acme_desk")
    return desk


def desk_for(profile, name: str) -> None:
    profile.escalation = EscalationSettings.from_json({**profile.escalation, "desk": name}).as_json()
    profile.save(update_fields=["escalation"])
    config_version_bump()


def say(api, text, *, session="hook-1"):
    response = api.post(
        "/api/gateway/message",
        {"channel": "api", "agent_id": "telecom_contas", "payload": {"text": text, "session_id": session}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def posted(receiver: Receiver, count: int, *, timeout: float = 60.0) -> list[tuple[dict, dict]]:
    """The first ``count`` posts (headers, event), waiting for them."""
    deadline = time.monotonic() + timeout
    while len(receiver.posts) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(receiver.posts) >= count, [json.loads(body)["type"] for _, body in receiver.posts]
    return [(headers, json.loads(body)) for headers, body in receiver.posts[:count]]


def signed_by(secret: str, headers: dict, body: bytes) -> bool:
    """The documented check: HMAC-SHA256 of "<X-Platform-Timestamp>.<body>" with the desk's secret."""
    expected = hmac.new(secret.encode(), headers["X-Platform-Timestamp"].encode() + b"." + body, hashlib.sha256)
    return hmac.compare_digest(headers["X-Platform-Signature"], "sha256=" + expected.hexdigest())


def test_a_customer_who_asks_for_a_person_is_posted_to_the_desk_signed_with_the_recent_history(
    api, acme, receiver, in_process
):
    say(api, "minha fatura veio alta")
    opened = say(api, "quero falar com um atendente")

    [(headers, event)] = posted(receiver, 1)
    assert signed_by(SECRET, headers, receiver.posts[0][1])
    assert not signed_by("another-secret-of-16-chars", headers, receiver.posts[0][1])
    assert headers["X-Platform-Event"] == "escalation.opened"
    assert headers["X-Platform-Event-Id"] == event["id"]
    assert headers["X-Platform-Delivery-Attempt"] == "1"
    assert event["version"] == 1 and event["type"] == "escalation.opened"
    assert (event["tenant"], event["profile"]) == ("tenant_a", "telecom_contas")
    assert event["conversation_key"] == opened["conversation_key"]
    escalation = event["escalation"]
    assert escalation["id"] == opened["metadata"]["escalation"]["id"]
    assert (escalation["status"], escalation["team"], escalation["position"]) == ("queued", "support", 1)
    assert escalation["reason"] == "customer_request" and escalation["desk"] == "acme_desk"
    assert escalation["summary"]
    history = [(message["author"]["kind"], message["content"]) for message in event["messages"]]
    assert history[0] == ("customer", "minha fatura veio alta")
    assert history[-2:] == [("customer", "quero falar com um atendente"), ("assistant", opened["answer"])]
    assert desk_webhooks_flush(5)
    assert ExternalDeskEvent.objects.count() == 0  # delivered: the outbox is empty


def test_every_change_is_posted_in_order_and_a_customer_message_while_held_too(api, acme, receiver, in_process):
    opened = say(api, "quero falar com um atendente")
    escalation_id = opened["metadata"]["escalation"]["id"]
    escalation_take(escalation_id=escalation_id, person=ANA)
    desk_reply(escalation_id=escalation_id, person=ANA, text="Olá, sou a Ana.")
    say(api, "minha fatura veio alta")
    escalation_transfer(escalation_id=escalation_id, person=ANA, team="support", priority=1)
    escalation_take(escalation_id=escalation_id, person=ANA)
    escalation_hand_back(escalation_id=escalation_id, person=ANA, note="Resolvido.")

    events = [event for _, event in posted(receiver, 7)]
    assert [event["type"] for event in events] == [
        "escalation.opened",
        "escalation.taken",
        "escalation.message",
        "escalation.customer_message",
        "escalation.transferred",
        "escalation.taken",
        "escalation.returned",
    ]
    taken, reply, customer, transferred, _, returned = events[1:]
    assert taken["escalation"]["person"] == {"name": "Ana", "id": "agent-4711"}
    assert reply["message"]["author"] == {"kind": "human", "name": "Ana", "id": "agent-4711"}
    assert reply["message"]["content"] == "Olá, sou a Ana."
    assert customer["message"]["author"] == {"kind": "customer"}
    assert customer["message"]["content"] == "minha fatura veio alta"
    assert transferred["escalation"]["priority"] == "urgent" and transferred["escalation"]["status"] == "queued"
    assert transferred["message"]["role"] == "note"
    assert transferred["message"]["content"] == "Transferred from support to support by Ana."
    assert returned["escalation"]["status"] == "returned" and returned["escalation"]["ended_at"]
    assert returned["message"]["content"] == "Handed back: Resolvido."
    assert len({event["id"] for event in events}) == 7


def test_the_platforms_own_desk_escalations_are_not_posted(api, telecom, receiver, in_process):
    opened = say(api, "quero falar com um atendente")
    escalation_take(escalation_id=opened["metadata"]["escalation"]["id"], person=ANA)

    assert desk_webhooks_flush(5)
    assert receiver.posts == []
    assert ExternalDeskEvent.objects.count() == 0


def test_a_switched_off_desk_gets_nothing_and_it_is_said_once(api, acme, receiver, in_process, caplog):
    ExternalDesk.objects.filter(pk=acme.pk).update(enabled=False)

    with caplog.at_level(logging.WARNING, logger="conversations.desk.webhook"):
        say(api, "quero falar com um atendente", session="off-1")
        say(api, "quero falar com um atendente", session="off-2")

    assert desk_webhooks_flush(5)
    assert receiver.posts == []
    said = [record.getMessage() for record in caplog.records if "acme_desk" in record.getMessage()]
    assert len(said) == 1 and "no enabled desk" in said[0]


def test_a_failing_desk_is_retried_with_a_growing_pause_then_logged_once_without_its_secret(
    api, acme, receiver, in_process, caplog
):
    receiver.status = 503
    ExternalDesk.objects.filter(pk=acme.pk).update(url=receiver.url.replace("http://", "http://user:pw-canary@"))

    with caplog.at_level(logging.WARNING, logger="conversations.desk.webhook"):
        say(api, "quero falar com um atendente")
        assert desk_webhooks_flush(10)

    attempts = [headers["X-Platform-Delivery-Attempt"] for headers, _ in receiver.posts]
    assert attempts == ["1", "2", "3"]  # DESK_WEBHOOK_RETRIES = 2
    assert len({json.loads(body)["id"] for _, body in receiver.posts}) == 1  # the same event each time
    lines = [record.getMessage() for record in caplog.records if record.name == "conversations.desk.webhook"]
    assert len(lines) == 1
    assert "gave up on escalation.opened" in lines[0] and "HTTP 503" in lines[0] and "acme_desk" in lines[0]
    assert SECRET not in caplog.text and "pw-canary" not in caplog.text and "127.0.0.1" not in caplog.text
    assert ExternalDeskEvent.objects.count() == 0


def test_the_events_after_a_failing_one_wait_for_it(api, acme, receiver, in_process, settings):
    settings.DESK_WEBHOOK_RETRY_SECONDS = 0.5
    receiver.status = 500
    opened = say(api, "quero falar com um atendente")
    posted(receiver, 1)
    escalation_take(escalation_id=opened["metadata"]["escalation"]["id"], person=ANA)
    time.sleep(0.2)
    assert {json.loads(body)["type"] for _, body in receiver.posts} == {"escalation.opened"}  # taken waits behind it
    receiver.status = 200

    assert desk_webhooks_flush(10)
    events = [json.loads(body)["type"] for _, body in receiver.posts]
    assert events[-1] == "escalation.taken" and set(events[:-1]) == {"escalation.opened"} and len(events) >= 3


def test_a_secret_named_by_a_variable_signs_and_an_unset_one_posts_nothing_unsigned(
    api, acme, receiver, in_process, monkeypatch, caplog
):
    ExternalDesk.objects.filter(pk=acme.pk).update(secret="", secret_env="ACME_DESK_SECRET")
    monkeypatch.setenv("ACME_DESK_SECRET", "from-the-environment-0123456789")
    say(api, "quero falar com um atendente", session="env-1")
    [(headers, _)] = posted(receiver, 1)
    assert signed_by("from-the-environment-0123456789", headers, receiver.posts[0][1])

    monkeypatch.delenv("ACME_DESK_SECRET")
    with caplog.at_level(logging.WARNING, logger="conversations.desk.webhook"):
        say(api, "quero falar com um atendente", session="env-2")
        assert desk_webhooks_flush(10)
    assert len(receiver.posts) == 1
    assert "ACME_DESK_SECRET is not set" in caplog.text


def test_a_celery_worker_posts_the_events_when_there_is_a_broker(api, acme, receiver, celery_worker, settings):
    settings.DESK_WEBHOOK_EXECUTOR = "celery"
    opened = say(api, "quero falar com um atendente", session="celery-1")
    escalation_take(escalation_id=opened["metadata"]["escalation"]["id"], person=ANA)

    (opened_headers, opened_event), (_, taken) = posted(receiver, 2)
    assert opened_event["type"] == "escalation.opened" and taken["type"] == "escalation.taken"
    assert signed_by(SECRET, opened_headers, receiver.posts[0][1])
    assert Escalation.objects.get(pk=opened_event["escalation"]["id"]).desk == "acme_desk"


def test_a_desk_stored_on_an_internal_address_gets_nothing_and_the_log_says_why(
    api, acme, receiver, in_process, settings, caplog
):
    """The outbound policy (common/outbound.py) holds when the post goes, whatever address was stored before."""
    settings.OUTBOUND_ALLOWED = []
    caplog.set_level(logging.WARNING)

    say(api, "quero falar com um atendente")
    assert desk_webhooks_flush(10)

    assert receiver.requests == []
    given_up = [record.getMessage() for record in caplog.records if "gave up" in record.getMessage()]
    assert given_up and all("outbound policy" in message for message in given_up)
    assert receiver.url not in caplog.text  # the desk's address is never logged
