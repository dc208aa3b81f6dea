"""A hand-built month of traffic for two tenants, whose figures the analytics tests check by hand.

Every row is created through the ORM and then given its ``created_at`` (an ``auto_now_add`` field) with
``QuerySet.update``. Days are UTC and counted back from today: ``D1`` is yesterday, ``D40`` forty days ago.

Tenant A (``tenant_a``), profiles P1 ``telecom_contas`` and P2 ``retail_loja``:

====  =======  ===========  ============  =======================================================
conv  profile  created      cohort        handoff rows (counted ones marked *)
====  =======  ===========  ============  =======================================================
c1    P1       D2 10:00     multi_agent   h1* billing→orders routing_handoff D2 10:05;
                                          h2* orders→billing handoff D2 10:10;
                                          h3 billing→orders handoff stopped ping_pong D2 10:11
c2    P1       D1 09:00     multi_agent   h4* coordinator→billing delegation D1 09:05;
                                          h5 billing→coordinator return completed D1 09:20;
                                          h6* coordinator→orders delegation D1 09:30;
                                          h8 coordinator→product delegation refused not_allowed D1 09:35;
                                          h7 orders→coordinator return out_of_scope D1 09:40;
                                          h9 supervisor→billing supervisor_fanout D1 09:45
c3    P1       D1 12:00     single_agent  —
c4    P2       D3 08:00     (blank)       h10* billing→orders routing_handoff D3 08:30;
                                          h11 billing→"" handoff stopped step_limit D3 08:31
c5    P1       D40 10:00    multi_agent   h13* billing→orders routing_handoff D40 10:00 (before 30 days);
                                          h12* billing→orders handoff D1 15:00
c6    P1       D2 11:00     multi_agent   —
c7    P1       D1 13:00     single_agent  —
c8    P1       D1 14:00     multi_agent   —
====  =======  ===========  ============  =======================================================

Languages (the conversation's; its messages and route decisions are counted under it): c1, c5, c8 pt; c2, c6 en;
c3, c7 and b1 es; c4 none told (blank).

Routing versions (every message and handoff of a conversation carries its conversation's): c1, c2, c6, c8 and b1
version 2; c3, c5, c7 version 1; c4 none (a draft). Route decisions point at the conversation's first user message
and tool calls at its first answer, so they are counted under the same cohort and version (c6 has no messages:
its decision has none, as a row written before they were linked).

Tenant B (``outsider``), P1: conversation b1 created D1 10:00 (multi_agent) with five counted
billing→orders handoffs, a ping_pong stop and a return; its messages, decisions and tool calls are all
different from A's so that any leak shows in A's numbers.

Messages, route decisions and tool calls are listed in :func:`build_traffic`. How conversations ended (their outcome
rows): c1 resolved D2 (one answer rated up), c3 abandoned D1, c4 escalated D3 by billing_agent (one rated down); b1
escalated D1 (two rated down).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.utils import timezone

from agents.models import AgentProfile
from conversations.models import Conversation, ConversationOutcome, Message, RouteDecisionRecord, ToolCall
from handoffs.models import KIND_BITS, Handoff
from tenants.models import Tenant
from tests.factories import AgentProfileFactory


@dataclass
class Traffic:
    today: dt.date
    tenant_a: Tenant
    tenant_b: Tenant
    p1: AgentProfile
    p2: AgentProfile
    conversations: dict[str, Conversation] = field(default_factory=dict)
    handoffs: dict[str, Handoff] = field(default_factory=dict)

    def day(self, days_ago: int) -> str:
        """The ISO date of ``D<days_ago>``, for start/end filters."""
        return (self.today - dt.timedelta(days=days_ago)).isoformat()


def _at(today: dt.date, days_ago: int, clock: str) -> dt.datetime:
    hour, minute = (int(part) for part in clock.split(":"))
    return dt.datetime.combine(today - dt.timedelta(days=days_ago), dt.time(hour, minute), tzinfo=dt.UTC)


def _dated(obj: Any, when: dt.datetime) -> Any:
    type(obj).objects.filter(pk=obj.pk).update(created_at=when)
    obj.created_at = when
    return obj


# Every answer's turn used the same model and tokens (the usage figures: 1,200 tokens an answer).
ANSWER_USAGE = {"llm_model": "gpt-4o-mini", "prompt_tokens": 1000, "completion_tokens": 200}
VERSIONS: dict[str, int | None] = {"c1": 2, "c2": 2, "c3": 1, "c4": None, "c5": 1, "c6": 2, "c7": 1, "c8": 2, "b1": 2}
LANGUAGES = {"c1": "pt", "c2": "en", "c3": "es", "c4": "", "c5": "pt", "c6": "en", "c7": "es", "c8": "pt", "b1": "es"}


def build_traffic(*, tenant_a: Tenant, tenant_b: Tenant) -> Traffic:
    today = timezone.now().astimezone(dt.UTC).date()
    p1 = AgentProfileFactory(agent_id="telecom_contas")
    p2 = AgentProfileFactory(agent_id="retail_loja", domain="retail")
    traffic = Traffic(today=today, tenant_a=tenant_a, tenant_b=tenant_b, p1=p1, p2=p2)

    def at(days_ago: int, clock: str) -> dt.datetime:
        return _at(today, days_ago, clock)

    def conversation(name: str, tenant: Tenant, profile: AgentProfile, when: dt.datetime, cohort: str) -> None:
        created = Conversation.objects.create(
            tenant=tenant,
            profile=profile,
            session_id=name,
            conversation_key=f"{tenant.slug}:{profile.agent_id}:{name}",
            cohort=cohort,
            language=LANGUAGES[name],
        )
        traffic.conversations[name] = _dated(created, when)

    def handoff(name, conv, from_agent, to_agent, kind, when, status="completed", outcome="") -> None:
        row = traffic.conversations[conv]
        created = Handoff.objects.create(
            conversation=row,
            tenant_id=row.tenant_id,
            profile_id=row.profile_id,
            from_agent=from_agent,
            to_agent=to_agent,
            kind=kind,
            status=status,
            outcome=outcome,
            cohort=row.cohort,
            routing_version=VERSIONS[conv],
            reason=f"{name}: {from_agent} → {to_agent}",
        )
        traffic.handoffs[name] = _dated(created, when)
        if status == "completed":  # as the turn that records a move does (conversations.turn_store.turn_persist)
            row.handoff_kinds |= KIND_BITS[kind]
            Conversation.objects.filter(pk=row.pk).update(handoff_kinds=row.handoff_kinds)

    def message(conv, role, when, agent="", latency=None, judge=None) -> None:
        row = traffic.conversations[conv]
        created = Message.objects.create(
            conversation=row,
            role=role,
            agent=agent,
            content=f"{role} in {conv}",
            cohort=row.cohort,
            routing_version=VERSIONS[conv],
            latency_ms=latency,
            judge_score=judge,
            # Every answer's turn used the same model and tokens (the usage figures: 1,200 tokens an answer).
            **(
                {"llm_model": "gpt-4o-mini", "prompt_tokens": 1000, "completion_tokens": 200}
                if role == "assistant"
                else {}
            ),
        )
        _dated(created, when)
        if role == "user" and row.routing_version != VERSIONS[conv]:
            # As the conversation's first turn does (conversations.records.conversation_updates): every message of
            # a conversation here carries the same version, so whichever is written first gives it.
            row.routing_version = VERSIONS[conv]
            Conversation.objects.filter(pk=row.pk).update(routing_version=row.routing_version)

    def turn(conv, when, agent, latency, judge) -> None:
        """A user message and its answer a minute later."""
        message(conv, "user", when)
        message(conv, "assistant", when + dt.timedelta(minutes=1), agent, latency, judge)

    def first(conv, role) -> Message | None:
        return Message.objects.filter(conversation=traffic.conversations[conv], role=role).order_by("id").first()

    def decision(conv, method, when, agent="billing_agent") -> None:
        created = RouteDecisionRecord.objects.create(
            conversation=traffic.conversations[conv],
            message=first(conv, "user"),
            mode="router",
            route=agent,
            agent=agent,
            intent="x",
            method=method,
        )
        _dated(created, when)

    def tool_call(conv, tool, server, status, latency, when) -> None:
        created = ToolCall.objects.create(
            conversation=traffic.conversations[conv],
            message=first(conv, "assistant"),
            agent="billing_agent",
            tool=tool,
            server=server,
            status=status,
            latency_ms=latency,
        )
        _dated(created, when)

    a, b = tenant_a, tenant_b
    conversation("c1", a, p1, at(2, "10:00"), "multi_agent")
    conversation("c2", a, p1, at(1, "09:00"), "multi_agent")
    conversation("c3", a, p1, at(1, "12:00"), "single_agent")
    conversation("c4", a, p2, at(3, "08:00"), "")
    conversation("c5", a, p1, at(40, "10:00"), "multi_agent")
    conversation("c6", a, p1, at(2, "11:00"), "multi_agent")
    conversation("c7", a, p1, at(1, "13:00"), "single_agent")
    conversation("c8", a, p1, at(1, "14:00"), "multi_agent")
    conversation("b1", b, p1, at(1, "10:00"), "multi_agent")

    handoff("h1", "c1", "billing_agent", "orders_agent", "routing_handoff", at(2, "10:05"))
    handoff("h2", "c1", "orders_agent", "billing_agent", "handoff", at(2, "10:10"))
    handoff("h3", "c1", "billing_agent", "orders_agent", "handoff", at(2, "10:11"), "stopped", "ping_pong")
    handoff("h4", "c2", "coordinator", "billing_agent", "delegation", at(1, "09:05"))
    handoff("h5", "c2", "billing_agent", "coordinator", "return", at(1, "09:20"), outcome="completed")
    handoff("h6", "c2", "coordinator", "orders_agent", "delegation", at(1, "09:30"))
    handoff("h8", "c2", "coordinator", "product_agent", "delegation", at(1, "09:35"), "refused", "not_allowed")
    handoff("h7", "c2", "orders_agent", "coordinator", "return", at(1, "09:40"), outcome="out_of_scope")
    handoff("h9", "c2", "supervisor", "billing_agent", "supervisor_fanout", at(1, "09:45"))
    handoff("h10", "c4", "billing_agent", "orders_agent", "routing_handoff", at(3, "08:30"))
    handoff("h11", "c4", "billing_agent", "", "handoff", at(3, "08:31"), "stopped", "step_limit")
    handoff("h12", "c5", "billing_agent", "orders_agent", "handoff", at(1, "15:00"))
    handoff("h13", "c5", "billing_agent", "orders_agent", "routing_handoff", at(40, "10:00"))
    for n in range(5):
        handoff(f"b{n}", "b1", "billing_agent", "orders_agent", "handoff", at(1, f"10:0{n}"))
    handoff("b5", "b1", "orders_agent", "billing_agent", "handoff", at(1, "10:06"), "stopped", "ping_pong")
    handoff("b6", "b1", "orders_agent", "coordinator", "return", at(1, "10:07"), outcome="completed")

    # Answers (latency ms, judge score). Tenant A in the last 30 days: billing 3, orders 3, support 2.
    turn("c1", at(2, "10:00"), "billing_agent", 100, 0.8)
    turn("c1", at(2, "10:09"), "billing_agent", 300, 0.6)
    turn("c2", at(1, "09:00"), "billing_agent", 200, 1.0)
    turn("c2", at(1, "09:29"), "orders_agent", 500, 0.4)
    turn("c3", at(1, "12:00"), "support_agent", 50, 0.9)
    turn("c3", at(1, "12:04"), "support_agent", 70, 0.7)
    turn("c4", at(3, "08:00"), "orders_agent", 999, 0.1)
    turn("c5", at(1, "15:00"), "orders_agent", 400, 0.5)
    turn("c5", at(40, "10:00"), "billing_agent", 5, 1.0)  # before the 30 days
    message("c2", "agent", at(1, "09:45"), "billing_agent")  # a supervisor part: not an answered turn
    message("c2", "system", at(1, "09:46"))
    turn("b1", at(1, "10:00"), "billing_agent", 9999, 0.0)
    turn("b1", at(1, "10:08"), "product_agent", 9999, 0.0)

    for conv, method, clock, days_ago in [
        ("c1", "keyword", "10:00", 2),
        ("c1", "keyword", "10:09", 2),
        ("c2", "coordinator", "09:00", 1),
        ("c2", "sub_conversation", "09:10", 1),
        ("c3", "fallback", "12:00", 1),
        ("c3", "fallback", "12:05", 1),
        ("c4", "keyword", "08:00", 3),
        ("c5", "llm", "15:00", 1),
        ("c6", "state", "11:00", 2),
        ("c5", "fallback", "10:00", 40),
        ("b1", "fallback", "10:00", 1),
        ("b1", "fallback", "10:08", 1),
        ("b1", "fallback", "10:09", 1),
    ]:
        decision(conv, method, at(days_ago, clock))

    for conv, tool, server, status, latency, when in [
        ("c1", "consultar_fatura", "telecom", "ok", 100, at(2, "10:01")),
        ("c1", "consultar_fatura", "telecom", "ok", 200, at(2, "10:02")),
        ("c1", "consultar_fatura", "telecom", "timeout", 3000, at(2, "10:03")),
        ("c2", "consultar_fatura", "telecom", "error", 50, at(1, "09:01")),
        ("c2", "consultar_pedido", "retail", "ok", 120, at(1, "09:31")),
        ("c4", "consultar_pedido", "retail", "permission_required", 0, at(3, "08:01")),
        ("c5", "consultar_pedido", "retail", "ok", 80, at(1, "15:01")),
        ("c3", "diagnosticar_linha", "telecom", "not_offered", 0, at(1, "12:01")),
        ("c5", "consultar_fatura", "telecom", "ok", 10, at(40, "10:01")),
        ("b1", "consultar_fatura", "telecom", "error", 7000, at(1, "10:01")),
        ("b1", "consultar_fatura", "telecom", "error", 7000, at(1, "10:02")),
    ]:
        tool_call(conv, tool, server, status, latency, when)

    for conv, outcome, when, agent, up, down in [
        ("c1", "resolved", at(2, "10:40"), "billing_agent", 1, 0),
        ("c3", "abandoned", at(1, "12:40"), "support_agent", 0, 0),
        ("c4", "escalated", at(3, "08:35"), "billing_agent", 0, 1),
        ("b1", "escalated", at(1, "10:10"), "orders_agent", 0, 2),
    ]:
        row = traffic.conversations[conv]
        ConversationOutcome.objects.create(
            conversation=row,
            tenant_id=row.tenant_id,
            profile_id=row.profile_id,
            outcome=outcome,
            cohort=row.cohort,
            routing_version=VERSIONS[conv],
            intent="billing_invoice_explanation",
            agent=agent,
            rated_up=up,
            rated_down=down,
            started_at=row.created_at,
            decided_at=when,
        )
    return traffic


def messages_over_ninety_days(
    owners: list[Tenant], profile: AgentProfile, answer: Callable[[int], dict[str, Any]]
) -> None:
    """A store as a platform's is after 90 days, for the planner's choice of index: 20 conversations of each of
    ``owners``, each of 250 turns (a message and its answer, the answer of turn ``n`` given ``answer(n)``'s fields),
    dated evenly over the last 90 days in the order they were written, then vacuumed and analysed as autovacuum leaves
    a store (outside a transaction: the caller's test commits)."""
    for owner in owners:
        for number in range(20):
            conversation = Conversation.objects.create(
                tenant=owner, profile=profile, session_id=f"u{number}", conversation_key=f"{owner.slug}:t:u{number}"
            )
            Message.objects.bulk_create(
                Message(
                    conversation=conversation,
                    profile=profile,
                    tenant=owner,
                    role=role,
                    content="x",
                    **(answer(turn) if role == "assistant" else {}),
                )
                for turn in range(250)
                for role in ("user", "assistant")
            )
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE routing_message SET created_at = %s - ((SELECT max(id) FROM routing_message) - id) * %s",
            [timezone.now(), dt.timedelta(days=90) / (len(owners) * 20 * 500)],
        )
        cursor.execute("VACUUM ANALYZE routing_message")
        cursor.execute("VACUUM ANALYZE routing_conversation")
