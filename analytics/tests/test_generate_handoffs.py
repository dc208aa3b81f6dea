"""``manage.py generate_handoffs``: bench data shaped like what the graph stores, at a small scale."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Count, F, Max, Min, Q

from agents.models import AgentProfile
from analytics.benchdata import ERROR_ALREADY_GENERATED
from conversations.models import Conversation, Message, MessageRole, RouteDecisionRecord, ToolCall
from handoffs.models import Handoff, HandoffKind, HandoffStatus
from tenants.models import Tenant

pytestmark = pytest.mark.django_db

UNTIL = datetime(2025, 6, 1, tzinfo=UTC)
DAYS = 30


def generate(*args: str) -> str:
    out = StringIO()
    call_command("generate_handoffs", *args, "--until", UNTIL.isoformat(), stdout=out)
    return out.getvalue()


@pytest.fixture
def generated() -> str:
    return generate("--count", "500", "--days", str(DAYS), "--batch", "200")


def handoff_rows() -> list[tuple]:
    """Everything about the handoffs but their ids, in a stable order."""
    return list(
        Handoff.objects.order_by("conversation__conversation_key", "created_at", "id").values_list(
            "conversation__conversation_key",
            "tenant__slug",
            "profile__agent_id",
            "from_agent",
            "to_agent",
            "kind",
            "status",
            "outcome",
            "reason",
            "context_summary",
            "created_at",
        )
    )


def test_it_writes_exactly_the_handoffs_asked_for_in_batches_and_says_how_long_it_took(generated):
    assert Handoff.objects.count() == 500
    assert "500 / 500 handoffs" in generated
    assert re.search(r"Generated 500 handoffs in [\d,]+ conversations .* in \d+ min [\d.]+ s\.", generated)


def test_it_creates_the_bench_tenants_and_uses_the_demo_profiles(generated):
    assert set(Tenant.objects.filter(conversations__isnull=False).values_list("slug", flat=True)) == {
        "bench_tenant_1",
        "bench_tenant_2",
        "bench_tenant_3",
    }
    assert set(Conversation.objects.values_list("profile__agent_id", flat=True)) == {
        "telecom_contas",
        "retail_orders",
        "telecom_assistente",
    }


def test_handoffs_repeat_their_conversations_tenant_and_profile(generated):
    assert not Handoff.objects.exclude(tenant_id=F("conversation__tenant_id")).exists()
    assert not Handoff.objects.exclude(profile_id=F("conversation__profile_id")).exists()
    for key, tenant, agent_id, session in Conversation.objects.values_list(
        "conversation_key", "tenant__slug", "profile__agent_id", "session_id"
    ):
        assert key == f"{tenant}:{agent_id}:{session}"


def test_every_row_lies_in_the_range_and_within_its_conversation(generated):
    start = UNTIL - timedelta(days=DAYS)
    for model in (Conversation, Message, RouteDecisionRecord, ToolCall, Handoff):
        bounds = model.objects.aggregate(first=Min("created_at"), last=Max("created_at"))
        assert start <= bounds["first"] and bounds["last"] <= UNTIL, model.__name__
    assert not Handoff.objects.filter(created_at__lt=F("conversation__created_at")).exists()
    # The last turn's moves are stored microseconds after the conversation row's update, as in _persist.
    assert not Handoff.objects.filter(created_at__gt=F("conversation__updated_at") + timedelta(seconds=1)).exists()
    assert not Message.objects.filter(created_at__lt=F("conversation__created_at")).exists()


def test_turns_are_stored_as_the_graph_stores_them(generated):
    per_conversation = Conversation.objects.annotate(
        stored=Count("messages", distinct=True),
        users=Count("messages", filter=Q(messages__role=MessageRole.USER), distinct=True),
        answers=Count("messages", filter=Q(messages__role=MessageRole.ASSISTANT), distinct=True),
        decisions=Count("route_decisions", distinct=True),
    ).values_list("message_count", "stored", "turn_tickets_done", "users", "answers", "decisions")
    for message_count, stored, turns, users, answers, decisions in per_conversation:
        assert message_count == stored
        assert turns == users == answers == decisions
        assert 1 <= turns <= 8
    answers = Message.objects.filter(role=MessageRole.ASSISTANT)
    assert not answers.filter(latency_ms__isnull=True).exists()
    assert not answers.filter(judge_score__lt=0).exists() and not answers.filter(judge_score__gt=1).exists()
    assert not answers.exclude(cohort=F("conversation__cohort")).exists()
    # A routing handoff is exactly a decision that moved the conversation (CompiledRouter._mark_handoff).
    assert (
        Handoff.objects.filter(kind=HandoffKind.ROUTING).count()
        == RouteDecisionRecord.objects.filter(handoff=True).count()
    )


def test_the_single_agent_cohort_never_moves_between_agents(generated):
    cohorts = dict(Conversation.objects.values_list("cohort").annotate(n=Count("id")))
    assert cohorts["multi_agent"] > cohorts["single_agent"] > 0
    assert not Handoff.objects.filter(conversation__cohort="single_agent").exists()


def test_every_kind_and_status_and_the_tool_errors_are_there(generated):
    assert set(Handoff.objects.values_list("kind", flat=True)) == set(HandoffKind.values)
    assert set(Handoff.objects.values_list("status", flat=True)) == set(HandoffStatus.values)
    routing = Handoff.objects.filter(kind=HandoffKind.ROUTING).count()
    assert all(
        routing > Handoff.objects.filter(kind=kind).count()
        for kind in HandoffKind.values
        if kind != HandoffKind.ROUTING
    )
    assert set(Handoff.objects.filter(kind=HandoffKind.RETURN).values_list("outcome", flat=True)) >= {
        "completed",
        "out_of_scope",
    }
    assert Handoff.objects.filter(status=HandoffStatus.STOPPED).exclude(outcome="").exists()
    assert {"ok", "error"} <= set(ToolCall.objects.values_list("status", flat=True))
    methods = set(RouteDecisionRecord.objects.values_list("method", flat=True))
    assert {"keyword", "state", "llm", "fallback", "coordinator", "sub_conversation"} <= methods


def test_delegations_and_returns_belong_to_the_coordinated_profile(generated):
    for kind in (HandoffKind.DELEGATION, HandoffKind.RETURN):
        assert set(Handoff.objects.filter(kind=kind).values_list("profile__agent_id", flat=True)) == {
            "telecom_assistente"
        }
    fanouts = Handoff.objects.filter(kind=HandoffKind.FANOUT)
    assert set(fanouts.values_list("from_agent", flat=True)) == {"supervisor_agent"}


def test_the_same_seed_gives_the_same_rows_and_clear_removes_them():
    generate("--count", "300", "--seed", "7")
    first = handoff_rows()
    output = generate("--clear", "--count", "300", "--seed", "7")
    assert "Cleared bench data" in output
    assert handoff_rows() == first
    assert Handoff.objects.count() == 300

    generate("--clear", "--count", "300", "--seed", "8")
    assert handoff_rows() != first


def test_clear_leaves_other_tenants_alone(tenant):
    generate("--count", "50")
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    own = Conversation.objects.create(
        tenant=tenant, profile=profile, session_id="s1", conversation_key=f"{tenant.slug}:telecom_contas:s1"
    )
    Message.objects.create(conversation=own, role=MessageRole.USER, content="oi")
    Handoff.objects.create(
        conversation=own, tenant=tenant, profile=profile, from_agent="a", to_agent="b", kind=HandoffKind.HANDOFF
    )

    call_command("generate_handoffs", "--clear", stdout=StringIO())

    assert list(Conversation.objects.all()) == [own]
    assert Message.objects.get().conversation == own
    assert Handoff.objects.get().conversation == own
    assert Tenant.objects.filter(slug__startswith="bench_tenant_").count() == 3  # the tenants (and keys) stay


def test_generating_the_same_seed_twice_without_clear_says_what_to_do():
    generate("--count", "20")
    with pytest.raises(CommandError, match="--clear"):
        generate("--count", "20")
    assert ERROR_ALREADY_GENERATED.startswith("Conversations of this --seed")


def test_it_asks_for_a_count_or_clear():
    with pytest.raises(CommandError, match="--count"):
        call_command("generate_handoffs", stdout=StringIO())
