"""Supervisor plans on real Celery workers (Redis broker), and the same plan in-process."""

from __future__ import annotations

import json
import time

import pytest
from celery.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded
from celery.result import AsyncResult
from celery.utils import uuid

from agents.generation import Generation
from common.config_version import config_version_bump
from conversations.fanout import results_collect
from conversations.guardrails import MaskVault
from conversations.models import Message
from conversations.runtime import SpecialistRequest
from conversations.steps import payload_from_request, request_from_payload
from conversations.supervisor import STATUS_ERROR, STATUS_TIMEOUT
from platform.celery import app
from routing import snapshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SEED_MESSAGE = "Meu pedido atrasou e minha fatura veio duplicada"


@pytest.fixture
def supervisor(telecom):
    telecom.routing_mode = "supervisor"
    telecom.save()
    return telecom


def send(api, text, session_id):
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": session_id}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_the_seed_message_plans_billing_and_orders_and_answers_both_through_real_workers(
    api, supervisor, celery_worker, settings
):
    settings.SUPERVISOR_EXECUTOR = "celery"

    body = send(api, SEED_MESSAGE, "s-celery")

    assert body["metadata"]["intent"] == "multi_intent"
    assert [(p["agent"], p["status"]) for p in body["metadata"]["supervisor"]] == [
        ("billing_agent", "ok"),
        ("orders_agent", "ok"),
    ]
    assert "billing_agent:" in body["answer"] and "orders_agent:" in body["answer"]
    assert Message.objects.filter(role="agent").count() == 2


def test_the_embedded_executor_gives_the_same_answer_as_celery(api, supervisor, celery_worker, settings):
    settings.SUPERVISOR_EXECUTOR = "celery"
    through_workers = send(api, SEED_MESSAGE, "s-workers")
    settings.SUPERVISOR_EXECUTOR = "inprocess"
    in_process = send(api, SEED_MESSAGE, "s-inprocess")

    assert through_workers["answer"] == in_process["answer"]
    assert [(p["agent"], p["status"]) for p in through_workers["metadata"]["supervisor"]] == [
        (p["agent"], p["status"]) for p in in_process["metadata"]["supervisor"]
    ]


def test_a_step_that_overruns_on_a_worker_is_a_gap_within_the_time_limit(
    api, supervisor, live_mcp, held_telecom_server, celery_worker, settings
):
    from agents.models import McpServer

    McpServer.objects.filter(name="telecom").update(endpoint=held_telecom_server, timeout=10)
    config_version_bump()  # QuerySet.update bypasses the signals; the worker must see the held server
    settings.SUPERVISOR_EXECUTOR = "celery"
    # Room for orders' step on a busy machine; billing's, held by its server, can only end by the limit.
    settings.SUPERVISOR_SPECIALIST_TIMEOUT_SECONDS = 5

    response = api.post(
        "/api/gateway/message",
        {
            "agent_id": "telecom_contas",
            "payload": {"text": SEED_MESSAGE, "session_id": "s-gap", "context": {"msisdn": "5511999999999"}},
        },
        format="json",
    )
    body = response.json()
    first_round = {p["agent"]: p["status"] for p in body["metadata"]["supervisor"] if p["round"] == 0}
    assert first_round == {"billing_agent": "timeout", "orders_agent": "ok"}
    assert "billing_agent: [sem resposta: timeout" in body["answer"]
    # Every round that asked billing again was ended by the step limit too.
    assert {p["status"] for p in body["metadata"]["supervisor"] if p["agent"] == "billing_agent"} == {"timeout"}


def test_a_step_its_workers_time_limit_ended_is_a_timeout_whichever_side_saw_the_limit_first(settings):
    if not settings.REDIS_URL:
        pytest.skip("the results are read from Redis: set REDIS_URL, or run scripts/test")
    ended, hard, failed = (AsyncResult(uuid()) for _ in range(3))
    app.backend.mark_as_failure(ended.id, SoftTimeLimitExceeded())  # what a worker stores when its limit ends a step
    app.backend.mark_as_failure(hard.id, TimeLimitExceeded(6.0))
    app.backend.mark_as_failure(failed.id, ValueError("the step broke"))

    answers = results_collect([ended, hard, failed], time.perf_counter() + 10)

    assert answers[:2] == [{"status": STATUS_TIMEOUT}, {"status": STATUS_TIMEOUT}]
    assert answers[2]["status"] == STATUS_ERROR and "the step broke" in answers[2]["error"]


def test_a_step_that_crashes_in_process_is_a_marked_gap(api, supervisor, monkeypatch):
    import conversations.supervisor as supervisor_module

    real = supervisor_module.specialist_run

    async def crash_for_orders(request):
        if request.specialist.name == "orders_agent":
            raise RuntimeError("specialist crashed")
        return await real(request)

    monkeypatch.setattr(supervisor_module, "specialist_run", crash_for_orders)

    body = send(api, SEED_MESSAGE, "s-crash")

    first_round = {p["agent"]: p for p in body["metadata"]["supervisor"] if p["round"] == 0}
    assert first_round["billing_agent"]["status"] == "ok"
    assert first_round["orders_agent"]["status"] == "error"
    assert "specialist crashed" in first_round["orders_agent"]["error"]
    assert "orders_agent: [sem resposta: error" in body["answer"]


def test_a_worker_killed_mid_task_leaves_a_marked_gap_and_a_consistent_conversation(
    api, supervisor, live_mcp, slow_telecom_server, celery_worker, settings
):
    """The killed step is a gap (the workers only compute; the web process stores), nothing is stored twice."""
    import threading
    import time

    from agents.models import McpServer

    McpServer.objects.filter(name="telecom").update(endpoint=slow_telecom_server, timeout=10)
    config_version_bump()  # QuerySet.update bypasses the signals; the worker must see the slow server
    settings.SUPERVISOR_EXECUTOR = "celery"
    settings.SUPERVISOR_SPECIALIST_TIMEOUT_SECONDS = 2

    def kill_mid_task():
        time.sleep(1.0)  # billing_agent's task is waiting on the slow telecom server (3 s)
        celery_worker.kill()

    killer = threading.Thread(target=kill_mid_task)
    killer.start()
    try:
        body = send_with_context(api, "s-kill", {"msisdn": "5511999999999"})
    finally:
        killer.join()
        celery_worker.restart()

    parts = [(p["agent"], p["round"], p["status"]) for p in body["metadata"]["supervisor"]]
    assert ("orders_agent", 0, "ok") in parts
    assert [status for agent, _, status in parts if agent == "billing_agent"] == ["timeout"] * 4
    assert "billing_agent: [sem resposta: timeout" in body["answer"]
    stored = list(Message.objects.filter(conversation__session_id="s-kill").values_list("role", "agent", "step"))
    assert len(stored) == len(set(stored)) == 1 + 5 + 1  # user, five parts (four rounds of billing), answer

    settings.SUPERVISOR_SPECIALIST_TIMEOUT_SECONDS = 10
    again = send_with_context(api, "s-kill", {"msisdn": "5511999999999"})
    assert {p["agent"]: p["status"] for p in again["metadata"]["supervisor"]}["billing_agent"] == "ok"
    assert Message.objects.filter(conversation__session_id="s-kill", role="user").count() == 2


def send_with_context(api, session_id, context):
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": SEED_MESSAGE, "session_id": session_id, "context": context}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_the_plans_specialists_run_at_the_same_time_on_the_workers(
    api, supervisor, live_mcp, slow_telecom_server, celery_worker, settings
):
    from agents.models import McpServer

    McpServer.objects.filter(name="telecom").update(endpoint=slow_telecom_server, timeout=10)
    config_version_bump()
    settings.SUPERVISOR_EXECUTOR = "celery"
    settings.SUPERVISOR_SPECIALIST_TIMEOUT_SECONDS = 10

    body = send_with_context(api, "s-parallel", {"msisdn": "5511999999999", "order_id": "P100"})

    parts = {p["agent"]: p for p in body["metadata"]["supervisor"]}
    billing, orders = parts["billing_agent"], parts["orders_agent"]
    assert billing["status"] == orders["status"] == "ok"
    assert billing["finished_at"] - billing["started_at"] > 2.5  # the slow telecom server's 3 s
    # the two windows overlap: each started before the other finished
    assert orders["started_at"] < billing["finished_at"] and billing["started_at"] < orders["finished_at"]


def _streamed_turn(tenant, session_id: str, context: dict) -> tuple[list[tuple[float, str, dict]], dict]:
    """Run the seed message through the graph as a streaming client would; the events with their arrival time
    (wall-clock seconds, as the parts' own start and end) and the answer's metadata."""
    import asyncio
    import time

    from conversations.graph import run_turn
    from conversations.turn import TurnInput
    from routing import snapshot

    events: list[tuple[float, str, dict]] = []

    async def emit(event, data):
        events.append((time.time(), event, data))

    data = TurnInput(
        tenant_pk=tenant.pk,
        tenant_slug=tenant.slug,
        profile=snapshot.current().profiles["telecom_contas"],
        text=SEED_MESSAGE,
        session_id=session_id,
        context=context,
        emit=emit,
    )
    result = asyncio.run(run_turn(data))
    return events, result.metadata


def test_a_workers_part_reaches_a_streaming_client_as_soon_as_it_finishes_through_the_channel_layer(
    tenant, supervisor, live_mcp, slow_telecom_server, celery_worker, settings
):
    from agents.models import McpServer

    assert settings.CHANNEL_LAYERS["default"]["BACKEND"] == "channels_redis.core.RedisChannelLayer"
    McpServer.objects.filter(name="telecom").update(endpoint=slow_telecom_server, timeout=10)
    config_version_bump()
    settings.SUPERVISOR_EXECUTOR = "celery"
    settings.SUPERVISOR_SPECIALIST_TIMEOUT_SECONDS = 10

    events, metadata = _streamed_turn(tenant, "s-partials", {"msisdn": "5511999999999", "order_id": "P100"})

    partials = {data["agent"]: (at, data) for at, event, data in events if event == "partial"}
    assert set(partials) == {"billing_agent", "orders_agent"}  # each once
    assert [data["agent"] for _, event, data in events if event == "partial"].count("orders_agent") == 1
    (orders_at, orders), (_, billing) = partials["orders_agent"], partials["billing_agent"]
    assert orders["status"] == billing["status"] == "ok" and orders["answer"] and billing["answer"]
    # Orders' worker answered at once; billing's waited for the slow telecom server's 3 s: the client saw orders'
    # part while billing's still ran, not when the plan ended (an order of events, on the one wall clock).
    billing_ran = next(p for p in metadata["supervisor"] if p["agent"] == "billing_agent")
    assert orders_at < billing_ran["finished_at"]


def test_without_a_streaming_client_no_channel_is_opened(api, supervisor, celery_worker, settings, monkeypatch):
    from conversations import fanout

    def no_layer():
        raise AssertionError("a plan nobody streams must not open a channel")

    monkeypatch.setattr(fanout, "receiving_layer", no_layer)
    settings.SUPERVISOR_EXECUTOR = "celery"
    body = send(api, SEED_MESSAGE, "s-no-stream")
    assert [p["status"] for p in body["metadata"]["supervisor"]] == ["ok", "ok"]


def test_a_plans_step_carries_how_the_client_asked_the_answer_written_to_the_worker(telecom):
    current = snapshot.current()
    profile = current.profiles["telecom_contas"]
    asked = Generation(max_tokens=5, temperature=0.1, seed=3, stop=("fim",))
    request = SpecialistRequest(
        profile=profile, specialist=profile.specialists["billing_agent"], text="Minha fatura", generation=asked
    )

    over_the_broker = json.loads(json.dumps(payload_from_request(request, MaskVault())))

    assert request_from_payload(over_the_broker, current).generation == asked
