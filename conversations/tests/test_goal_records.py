"""What a goal-mode answer leaves for the analytics: a GoalRun and its GoalStepRuns, read from metadata["goal"]."""

from __future__ import annotations

import datetime as dt

import pytest

from conversations.goals.records import goal_rows_create
from conversations.models import Conversation, GoalRun, GoalStepRun, Message
from conversations.tests import goal_examples
from tests.factories import AgentProfileFactory, ConversationFactory

pytestmark = pytest.mark.django_db

STEP_FIELDS = ("step_id", "domain", "capability", "status", "required", "latency_ms", "error")


@pytest.fixture
def conversation(tenant) -> Conversation:
    return ConversationFactory(tenant=tenant, profile=AgentProfileFactory(agent_id="finance_assistente"))


def answer(conversation: Conversation, goal: dict, *, cohort: str = "") -> Message:
    return Message.objects.create(
        conversation=conversation,
        role="assistant",
        agent="finance",
        content="…",
        cohort=cohort,
        metadata={"goal": goal},
    )


def record(conversation: Conversation, goal: dict, **kwargs) -> GoalRun:
    message = answer(conversation, goal, **kwargs)
    return goal_rows_create(
        message=message, goal=goal, tenant_id=conversation.tenant_id, profile_id=conversation.profile_id
    )


def steps_of(run: GoalRun) -> list[tuple]:
    return list(GoalStepRun.objects.filter(run=run).order_by("step_id").values_list(*STEP_FIELDS))


def test_a_successful_plan_is_stored_with_each_step_and_the_failed_optional_step_marked(conversation):
    run = record(conversation, goal_examples.quote_and_notify(), cohort="multi_agent")
    run.refresh_from_db()
    assert (run.domain, run.goal, run.status, run.clarification_reason) == ("finance", "GET_QUOTE", "success", "")
    assert (run.confidence, run.step_count, run.failed_step_count, run.plan_latency_ms) == (0.97, 3, 1, 160.0)
    assert (run.tenant_id, run.profile_id, run.conversation_id, run.cohort) == (
        conversation.tenant_id,
        conversation.profile_id,
        conversation.pk,
        "multi_agent",
    )
    assert run.message.goal_run == run
    assert run.created_at == run.message.created_at
    assert steps_of(run) == [
        (1, "finance", "get_stock_price", "success", True, 120.0, ""),
        (2, "finance", "get_stock_price", "success", True, 80.0, ""),
        (3, "finance", "send_notification", "failure", False, 40.0, "notifier down"),
    ]
    assert set(run.steps.values_list("tenant_id", "profile_id", "created_at")) == {
        (conversation.tenant_id, conversation.profile_id, run.created_at)
    }


def test_an_ambiguous_entity_is_a_clarification_with_its_reason_and_its_step(conversation):
    run = record(conversation, goal_examples.ambiguous_quote())
    assert (run.status, run.clarification_reason, run.step_count, run.failed_step_count) == (
        "clarification",
        "ambiguous",
        1,
        0,
    )
    assert run.plan_latency_ms == 30.0
    assert steps_of(run) == [(1, "finance", "get_stock_price", "clarification", True, 30.0, "")]


def test_a_clarification_asked_before_any_plan_has_no_steps_and_no_plan_latency(conversation):
    run = record(conversation, goal_examples.unsure_quote())
    assert (run.status, run.clarification_reason, run.confidence) == ("clarification", "low_confidence", 0.41)
    assert (run.step_count, run.failed_step_count, run.plan_latency_ms) == (0, 0, None)
    assert steps_of(run) == []


def test_a_failed_required_step_ends_the_plan_and_the_step_never_run_is_stored_as_skipped(conversation):
    run = record(conversation, goal_examples.failed_movers())
    assert (run.goal, run.status, run.step_count, run.failed_step_count, run.plan_latency_ms) == (
        "TOP_MOVERS",
        "failure",
        2,
        1,
        5000.0,
    )
    assert steps_of(run) == [
        (1, "finance", "get_top_gainers", "failure", True, 5000.0, "timeout"),
        (2, "finance", "send_notification", "skipped", False, None, ""),
    ]


def test_a_general_turn_as_the_graph_writes_it_is_stored_with_status_general(conversation):
    intent = goal_examples.small_talk()["intent_output"]
    run = record(conversation, {"status": "general", "intent_output": intent})
    assert (run.domain, run.status, run.step_count, run.plan_latency_ms) == ("general", "general", 0, None)


def test_a_general_turn_is_stored_with_status_general_whatever_its_status_says(conversation):
    run = record(conversation, goal_examples.small_talk())
    assert (run.domain, run.goal, run.status, run.step_count, run.plan_latency_ms) == (
        "general",
        "",
        "general",
        0,
        None,
    )


def test_it_makes_two_inserts_given_the_tenant_and_profile(conversation, django_assert_num_queries):
    goal = goal_examples.quote_and_notify()
    message = answer(conversation, goal)
    with django_assert_num_queries(2):
        goal_rows_create(
            message=message, goal=goal, tenant_id=conversation.tenant_id, profile_id=conversation.profile_id
        )


def test_without_the_tenant_and_profile_it_reads_them_from_the_conversation_once(
    conversation, django_assert_num_queries
):
    goal = goal_examples.quote_and_notify()
    message = Message.objects.get(pk=answer(conversation, goal).pk)  # the conversation is not loaded
    with django_assert_num_queries(3):
        run = goal_rows_create(message=message, goal=goal)
    assert (run.tenant_id, run.profile_id) == (conversation.tenant_id, conversation.profile_id)


def test_outputs_keyed_by_number_before_json_are_matched_to_their_steps(conversation):
    goal = goal_examples.quote_and_notify()
    goal["outputs"] = {int(key): value for key, value in goal["outputs"].items()}
    run = record(conversation, goal)
    assert [row[3] for row in steps_of(run)] == ["success", "success", "failure"]


def test_a_malformed_record_is_stored_as_a_failure_and_never_raises(conversation):
    goal = {
        "intent_output": {"primary_domain": "x" * 300, "goal": None, "confidence": "high"},
        "plan": {"steps": ["not a step", {"id": "first", "capability": "c", "required": "yes"}]},
        "outputs": {
            "first": {"status": "exploded", "metadata": {"latency_ms": "slow", "error": {"code": 1}}},
            "9": {"status": "success", "metadata": {"capability": "d", "latency_ms": 5}},
            "10": "not an output",
        },
        "latency_ms": "soon",
    }
    run = record(conversation, goal)
    assert (run.status, run.domain, run.goal, run.confidence, run.plan_latency_ms) == (
        "failure",
        "x" * 64,
        "",
        0.0,
        None,
    )
    assert steps_of(run) == [
        (1, "", "c", "failure", True, None, "{'code': 1}"),
        (9, "", "d", "success", True, 5.0, ""),
    ]


def test_the_rows_go_with_the_answer_they_describe(conversation):
    run = record(conversation, goal_examples.quote_and_notify())
    Message.objects.filter(pk=run.message_id).delete()
    assert not GoalRun.objects.exists()
    assert not GoalStepRun.objects.exists()


def test_rows_are_dated_like_their_answer(conversation):
    goal = goal_examples.failed_movers()
    message = answer(conversation, goal)
    when = dt.datetime(2026, 1, 5, 12, 0, tzinfo=dt.UTC)
    Message.objects.filter(pk=message.pk).update(created_at=when)
    message.refresh_from_db()
    run = goal_rows_create(message=message, goal=goal)
    assert run.created_at == when
    assert set(run.steps.values_list("created_at", flat=True)) == {when}


def test_the_conversations_admin_page_lists_its_goal_mode_answers_read_only(staff_client, conversation):
    record(conversation, goal_examples.ambiguous_quote())
    html = staff_client.get(f"/admin/conversations/conversation/{conversation.pk}/change/").content.decode()
    assert "goal-mode answers" in html.lower()
    assert "GET_QUOTE" in html
    assert "ambiguous" in html
    assert 'name="goal_runs-0-goal"' not in html  # shown, not editable
