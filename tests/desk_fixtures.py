"""The desk's cast: people who answer as a person for ``tenant`` (``desk_person``, Ana) or only for the outsider
(``outsider_person``, Bruno) — staff with a tenant grant, not superusers — and :func:`waiting_conversation`, a
customer's conversation handed to a person (the thumbs-down path's service, without a turn)."""

from __future__ import annotations

import pytest

# Project modules are imported inside the fixtures and helpers: this plugin loads before Django is set up.


def _person(django_user_model, username: str, first_name: str, tenant):
    from tenants.models import TenantGrant

    user = django_user_model.objects.create_user(
        username, f"{username}@example.com", f"{username}-password", is_staff=True, first_name=first_name
    )
    TenantGrant.objects.create(tenant=tenant, user=user, answer_as_person=True)
    return user


@pytest.fixture
def desk_person(django_user_model, tenant):
    """Ana: staff who may answer as a person for ``tenant`` only, and nothing else."""
    return _person(django_user_model, "ana", "Ana", tenant)


@pytest.fixture
def outsider_person(django_user_model, outsider):
    """Bruno: staff who may answer as a person for the outsider tenant only."""
    return _person(django_user_model, "bruno", "Bruno", outsider)


def waiting_conversation(
    *, tenant, profile, session: str, team: str = "support", priority: int | None = None, ask=None
):
    """A conversation of ``tenant`` whose customer asked about an invoice (billing_agent answered, routed by a keyword)
    and then for a person: its escalation, waiting in ``team``'s queue."""
    from conversations.desk.escalations import escalation_open
    from conversations.escalation import EscalationAsk
    from conversations.models import Conversation, EscalationPriority, EscalationReason, Message, RouteDecisionRecord

    conversation = Conversation.objects.create(
        tenant=tenant,
        profile=profile,
        session_id=session,
        conversation_key=f"{tenant.slug}:{profile.agent_id}:{session}",
        channel="websocket",
        active_specialist="billing_agent",
        active_intent="billing_invoice_explanation",
        message_count=2,
    )
    question = Message.objects.create(conversation=conversation, role="user", content="Minha fatura veio alta")
    Message.objects.create(
        conversation=conversation, role="assistant", agent="billing_agent", content="Sua fatura subiu por roaming."
    )
    RouteDecisionRecord.objects.create(
        conversation=conversation,
        message=question,
        mode="router",
        route="billing_agent",
        agent="billing_agent",
        intent="billing_invoice_explanation",
        confidence=0.8,
        reason="Keyword 'fatura' matched.",
        method="keyword",
    )
    why = "The customer asked for a person."
    ask = ask or EscalationAsk(
        reason=EscalationReason.CUSTOMER_REQUEST,
        why=why,
        team=team,
        priority=priority or EscalationPriority.NORMAL,
    )
    return escalation_open(
        conversation=conversation,
        ask=ask,
        summary=f"Why: {why}\nLast messages:\n- customer: Minha fatura veio alta",
        language="pt",
    )
