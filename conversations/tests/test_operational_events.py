"""Operational events (issue 20, item 10; common/infra/bus.py): after a turn persisted, ``agent.completed`` and each
completed move reach a signed webhook the test runs and the Channels layer (Redis); a failing receiver never
breaks the turn; a rollback publishes ``rollout.rolled_back``."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import threading
import time
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connection

from agents.models import AgentProfile, McpServer
from common.config_version import config_version_bump
from common.infra.bus import EVENTS_GROUP, Webhook, events_flush, tenant_group
from platform.logs import RedactFilter
from releases.models import RolloutPlan
from releases.rollout.guard import plan_evaluate, plan_start
from releases.versions import version_publish
from routing.models import Intent, Keyword
from tests.webhook_receiver import Receiver

pytestmark = pytest.mark.django_db

SECRET = "whsec-test-4d1f"
INVOICE = "Minha fatura veio alta"
INVOICE_CONTEXT = {"msisdn": "5511999999999", "invoice_id": "INV001"}


@pytest.fixture
def receiver(settings):
    running = Receiver()
    settings.EVENTS_WEBHOOK_URL = running.url
    settings.EVENTS_WEBHOOK_SECRET = SECRET
    settings.EVENTS_WEBHOOK_RETRIES = 2
    yield running
    events_flush()
    running.stop()


@pytest.fixture
def unreachable_tools(telecom):
    """Tool calls fail fast (nothing listens on port 9): each is a tool error."""
    McpServer.objects.update(endpoint="http://127.0.0.1:9/mcp", timeout=2)
    config_version_bump()


def say(api, text: str, *, session: str = "ev-1", **context) -> dict:
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": session, "context": context}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def signed(headers: dict[str, str], body: bytes) -> bool:
    expected = hmac.new(SECRET.encode(), headers["X-Platform-Timestamp"].encode() + b"." + body, hashlib.sha256)
    return hmac.compare_digest(headers["X-Platform-Signature"], "sha256=" + expected.hexdigest())


def test_a_turn_posts_signed_agent_completed_and_handoff_events_to_the_webhook(api, telecom, receiver):
    say(api, INVOICE)
    second = say(api, "Onde está meu pedido?")  # billing → orders: a routing handoff
    assert events_flush()

    assert all(signed(headers, body) for headers, body in receiver.posts)
    assert all(abs(int(headers["X-Platform-Timestamp"]) - time.time()) < 60 for headers, _ in receiver.posts)
    # A few posts go at once and may arrive out of order (docs/events.md): sorted by time, as a receiver does.
    events = sorted(receiver.events(), key=lambda event: event["time"])
    assert [event["type"] for event in events] == ["agent.completed", "handoff.completed", "agent.completed"]
    assert sorted(headers["X-Platform-Event"] for headers, _ in receiver.posts) == sorted(e["type"] for e in events)
    handoff, completed = events[1], events[2]
    assert completed.keys() == {"id", "type", "time", "tenant", "profile", "conversation_key", "data"}
    assert (completed["tenant"], completed["profile"], completed["conversation_key"]) == (
        "tenant_a",
        "telecom_contas",
        "tenant_a:telecom_contas:ev-1",
    )
    data = completed["data"]
    assert (data["agent"], data["intent"], data["method"], data["mode"]) == (
        "orders_agent",
        "retail_order_tracking",
        "keyword",
        "router",
    )
    assert data["message_id"] == second["message_id"] and data["latency_ms"] > 0
    assert handoff["data"] == {
        "from_agent": "billing_agent",
        "to_agent": "orders_agent",
        "kind": "routing_handoff",
        "outcome": "",
    }
    assert "fatura" not in json.dumps(events) and "pedido" not in json.dumps(events)  # no customer text


def test_a_failing_webhook_is_retried_then_logged_and_never_breaks_the_turn(api, telecom, receiver, caplog, settings):
    receiver.status = 500
    receiver.held = threading.Event()  # the first attempt is not answered before the turn has answered
    settings.EVENTS_WEBHOOK_TIMEOUT = 60  # nor does it end by itself (a hang guard)

    with caplog.at_level(logging.WARNING, logger="common.infra.bus"):
        body = say(api, INVOICE)
        before_the_answer = (len(receiver.posts), len(receiver.requests))
        receiver.held.set()
        assert events_flush(60)

    assert body["agent"] == "billing_agent"
    # The attempts and the pauses between them (0.5 s + 1 s) are not the turn's: at most the first was sent.
    assert before_the_answer in {(0, 0), (1, 0)}
    assert len(receiver.posts) == 3  # the first attempt and two retries
    assert any("gave up on agent.completed" in record.getMessage() for record in caplog.records)


def test_neither_the_webhooks_query_secret_nor_its_signing_key_reaches_a_log_line(
    api, telecom, receiver, settings, caplog
):
    receiver.status = 500  # retried, then given up on: every line the webhook's path writes
    settings.EVENTS_WEBHOOK_URL = f"http://hookuser:h00k-pw@{receiver.url.removeprefix('http://')}?sig=s1g-s3cret"
    with caplog.at_level(logging.DEBUG):
        caplog.handler.addFilter(RedactFilter())  # as on every handler of the processes (platform/settings.py)
        say(api, INVOICE)
        assert events_flush()

    assert len(receiver.posts) == 3
    assert "HTTP Request: POST http://***@127.0.0.1:" in caplog.text and "/events?sig=*** " in caplog.text
    shown = repr(Webhook(settings.EVENTS_WEBHOOK_URL, SECRET, retries=0, timeout=1.0))
    for secret in ("hookuser", "h00k-pw", "s1g-s3cret", SECRET):
        assert secret not in caplog.text and secret not in shown


def test_an_unreachable_webhook_never_breaks_the_turn(api, telecom, settings):
    settings.EVENTS_WEBHOOK_URL = "http://127.0.0.1:9/events"
    settings.EVENTS_WEBHOOK_SECRET = SECRET
    settings.EVENTS_WEBHOOK_RETRIES = 0

    assert say(api, INVOICE)["agent"] == "billing_agent"
    assert events_flush()


def test_the_channel_layer_groups_receive_agent_completed(api, telecom, settings):
    assert settings.REDIS_URL and settings.EVENTS_CHANNEL_LAYER
    layer = get_channel_layer()
    everyone = async_to_sync(layer.new_channel)()
    tenant_only = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(EVENTS_GROUP, everyone)
    async_to_sync(layer.group_add)(tenant_group("tenant_a"), tenant_only)

    say(api, INVOICE)
    assert events_flush()

    async def received(channel: str) -> dict[str, Any]:
        return await asyncio.wait_for(layer.receive(channel), 5)

    for channel in (everyone, tenant_only):
        message = async_to_sync(received)(channel)
        assert message["type"] == "platform.events"
        (event,) = message["events"]
        assert (event["type"], event["conversation_key"]) == ("agent.completed", "tenant_a:telecom_contas:ev-1")
        assert event["data"]["agent"] == "billing_agent"


@pytest.mark.django_db(transaction=True)
def test_a_rollback_publishes_rollout_rolled_back(api, telecom, unreachable_tools, receiver):
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    version_publish(profile=profile, note="v1")
    Keyword.objects.create(intent=Intent.objects.get(profile=profile, name="billing_invoice_explanation"), text="x9")
    candidate = version_publish(profile=profile, note="candidate", release=False)
    plan = RolloutPlan.objects.create(
        name="tool errors", profile=profile, candidate=candidate, stages=[100], min_conversations=1, max_errors=0
    )
    plan_start(plan, actor="test")
    say(api, INVOICE, **INVOICE_CONTEXT)  # two tool calls, both failing: errors 2 > 0
    connection.close()

    decision = plan_evaluate(plan)
    assert events_flush()

    assert decision.action == "rollback"
    (rolled_back,) = [event for event in receiver.events() if event["type"] == "rollout.rolled_back"]
    assert (rolled_back["profile"], rolled_back["tenant"]) == ("telecom_contas", "")
    data = rolled_back["data"]
    assert (data["plan"], data["candidate"], data["control"], data["percentage"]) == (plan.pk, 2, 1, 100)
    assert data["reason"] == "2 errors of the candidate in this stage, more than the 0 allowed"
