"""Stored turns built by hand, as :mod:`conversations.records` writes them: the customer's message, its route
decision, the answer (with the tool calls and remote backend calls pointing at it), moves between agents, and a
rating of the answer. For the admin's tests of the conversation store, the ratings inbox and the timeline."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.contrib.auth.models import Permission

from conversations.feedback import feedback_give
from conversations.models import (
    BackendCall,
    Conversation,
    Message,
    MessageFeedback,
    RouteDecisionRecord,
    ToolCall,
)
from handoffs.models import Handoff
from tenants.models import Tenant, TenantGrant
from tests.factories import AgentProfileFactory

STORE_VIEWS = (
    "view_conversation",
    "view_message",
    "view_routedecisionrecord",
    "view_toolcall",
    "view_backendcall",
    "view_handoff",
    "view_messagefeedback",
)


@dataclass
class StoredTurn:
    question: Message
    decision: RouteDecisionRecord
    answer: Message
    tool_call: ToolCall | None = None
    handoff: Handoff | None = None
    backend_call: BackendCall | None = None
    rating: MessageFeedback | None = None


def conversation_of(tenant: Tenant, agent_id: str = "telecom_contas", session: str = "s-1") -> Conversation:
    profile = AgentProfileFactory(agent_id=agent_id)
    return Conversation.objects.create(
        tenant=tenant,
        profile=profile,
        session_id=session,
        conversation_key=f"{tenant.slug}:{agent_id}:{session}",
        channel="web",
    )


def _dated(row, when: dt.datetime | None):
    if when is not None:
        type(row).objects.filter(pk=row.pk).update(created_at=when)  # created_at is auto_now_add
        row.created_at = when
    return row


def stored_turn(
    conversation: Conversation,
    text: str,
    *,
    answer: str = "Resposta",
    intent: str = "billing_invoice_explanation",
    agent: str = "billing_agent",
    method: str = "keyword",
    reason: str = "Keyword 'fatura' matched.",
    version: int | None = 1,
    cohort: str = "",
    rating: str | None = None,
    comment: str = "",
    tool: str | None = None,
    handoff_to: str | None = None,
    backend: str | None = None,
    when: dt.datetime | None = None,
) -> StoredTurn:
    """One turn of ``conversation``, its rows in the order the turn writes them; ``when`` dates every row."""
    same = {"conversation": conversation, "cohort": cohort, "routing_version": version}
    question = _dated(Message.objects.create(**same, role="user", content=text), when)
    decision = _dated(
        RouteDecisionRecord.objects.create(
            **same,
            message=question,
            mode="router",
            route=agent,
            agent=agent,
            intent=intent,
            confidence=0.91,
            reason=reason,
            method=method,
        ),
        when,
    )
    reply = _dated(Message.objects.create(**same, role="assistant", agent=agent, content=answer), when)
    turn = StoredTurn(question=question, decision=decision, answer=reply)
    if tool:
        turn.tool_call = _dated(
            ToolCall.objects.create(
                **same, message=reply, agent=agent, tool=tool, server="telecom", status="ok", latency_ms=12.0
            ),
            when,
        )
    if handoff_to:
        turn.handoff = _dated(
            Handoff.objects.create(
                conversation=conversation,
                tenant_id=conversation.tenant_id,
                profile_id=conversation.profile_id,
                from_agent=agent,
                to_agent=handoff_to,
                kind="handoff",
                reason=f"{agent} hands over to {handoff_to}",
            ),
            when,
        )
    if backend:
        turn.backend_call = _dated(
            BackendCall.objects.create(
                conversation=conversation,
                message=reply,
                tenant_id=conversation.tenant_id,
                profile_id=conversation.profile_id,
                backend=backend,
                status="timeout",
                latency_ms=5000.0,
                error="no answer within 5s",
            ),
            when,
        )
    if rating:
        turn.rating = feedback_give(
            conversation=conversation, message_id=reply.pk, rating=rating, comment=comment
        ).feedback
    return turn


def store_reader(django_user_model, username: str, *tenants: Tenant, permissions=STORE_VIEWS):
    """Staff who may view the conversation store's pages and read the conversations of ``tenants`` (grants)."""
    user = django_user_model.objects.create_user(username, f"{username}@example.com", "pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label__in=["conversations", "handoffs"], codename__in=permissions)
    )
    for tenant in tenants:
        TenantGrant.objects.create(tenant=tenant, user=user, read_conversations=True)
    return user
