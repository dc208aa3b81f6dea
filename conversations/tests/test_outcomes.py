"""How conversations end (docs/analytics.md, "Outcomes"): the periodic close decides the idle ones — resolved by a
goodbye, thanks, the profile's closing words or an up rating, else abandoned — in batches of a few statements each,
a session ended through the API is decided at once, and a queued escalation of an idle conversation leaves the queue.
Turns are real: customers' messages through the gateway API."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.escalation import EscalationSettings
from agents.models import AgentProfile
from common.config_version import config_version_bump
from conversations.models import (
    Conversation,
    ConversationOutcome,
    Escalation,
    EscalationStatus,
    Message,
    MessageFeedback,
)
from conversations.outcomes import _decide, _deciding, _idle, outcome_decided, outcomes_close
from conversations.tasks import outcomes_close as outcomes_close_task
from tests.factories import AgentProfileFactory, ConversationFactory, TenantFactory

pytestmark = pytest.mark.django_db

LATER = dt.timedelta(minutes=31)  # past the default abandon_after_minutes (30)


def say(api, text, *, session="out-1", agent_id="telecom_contas"):
    response = api.post(
        "/api/gateway/message",
        {"agent_id": agent_id, "payload": {"text": text, "session_id": session}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def stored(body) -> Conversation:
    return Conversation.objects.get(conversation_key=body["conversation_key"])


def close_later(delay: dt.timedelta = LATER, **kwargs):
    return outcomes_close(now=timezone.now() + delay, **kwargs)


def people(agent_id: str = "telecom_contas", **settings) -> None:
    profile = AgentProfile.objects.get(agent_id=agent_id)
    profile.escalation = EscalationSettings.from_json({**profile.escalation, **settings}).as_json()
    profile.save(update_fields=["escalation"])
    config_version_bump()


@pytest.mark.parametrize(
    ("last", "closing", "rating", "expected"),
    [
        ("obrigado, tchau", (), None, ("resolved", "closing_words")),
        ("thanks so much!", (), "down", ("resolved", "closing_words")),
        ("¡hasta luego!", (), None, ("resolved", "closing_words")),
        ("perfeito, me atendeu super bem", ("me atendeu",), None, ("resolved", "closing_words")),
        ("e a segunda via?", (), "up", ("resolved", "rated_up")),
        ("e a segunda via?", (), "down", ("abandoned", "timeout")),
        ("", (), None, ("abandoned", "timeout")),
    ],
)
def test_the_rule_reads_the_last_customer_message_then_the_latest_rating(last, closing, rating, expected):
    ending = outcome_decided(last_text=last, closing_words=closing, last_rating=rating)

    assert (ending.outcome, ending.reason) == expected


@pytest.mark.sqlite_too
def test_an_idle_conversation_that_ended_with_thanks_is_resolved_with_where_it_stood(api, telecom):
    say(api, "Minha fatura veio alta")
    body = say(api, "obrigado, tchau")
    conversation = stored(body)

    closed = close_later()

    conversation.refresh_from_db()
    assert (closed.resolved, closed.abandoned, conversation.outcome) == (1, 0, "resolved")
    row = ConversationOutcome.objects.get(conversation=conversation)
    assert (row.outcome, row.reason, row.tenant_id, row.profile_id) == (
        "resolved",
        "closing_words",
        conversation.tenant_id,
        conversation.profile_id,
    )
    assert (row.intent, row.agent) == (conversation.active_intent, conversation.active_specialist)
    assert row.intent == "billing_invoice_explanation"
    assert row.routing_version == body["metadata"]["version"]
    assert row.started_at == conversation.created_at
    assert (row.rated_up, row.rated_down) == (0, 0)


@pytest.mark.sqlite_too
def test_an_idle_conversation_left_on_a_question_is_abandoned_and_a_recent_one_stays_open(api, telecom):
    idle = stored(say(api, "Minha fatura veio alta", session="idle"))

    assert close_later(dt.timedelta(minutes=29)).conversations == 0
    closed = close_later()

    idle.refresh_from_db()
    assert (closed.abandoned, idle.outcome) == (1, "abandoned")
    assert ConversationOutcome.objects.get(conversation=idle).reason == "timeout"
    assert close_later().conversations == 0  # decided once


def test_an_up_rating_resolves_and_the_ratings_are_counted(api, telecom):
    first = say(api, "Minha fatura veio alta")
    second = say(api, "e a segunda via?")
    for body, rating in ((first, "down"), (second, "up")):
        rated = api.post(
            f"/api/sessions/{body['conversation_key']}/feedback",
            {"message_id": body["message_id"], "rating": rating},
            format="json",
        )
        assert rated.status_code == 201, rated.content

    close_later()

    row = ConversationOutcome.objects.get(conversation=stored(second))
    assert (row.outcome, row.reason, row.rated_up, row.rated_down) == ("resolved", "rated_up", 1, 1)
    # A rating given once the conversation was decided is counted on its row too.
    api.post(
        f"/api/sessions/{first['conversation_key']}/feedback",
        {"message_id": first["message_id"], "rating": "up"},
        format="json",
    )
    row.refresh_from_db()
    assert (row.rated_up, row.rated_down) == (2, 0)


def test_each_profile_closes_after_its_own_timeout_and_with_its_own_closing_words(api, telecom):
    people(abandon_after_minutes=5)
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    profile.closing_words = ["me atendeu"]
    profile.save(update_fields=["closing_words"])
    config_version_bump()
    conversation = stored(say(api, "certo, me atendeu"))

    close_later(dt.timedelta(minutes=6))

    conversation.refresh_from_db()
    assert conversation.outcome == "resolved"


def test_a_customer_who_writes_again_opens_the_conversation_again(api, telecom):
    conversation = stored(say(api, "Minha fatura veio alta"))
    close_later()
    conversation.refresh_from_db()
    assert conversation.outcome == "abandoned"

    say(api, "voltei: e a segunda via?")

    conversation.refresh_from_db()
    assert conversation.outcome == ""
    assert not ConversationOutcome.objects.filter(conversation=conversation).exists()


def test_a_conversation_whose_turn_is_running_is_not_closed(api, telecom):
    conversation = stored(say(api, "Minha fatura veio alta"))
    Conversation.objects.filter(pk=conversation.pk).update(turn_tickets_issued=conversation.turn_tickets_issued + 1)

    assert close_later().conversations == 0


def test_a_batch_whose_conversation_was_written_to_meanwhile_keeps_nothing_and_is_tried_again(api, telecom):
    quiet = stored(say(api, "Minha fatura veio alta", session="quiet"))
    busy = stored(say(api, "Minha fatura veio alta", session="busy"))
    cutoff = timezone.now() + dt.timedelta(minutes=1)
    reads = list(_deciding(Conversation.objects.filter(pk__in=[quiet.pk, busy.pk])))
    Conversation.objects.filter(pk=busy.pk).update(turn_started_at=cutoff + dt.timedelta(minutes=1))  # it wrote

    with transaction.atomic():
        counts = _decide(reads, closing_words=(), otherwise="timeout", now=cutoff, still=_idle(cutoff))

    assert counts == {}
    assert set(Conversation.objects.filter(pk__in=[quiet.pk, busy.pk]).values_list("outcome", flat=True)) == {""}
    assert not ConversationOutcome.objects.exists()
    assert close_later().abandoned == 1  # the quiet one, next time


def test_a_queued_escalation_of_an_idle_conversation_leaves_the_queue_and_stays_escalated(api, telecom):
    body = say(api, "quero falar com um atendente")
    conversation = stored(body)
    waiting = say(api, "quero falar com um atendente", session="still-waiting")

    close_later(dt.timedelta(minutes=20))  # not idle long enough: nothing moves
    assert Escalation.objects.filter(status=EscalationStatus.QUEUED).count() == 2
    Conversation.objects.filter(pk=stored(waiting).pk).update(turn_started_at=timezone.now() + LATER)
    closed = close_later()

    assert closed.escalations == 1
    escalation = Escalation.objects.get(conversation=conversation)
    assert (escalation.status, escalation.ended_at is not None) == (EscalationStatus.CLOSED, True)
    conversation.refresh_from_db()
    assert (conversation.escalation_id, conversation.outcome) == (None, "escalated")
    assert ConversationOutcome.objects.get(conversation=conversation).outcome == "escalated"
    assert Escalation.objects.get(conversation=stored(waiting)).status == EscalationStatus.QUEUED


def make_idle(count: int, profile, tenant) -> None:
    for _ in range(count):
        conversation = ConversationFactory(tenant=tenant, profile=profile, cohort="multi_agent")
        Message.objects.create(conversation=conversation, role="user", content="tchau", routing_version=3)
        answer = Message.objects.create(conversation=conversation, role="assistant", content="…", routing_version=3)
        MessageFeedback.objects.create(
            message=answer,
            conversation=conversation,
            tenant=tenant,
            profile=profile,
            rating="down",
            answered_at=answer.created_at,
        )


def test_a_batch_costs_the_same_few_statements_whatever_its_size():
    tenant, profile = TenantFactory(slug="tenant_a"), AgentProfileFactory(agent_id="batch_profile")
    close_later()  # the compiled profiles, built once
    make_idle(3, profile, tenant)
    with CaptureQueriesContext(connection) as small:
        assert close_later(batch_size=50).resolved == 3
    make_idle(12, profile, tenant)
    with CaptureQueriesContext(connection) as large:
        assert close_later(batch_size=50).resolved == 12

    assert len(large) == len(small)
    # The profiles, then per profile: the batch's read, the days of the outcome rows it replaces, its outcome rows
    # and its outcome column (in a savepoint), and the queued escalations.
    assert len(small) <= 10, [query["sql"] for query in small.captured_queries]
    rows = ConversationOutcome.objects.filter(profile=profile)
    assert rows.count() == 15
    assert set(rows.values_list("cohort", "routing_version", "rated_down", "reason")) == {
        ("multi_agent", 3, 1, "closing_words")
    }


def test_bounded_batches_close_everything_in_one_run():
    tenant, profile = TenantFactory(slug="tenant_a"), AgentProfileFactory(agent_id="batch_profile")
    make_idle(7, profile, tenant)

    assert close_later(batch_size=3).resolved == 7
    assert not Conversation.objects.filter(profile=profile, outcome="").exists()


@pytest.mark.sqlite_too
def test_ending_a_session_decides_its_outcome_at_once(api, telecom):
    body = say(api, "Minha fatura veio alta")

    ended = api.delete(f"/api/sessions/{body['conversation_key']}")

    assert ended.status_code == 200, ended.content
    assert ended.json()["outcome"] == "abandoned"
    row = ConversationOutcome.objects.get(conversation=stored(body))
    assert (row.outcome, row.reason, row.intent) == ("abandoned", "session_ended", "billing_invoice_explanation")
    thanked = say(api, "valeu, era só isso", session="thanked")
    assert api.delete(f"/api/sessions/{thanked['conversation_key']}").json()["outcome"] == "resolved"


def test_ending_a_session_a_person_holds_closes_its_escalation(api, telecom):
    body = say(api, "quero falar com um atendente")

    ended = api.delete(f"/api/sessions/{body['conversation_key']}").json()

    assert ended["outcome"] == "escalated"
    conversation = stored(body)
    assert conversation.escalation_id is None
    assert Escalation.objects.get(conversation=conversation).status == EscalationStatus.CLOSED


def test_the_beat_task_and_the_embedded_periodic_runner_close_idle_conversations(api, telecom, settings):
    conversation = stored(say(api, "Minha fatura veio alta"))
    Conversation.objects.filter(pk=conversation.pk).update(turn_started_at=timezone.now() - LATER)

    assert outcomes_close_task.apply().get() == 1
    conversation.refresh_from_db()
    assert conversation.outcome == "abandoned"

    other = stored(say(api, "Minha fatura veio alta", session="other"))
    Conversation.objects.filter(pk=other.pk).update(turn_started_at=timezone.now() - LATER)
    call_command("periodic", "--once")  # every job of CELERY_BEAT_SCHEDULE, in this process
    other.refresh_from_db()
    assert other.outcome == "abandoned"
    assert "outcomes-close" in settings.CELERY_BEAT_SCHEDULE
