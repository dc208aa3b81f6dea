"""Feedback on answers: one rating per answer, the counts per cohort and version a rollout guard reads, and a rating
down that hands the conversation to a person when its profile says so."""

from __future__ import annotations

import datetime as dt
import importlib
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.db import connection

from agents.escalation import EscalationSettings
from agents.models import AgentProfile
from common.config_version import config_version_bump
from conversations.feedback import NotAnAnswer, feedback_give, feedback_rates, feedback_with_turn
from conversations.models import (
    Conversation,
    ConversationOutcome,
    Escalation,
    Message,
    MessageFeedback,
    RouteDecisionRecord,
)
from handoffs.models import PERSON, Handoff
from tests.factories import AgentProfileFactory, ConversationFactory, TenantFactory

pytestmark = pytest.mark.django_db

feedback_turn = importlib.import_module("conversations.migrations.0027_feedback_turn")

NOW = dt.datetime(2026, 11, 20, 12, tzinfo=dt.UTC)
WINDOW = {"start": NOW - dt.timedelta(days=1), "end": NOW + dt.timedelta(days=1)}


@pytest.fixture
def world():
    tenant, other_tenant = TenantFactory(slug="tenant_a"), TenantFactory(slug="tenant_b")
    profile, other_profile = AgentProfileFactory(agent_id="telecom_contas"), AgentProfileFactory(agent_id="varejo")
    return {
        "a": ConversationFactory(tenant=tenant, profile=profile, user_id="u1"),
        "b": ConversationFactory(tenant=other_tenant, profile=profile),
        "other_profile": ConversationFactory(tenant=tenant, profile=other_profile),
    }


def answer(conversation, *, cohort="", version=None, at=NOW, role="assistant") -> Message:
    message = Message.objects.create(
        conversation=conversation, role=role, content="…", cohort=cohort, routing_version=version
    )
    Message.objects.filter(pk=message.pk).update(created_at=at)
    message.refresh_from_db()
    return message


def rated(conversation, rating, **kwargs) -> Message:
    message = answer(conversation, **kwargs)
    feedback_give(conversation=conversation, message_id=message.pk, rating=rating)
    return message


def figures(rates) -> list[tuple]:
    return [(r.cohort, r.routing_version, r.answers, r.up, r.down, r.negative_rate) for r in rates]


def test_a_rating_copies_the_answers_cohort_version_and_time_and_a_second_one_replaces_it(world):
    conversation = world["a"]
    message = answer(conversation, cohort="multi_agent", version=3, at=NOW - dt.timedelta(hours=5))
    first = feedback_give(
        conversation=conversation, message_id=message.pk, rating="down", comment="errado", user_id="u1"
    )
    assert first.created
    row = first.feedback
    assert (row.cohort, row.routing_version, row.answered_at) == ("multi_agent", 3, message.created_at)
    assert (row.tenant_id, row.profile_id, row.user_id) == (conversation.tenant_id, conversation.profile_id, "u1")

    second = feedback_give(conversation=conversation, message_id=message.pk, rating="up")
    assert not second.created
    assert MessageFeedback.objects.count() == 1
    row.refresh_from_db()
    assert (row.rating, row.comment, row.created_at) == ("up", "", first.feedback.created_at)


def turns(conversation) -> list[Message]:
    """Three turns, each answered by another agent: two routed (to billing, then to orders: the second answer's
    question is the later message), one whose turn stored no decision. Returns the answers."""
    answers = []
    for question, route, agent in (
        ("fatura alta", ("billing_agent", "billing_high"), "billing_agent"),
        ("meu pedido", ("orders_agent", "orders_track"), "orders_agent"),
        ("oi", None, "support_agent"),
    ):
        asked = Message.objects.create(conversation=conversation, role="user", content=question)
        if route is not None:
            for intent in (route[1], "a_later_decision"):  # the turn's first decision is the one that routed it
                RouteDecisionRecord.objects.create(
                    conversation=conversation,
                    message=asked,
                    mode="router",
                    route=route[0],
                    agent=route[0],
                    intent=intent,
                    method="keywords",
                )
        answers.append(Message.objects.create(conversation=conversation, role="assistant", content="…", agent=agent))
    return answers


def stored_turns(conversation) -> list[tuple]:
    rows = MessageFeedback.objects.filter(conversation=conversation).order_by("message_id")
    return list(rows.values_list("agent", "route_agent", "route_intent"))


def found_turns(conversation) -> list[tuple]:
    """What the correlated subqueries of feedback_with_turn find for each rating (blank where they find none)."""
    rows = feedback_with_turn(MessageFeedback.objects.filter(conversation=conversation).order_by("message_id"))
    return [(row.message.agent, row.decision_agent or "", row.decision_intent or "") for row in rows]


EXPECTED_TURNS = [
    ("billing_agent", "billing_agent", "billing_high"),
    ("orders_agent", "orders_agent", "orders_track"),
    ("support_agent", "", ""),
]


def test_a_rating_repeats_its_answers_agent_and_the_route_decision_of_the_question_it_replied_to(world):
    conversation = world["a"]
    for message in turns(conversation):
        feedback_give(conversation=conversation, message_id=message.pk, rating="up")

    assert stored_turns(conversation) == found_turns(conversation) == EXPECTED_TURNS


def test_the_migration_fills_in_the_turn_of_ratings_stored_before_it_as_a_new_rating_stores_it(world):
    conversation, other = world["a"], world["b"]
    for each in (conversation, other):
        for message in turns(each):
            feedback_give(conversation=each, message_id=message.pk, rating="down")
    MessageFeedback.objects.update(agent="", route_agent="", route_intent="")  # as rows stored before it

    feedback_turn.feedback_turn_fill(apps, SimpleNamespace(connection=connection))

    assert stored_turns(conversation) == found_turns(conversation) == EXPECTED_TURNS
    assert stored_turns(other) == EXPECTED_TURNS


def test_only_an_assistant_message_of_the_conversation_can_be_rated(world):
    question = answer(world["a"], role="user")
    elsewhere = answer(world["b"])
    part = answer(world["a"], role="agent")  # a specialist's part of a supervisor turn is not the answer
    for message in (question, elsewhere, part):
        with pytest.raises(NotAnAnswer):
            feedback_give(conversation=world["a"], message_id=message.pk, rating="up")
    assert not MessageFeedback.objects.exists()


def test_rates_count_answers_and_ratings_per_cohort_and_version(world):
    conversation = world["a"]
    rated(conversation, "down", cohort="multi_agent", version=2)
    rated(conversation, "down", cohort="multi_agent", version=2)
    rated(conversation, "up", cohort="multi_agent", version=2)
    answer(conversation, cohort="multi_agent", version=2)  # not rated
    rated(conversation, "up", cohort="single_agent", version=1)
    answer(conversation, cohort="single_agent", version=1)
    rated(conversation, "down", cohort="single_agent")  # a draft: no version

    assert figures(feedback_rates(**WINDOW)) == [
        ("multi_agent", 2, 4, 1, 2, 2 / 3),
        ("single_agent", 1, 2, 1, 0, 0.0),
        ("single_agent", None, 1, 0, 1, 1.0),
    ]
    assert figures(feedback_rates(**WINDOW, by=["cohort"])) == [
        ("multi_agent", None, 4, 1, 2, 2 / 3),
        ("single_agent", None, 3, 1, 1, 0.5),
    ]
    assert figures(feedback_rates(**WINDOW, by=())) == [(None, None, 7, 2, 3, 0.6)]


def test_a_guard_narrows_to_a_profile_a_tenant_a_window_a_cohort_and_versions(world):
    rated(world["a"], "down", cohort="multi_agent", version=2)
    rated(world["a"], "up", cohort="multi_agent", version=1)
    rated(world["a"], "down", cohort="multi_agent", version=2, at=NOW - dt.timedelta(days=3))  # before the window
    rated(world["b"], "down", cohort="multi_agent", version=2)  # another tenant
    rated(world["other_profile"], "down", cohort="multi_agent", version=2)  # another profile
    rated(world["a"], "up", cohort="single_agent", version=2)
    profile_id, tenant_id = world["a"].profile_id, world["a"].tenant_id

    narrowed = feedback_rates(
        **WINDOW, profile_id=profile_id, tenant_id=tenant_id, cohorts=["multi_agent"], routing_versions=[2]
    )
    assert figures(narrowed) == [("multi_agent", 2, 1, 0, 1, 1.0)]
    every_tenant = feedback_rates(**WINDOW, profile_id=profile_id, cohorts=["multi_agent"], routing_versions=[2])
    assert figures(every_tenant) == [("multi_agent", 2, 2, 0, 2, 1.0)]
    ratings_only = feedback_rates(
        **WINDOW, profile_id=profile_id, tenant_id=tenant_id, by=["routing_version"], answers=False
    )
    assert figures(ratings_only) == [(None, 1, 0, 1, 0, 0.0), (None, 2, 0, 1, 1, 0.5)]


def test_a_draft_is_asked_for_as_version_none_and_an_empty_window_is_one_row_of_zeros(world):
    rated(world["a"], "down", cohort="multi_agent")
    rated(world["a"], "up", cohort="multi_agent", version=4)
    assert figures(feedback_rates(**WINDOW, routing_versions=[None])) == [("multi_agent", None, 1, 0, 1, 1.0)]
    assert figures(feedback_rates(**WINDOW, routing_versions=[None, 4], by=())) == [(None, None, 2, 1, 1, 0.5)]
    empty = {"start": NOW + dt.timedelta(days=5), "end": NOW + dt.timedelta(days=6)}
    assert figures(feedback_rates(**empty, by=())) == [(None, None, 0, 0, 0, None)]
    assert feedback_rates(**empty) == []


# -- a rating down hands the conversation to a person (escalation.on_thumbs_down) ----------------------------------


def talk(api, text, session="rated-1"):
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": session}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def rate(api, body, rating, comment=""):
    response = api.post(
        f"/api/sessions/{body['conversation_key']}/feedback",
        {"message_id": body["message_id"], "rating": rating, "comment": comment},
        format="json",
    )
    assert response.status_code in (200, 201), response.content
    return response.json()


def thumbs_down_to_people(on: bool = True) -> None:
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    profile.escalation = EscalationSettings.from_json({**profile.escalation, "on_thumbs_down": on}).as_json()
    profile.save(update_fields=["escalation"])
    config_version_bump()


def test_a_rating_down_hands_the_conversation_to_a_person_when_the_profile_says_so(api, telecom):
    thumbs_down_to_people()
    talk(api, "My invoice is too high this month")
    body = talk(api, "why is my bill so expensive?")

    rated_down = rate(api, body, "down", comment="That did not answer me")

    escalation = rated_down["escalation"]
    assert (escalation["status"], escalation["reason"], escalation["position"]) == ("queued", "thumbs_down", 1)
    assert escalation["priority"] == "high"
    stored = Escalation.objects.get(pk=escalation["id"])
    assert stored.language == "en"  # the customer's last message
    assert "rated an answer down: That did not answer me" in stored.summary
    assert "- customer: why is my bill so expensive?" in stored.summary
    conversation = Conversation.objects.get(conversation_key=body["conversation_key"])
    assert (conversation.escalation_id, conversation.outcome) == (stored.pk, "escalated")
    row = ConversationOutcome.objects.get(conversation=conversation)
    assert (row.outcome, row.reason, row.rated_down) == ("escalated", "thumbs_down", 1)
    move = Handoff.objects.get(conversation=conversation, kind="human")
    assert (move.to_agent, move.outcome) == (PERSON, "thumbs_down")
    # Rated down again while a person holds it: no second escalation.
    again = rate(api, talk(api, "hello?"), "down")
    assert again["escalation"] is None and Escalation.objects.count() == 1


def test_a_rating_down_stays_a_rating_when_the_profile_keeps_its_conversations_or_it_is_up(api, telecom):
    body = talk(api, "Minha fatura veio alta")
    assert rate(api, body, "down")["escalation"] is None

    thumbs_down_to_people()
    assert rate(api, talk(api, "Minha fatura veio alta", session="rated-2"), "up")["escalation"] is None
    assert not Escalation.objects.exists()
