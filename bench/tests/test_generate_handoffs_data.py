"""``bench/generate_handoffs.py``'s data held to the shape of what the graph stores: one run of 500 handoffs, made
once for this module's tests with either pool (the set-up costs 10-80 s a run), each test reading it and what a test
writes rolled back after it (tests/shared_rows.py). The generator's other behaviour: test_generate_handoffs.py."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.db.models import Count, F, Max, Min, Q

from bench.tests.test_generate_handoffs import DAYS, UNTIL, generate
from conversations.models import (
    Conversation,
    ConversationOutcome,
    Escalation,
    Message,
    MessageFeedback,
    MessageRole,
    Outcome,
    RouteDecisionRecord,
    ToolCall,
)
from handoffs.models import PERSON, Handoff, HandoffKind, HandoffStatus
from tenants.models import Tenant
from tests.demo_snapshot import demo_seed
from tests.shared_rows import rows_shared

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module", params=["0", "100"], ids=["simulated", "replayed"])
def generated(request, django_db_setup, django_db_blocker) -> Iterator[str]:
    """500 handoffs, every conversation simulated, or most of them replays of 100 kept (bench.benchdata.Replayer),
    generated once for this module's tests (tests/shared_rows.py): each test holds the data to its shape either way,
    and what a test writes is rolled back after it. What the generator printed."""

    def build() -> str:
        demo_seed()  # what the generator would seed (bench/benchdata.py)
        return generate("--count", "500", "--days", str(DAYS), "--batch", "200", "--pool", request.param)

    with rows_shared(request, django_db_blocker, build) as printed:
        yield printed


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
    for model, moment in (
        *((model, "created_at") for model in (Conversation, Message, RouteDecisionRecord, ToolCall, Handoff)),
        (Escalation, "created_at"),
        (Escalation, "ended_at"),
        (MessageFeedback, "created_at"),
        (ConversationOutcome, "decided_at"),
    ):
        bounds = model.objects.aggregate(first=Min(moment), last=Max(moment))
        assert start <= bounds["first"] and bounds["last"] <= UNTIL, (model.__name__, moment)
    assert not Handoff.objects.filter(created_at__lt=F("conversation__created_at")).exists()
    # The last turn's moves are stored microseconds after the conversation row's update, as in _persist; a hand-back is
    # the desk's, later (the desk leaves the conversation's row as the customer's last turn left it).
    late = Handoff.objects.filter(created_at__gt=F("conversation__updated_at") + timedelta(seconds=1))
    assert not late.exclude(from_agent=PERSON).exists()
    assert not Message.objects.filter(created_at__lt=F("conversation__created_at")).exists()


def test_turns_are_stored_as_the_graph_stores_them(generated):
    # A turn counts the messages it stores; the people's replies and notes are the desk's, not a turn's. A customer's
    # message to a conversation a person holds is routed to the desk (method "human"): while it waits in line the
    # answer tells the customer their place (an answer routed to "human"), once a person has it nothing answers it.
    desk = Q(messages__role__in=(MessageRole.HUMAN, MessageRole.NOTE))
    per_conversation = Conversation.objects.annotate(
        stored=Count("messages", filter=~desk, distinct=True),
        users=Count("messages", filter=Q(messages__role=MessageRole.USER), distinct=True),
        answers=Count("messages", filter=Q(messages__role=MessageRole.ASSISTANT), distinct=True),
        in_line=Count(
            "messages",
            filter=Q(messages__role=MessageRole.ASSISTANT, messages__metadata__route=PERSON),
            distinct=True,
        ),
        decisions=Count("route_decisions", distinct=True),
        held=Count("route_decisions", filter=Q(route_decisions__method="human"), distinct=True),
    ).values_list("message_count", "stored", "turn_tickets_done", "users", "answers", "decisions", "held", "in_line")
    for message_count, stored, turns, users, answers, decisions, held, in_line in per_conversation:
        assert message_count == stored
        assert turns == users == decisions
        assert users - answers == held - in_line
        assert 1 <= turns - held <= 8
    answers = Message.objects.filter(role=MessageRole.ASSISTANT)
    assert not answers.filter(latency_ms__isnull=True).exists()
    assert not answers.filter(judge_score__lt=0).exists() and not answers.filter(judge_score__gt=1).exists()
    assert not answers.exclude(cohort=F("conversation__cohort")).exists()
    # A routing handoff is exactly a decision that moved the conversation (CompiledRouter.mark_handoff), unless the
    # move went to or from a remote backend: then it is the gateway's backend_handoff (conversations/graph.py).
    assert (
        Handoff.objects.filter(kind__in=[HandoffKind.ROUTING, HandoffKind.BACKEND]).count()
        == RouteDecisionRecord.objects.filter(handoff=True).count()
    )


def test_the_single_agent_cohort_never_moves_between_agents(generated):
    cohorts = dict(Conversation.objects.values_list("cohort").annotate(n=Count("id")))
    assert cohorts["multi_agent"] > cohorts["single_agent"] > 0
    # Its customers may still be handed to a person (and back): people are not agents.
    assert not Handoff.objects.filter(conversation__cohort="single_agent").exclude(kind=HandoffKind.HUMAN).exists()


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


OUTCOME_COLUMNS = (
    "conversation_id",
    "tenant_id",
    "profile_id",
    "outcome",
    "reason",
    "cohort",
    "routing_version",
    "intent",
    "goal",
    "agent",
    "rated_up",
    "rated_down",
    "started_at",
)


def test_conversations_end_as_the_periodic_close_decides_them(generated):
    """The generator's resolved and abandoned conversations, opened again and closed by the platform's own close
    (conversations.outcomes), get the outcome rows the generator wrote, but for when they were decided; those it left
    open had not been idle long enough by the end of the range."""
    from conversations.outcomes import outcomes_close

    closed = ConversationOutcome.objects.exclude(outcome=Outcome.ESCALATED)
    written = {row[0]: row for row in closed.values_list(*OUTCOME_COLUMNS)}
    assert {row[3] for row in written.values()} == {Outcome.RESOLVED, Outcome.ABANDONED}
    assert {row[4] for row in written.values()} == {"closing_words", "rated_up", "timeout"}
    assert dict(Conversation.objects.filter(pk__in=written).values_list("pk", "outcome")) == {
        pk: row[3] for pk, row in written.items()
    }
    after = ConversationOutcome.objects.filter(
        decided_at__gte=F("conversation__turn_started_at") + timedelta(minutes=30)
    )
    assert after.filter(pk__in=closed).count() == len(written)
    left_open = set(Conversation.objects.filter(outcome="").values_list("pk", flat=True))
    assert not ConversationOutcome.objects.filter(conversation__in=left_open).exists()

    closed.delete()
    Conversation.objects.filter(pk__in=written).update(outcome="")
    outcomes_close(now=UNTIL + timedelta(days=1))

    decided = {row[0]: row for row in ConversationOutcome.objects.values_list(*OUTCOME_COLUMNS) if row[0] in written}
    assert decided == written
    last_turns = Conversation.objects.filter(pk__in=left_open).values_list("turn_started_at", flat=True)
    assert all(moment > UNTIL - timedelta(minutes=32) for moment in last_turns)


def test_delegations_and_returns_belong_to_the_coordinated_profile(generated):
    for kind in (HandoffKind.DELEGATION, HandoffKind.RETURN):
        assert set(Handoff.objects.filter(kind=kind).values_list("profile__agent_id", flat=True)) == {
            "telecom_assistente"
        }
    fanouts = Handoff.objects.filter(kind=HandoffKind.FANOUT)
    assert set(fanouts.values_list("from_agent", flat=True)) == {"supervisor_agent"}
