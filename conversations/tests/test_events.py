"""A turn's events as it happens (the stream WebSocket and SSE clients get), with the offline model."""

from __future__ import annotations

import asyncio

import pytest

from agents.models import McpServer
from common.config_version import config_version_bump
from conversations.graph import run_turn
from conversations.turn import TurnInput
from releases.versions import version_publish
from routing import snapshot
from tenants.models import Tenant
from tests.demo_snapshot import demo_seed

MSISDN = "5511999999999"


@pytest.fixture
def demo(transactional_db, mcp_servers):
    demo_seed()
    for name, url in mcp_servers.items():
        McpServer.objects.filter(name=name).update(endpoint=url)
    config_version_bump()
    return Tenant.objects.create(slug="events", name="Events")


def turn(tenant, agent_id, text, session, **context):
    events: list[tuple[str, dict]] = []

    async def emit(event, data):
        events.append((event, data))

    profile = snapshot.current().profiles[agent_id]
    data = TurnInput(
        tenant_pk=tenant.pk,
        tenant_slug=tenant.slug,
        profile=profile,
        text=text,
        session_id=session,
        context=context,
        emit=emit,
    )
    result = asyncio.run(run_turn(data))
    return result, events


def kinds(events):
    return [event for event, _ in events]


def test_a_plain_answer_streams_route_agent_tool_calls_and_the_text_word_by_word(demo):
    result, events = turn(demo, "telecom_contas", "Minha fatura veio alta", "e-1", msisdn=MSISDN)

    assert kinds(events)[:2] == ["route", "agent"]
    assert events[0][1]["agent"] == "billing_agent" and events[0][1]["method"] == "keyword"
    assert events[1][1] == {"agent": "billing_agent", "display_name": "Faturas e pagamentos", "via": "route"}
    calls = [(d["tool"], d["phase"]) for e, d in events if e == "tool_call"]
    assert sorted(calls) == sorted(
        [(t, p) for t in ("consultar_fatura", "consultar_pagamentos") for p in ("started", "finished")]
    )
    tokens = [d["text"] for e, d in events if e == "token"]
    assert len(tokens) > 10  # word by word
    assert "".join(tokens) == result.answer
    last_call = max(i for i, (e, _) in enumerate(events) if e == "tool_call")
    first_token = kinds(events).index("token")
    assert last_call < first_token  # the tools ran before the answer was written


def test_a_handoff_streams_the_switch_between_agents(demo):
    turn(demo, "telecom_contas", "Quero pagar com pix", "e-2", msisdn=MSISDN)
    # A reply to the payment flow that goes on about an order: billing_agent takes the reply and hands the rest over.
    result, events = turn(demo, "telecom_contas", "Não, na verdade meu pedido P100 atrasou", "e-2", order_id="P100")

    sequence = [(e, d.get("agent") or d.get("to_agent")) for e, d in events if e in ("route", "agent", "handoff")]
    assert sequence == [
        ("route", "billing_agent"),
        ("agent", "billing_agent"),
        ("handoff", "orders_agent"),
        ("agent", "orders_agent"),
    ]
    assert events[kinds(events).index("handoff")][1]["kind"] == "handoff"
    assert {d["agent"] for e, d in events if e == "token"} == {"orders_agent"}
    assert result.agent == "orders_agent"


def test_a_delegation_and_an_out_of_scope_return_stream_in_order(demo):
    turn(demo, "telecom_assistente", "Minha fatura veio alta", "e-3", msisdn=MSISDN)
    _, events = turn(demo, "telecom_assistente", "Meu pedido P100 atrasou?", "e-3", order_id="P100")

    sequence = [
        (e, d.get("agent") or f"{d['from_agent']}>{d['to_agent']}:{d['kind']}")
        for e, d in events
        if e in ("agent", "handoff")
    ]
    assert sequence == [
        ("agent", "billing_agent"),
        ("handoff", "billing_agent>assistente_virtual:return"),
        ("agent", "assistente_virtual"),
        ("handoff", "assistente_virtual>orders_agent:delegation"),
        ("agent", "orders_agent"),
    ]
    assert [d["via"] for e, d in events if e == "agent"] == ["route", "return", "delegation"]
    assert {d["agent"] for e, d in events if e == "token"} == {"orders_agent"}  # nothing else was said


def test_a_supervisor_plan_streams_each_specialists_part(demo):
    from agents.models import AgentProfile

    AgentProfile.objects.filter(agent_id="telecom_contas").update(routing_mode="supervisor")
    version_publish(profile=AgentProfile.objects.get(agent_id="telecom_contas"), note="supervisor mode")
    _, events = turn(
        demo,
        "telecom_contas",
        "Meu pedido atrasou e minha fatura veio duplicada",
        "e-4",
        msisdn=MSISDN,
        order_id="P100",
    )

    assert [d["agent"] for e, d in events if e == "agent"] == ["billing_agent", "orders_agent"]
    partials = {d["agent"]: d for e, d in events if e == "partial"}
    assert set(partials) == {"billing_agent", "orders_agent"}
    assert all(p["status"] == "ok" and p["answer"] for p in partials.values())


def test_a_client_that_fails_does_not_break_the_turn(demo):
    async def broken(event, data):
        raise ConnectionResetError("client gone")

    profile = snapshot.current().profiles["telecom_contas"]
    data = TurnInput(
        tenant_pk=demo.pk,
        tenant_slug=demo.slug,
        profile=profile,
        text="Minha fatura veio alta",
        session_id="e-5",
        emit=broken,
    )
    result = asyncio.run(run_turn(data))
    assert result.agent == "billing_agent" and result.answer


def test_in_process_a_plans_parts_are_reported_as_each_finishes(demo, settings, monkeypatch):
    """The embedded executor reports each part when its specialist is done, not when the plan is."""
    import time

    from agents.models import AgentProfile
    from conversations import runtime, supervisor

    AgentProfile.objects.filter(agent_id="telecom_contas").update(routing_mode="supervisor")
    version_publish(profile=AgentProfile.objects.get(agent_id="telecom_contas"), note="supervisor mode")
    settings.SUPERVISOR_EXECUTOR = "inprocess"
    real_run = runtime.specialist_run

    async def billing_takes_longer(request):
        if request.specialist.name == "billing_agent":
            await asyncio.sleep(1.5)
        return await real_run(request)

    monkeypatch.setattr(supervisor, "specialist_run", billing_takes_longer)
    arrived: dict[str, float] = {}

    async def emit(event, data):
        if event == "partial":
            arrived[data["agent"]] = time.perf_counter()

    profile = snapshot.current().profiles["telecom_contas"]
    data = TurnInput(
        tenant_pk=demo.pk,
        tenant_slug=demo.slug,
        profile=profile,
        text="Meu pedido atrasou e minha fatura veio duplicada",
        session_id="e-partials",
        context={"msisdn": MSISDN, "order_id": "P100"},
        emit=emit,
    )
    asyncio.run(run_turn(data))
    assert arrived["billing_agent"] - arrived["orders_agent"] > 1.0
