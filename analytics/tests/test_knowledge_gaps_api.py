"""GET /api/analytics/knowledge/gaps: of the answers that searched a profile's knowledge, those that did not know, and
the questions they followed grouped by the word they share most — from real turns, in the tenant's scope."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from analytics.knowledge import GAPS_READ, _answers, _Gap, gaps_grouped, knowledge_gaps
from analytics.tests.traffic import messages_over_ninety_days
from conversations.models import KNOWLEDGE_SEARCHED, KNOWLEDGE_UNKNOWN, Message
from conversations.tests.stored_turns import conversation_of, stored_turn
from knowledge.models import KnowledgeSource
from knowledge.services import document_ingest
from knowledge.words import question_words
from releases.versions import version_publish
from routing.documents import profile_documents

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

URL = "/api/analytics/knowledge/gaps"
PLANS = b"""# Plans and internet

## Internet speed

The fibre plan delivers up to 500 megabits per second. Speed tests should be run over a cable, not over Wi-Fi.
"""


def days_ago(days: float) -> dt.datetime:
    return timezone.now() - dt.timedelta(days=days)


def searched(conversation, text: str, *, unknown: bool, when: dt.datetime | None = None) -> Message:
    """A stored turn whose answer searched the profile's knowledge and did (``unknown``) or did not know."""
    turn = stored_turn(conversation, text, when=when or days_ago(1))
    cited = [] if unknown else [{"document": 1, "title": "Faturas", "passage": 1, "score": 0.9}]
    knowledge = {"citations": cited, "retrieved": [], "answered_from_knowledge": not unknown}
    if unknown:
        knowledge["unknown"] = True
    Message.objects.filter(pk=turn.answer.pk).update(metadata={"knowledge": knowledge})
    return turn.answer


def test_a_question_the_help_centre_does_not_answer_is_a_gap_with_the_customers_words(api, telecom):
    source = KnowledgeSource.objects.create(profile=telecom, name="Help centre", language="en")
    document_ingest(source=source, file_name="plans.md", data=PLANS)
    version_publish(profile=telecom, document=profile_documents()["telecom_contas"], note="help centre")

    def ask(text: str) -> dict:
        payload = {"text": text, "user_id": "u-gaps"}
        response = api.post("/api/chat/message", {"agent_id": "telecom_contas", "payload": payload}, format="json")
        assert response.status_code == 200, response.content
        return response.json()

    answered = ask("How fast is the internet on the fibre plan?")
    unanswered = ask("Do you sell gift cards for birthdays?")
    assert answered["metadata"]["knowledge"]["answered_from_knowledge"] is True
    assert unanswered["metadata"]["knowledge"]["unknown"] is True

    body = api.get(URL, {"days": 1}).json()

    assert (body["searched"], body["unknown"], body["unknown_percentage"], body["read"]) == (2, 1, 50.0, 1)
    (group,) = body["groups"]
    (example,) = group["examples"]
    assert example["question"] == "Do you sell gift cards for birthdays?"
    assert (example["language"], example["profile"]) == ("en", "telecom_contas")
    assert Message.objects.get(pk=example["message_id"]).conversation_id == example["conversation_id"]
    assert group["questions"] == 1 and group["topic"] in {"sell", "gift", "cards", "birthdays"}


def test_gaps_are_grouped_by_the_word_their_questions_share_most_and_another_tenants_are_never_counted(
    api, tenant, outsider
):
    ours = conversation_of(tenant, "telecom_contas", "g-1")
    searched(ours, "Vocês têm roaming na Argentina?", unknown=True, when=days_ago(3))
    searched(ours, "Quanto custa o roaming no Chile?", unknown=True, when=days_ago(2))
    searched(ours, "roaming argentina preço", unknown=True, when=days_ago(1))
    searched(ours, "Aceitam vale-presente?", unknown=True, when=days_ago(1.5))
    searched(ours, "Como tiro a segunda via da fatura?", unknown=False)
    stored_turn(ours, "oi", when=days_ago(1))  # no search: not counted at all
    searched(conversation_of(outsider, "telecom_contas", "g-2"), "roaming no Japão?", unknown=True)

    body = api.get(URL, {"days": 7}).json()

    assert (body["searched"], body["unknown"], body["unknown_percentage"], body["read"]) == (5, 4, 80.0, 4)
    roaming, gift = body["groups"]
    assert (roaming["topic"], roaming["questions"], roaming["words"]) == ("roaming", 3, ["argentina"])
    assert [example["question"] for example in roaming["examples"]] == [
        "roaming argentina preço",
        "Quanto custa o roaming no Chile?",
        "Vocês têm roaming na Argentina?",
    ]
    assert roaming["profiles"] == ["telecom_contas"]
    assert (gift["questions"], gift["words"]) == (1, [])
    assert gift["topic"] in {"aceitam", "vale", "presente"}
    assert api.get(URL, {"days": 7, "limit": 1}).json()["groups"] == [roaming]


def test_words_alike_by_their_first_letters_share_a_group_and_a_question_without_such_a_word_has_its_own():
    now = timezone.now()

    def gap(question: str, seconds: int) -> _Gap:
        words = question_words(question)
        return _Gap(question, tuple(words), words, "en", "p", 1, seconds, now - dt.timedelta(seconds=seconds))

    groups = gaps_grouped([gap("refunds for gift cards?", 1), gap("refund a gift", 2), gap("??", 3), gap("hm", 4)])

    assert [(group["topic"], group["questions"]) for group in groups] == [("refunds", 2), ("", 2)]
    assert groups[0]["words"] == ["gift"]


def test_an_empty_window_answers_zeros_and_a_bad_limit_is_a_400_naming_it(api, db):
    assert api.get(URL, {"days": 1}).json() == {
        "searched": 0,
        "unknown": 0,
        "unknown_percentage": None,
        "read": 0,
        "groups": [],
    }
    refused = api.get(URL, {"days": 1, "limit": "0"})
    assert refused.status_code == 400 and "limit" in refused.json()["error"]["fields"]


def test_a_user_without_the_analytics_permission_is_refused(django_user_model):
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("someone", password="x"))
    assert client.get(URL, {"days": 1}).status_code == 403


def test_the_groups_are_made_of_the_latest_questions_and_say_how_many(api, tenant, monkeypatch):
    monkeypatch.setattr("analytics.knowledge.GAPS_READ", 2)
    ours = conversation_of(tenant, "telecom_contas", "g-3")
    for days, text in ((3, "roaming?"), (2, "cashback?"), (1, "cashback hoje?")):
        searched(ours, text, unknown=True, when=days_ago(days))

    body = api.get(URL, {"days": 7}).json()

    assert (body["unknown"], body["read"]) == (3, 2) and GAPS_READ > 2
    assert [(group["topic"], group["questions"]) for group in body["groups"]] == [("cashback", 2)]


@pytest.mark.django_db(transaction=True)
def test_the_counts_read_their_partial_indexes_on_postgresql(tenant, outsider, telecom):
    """On a table of 90 days of messages, a tenth of the answers searched and a hundredth unknown, vacuumed and analysed
    as autovacuum leaves a store, the last week's counts are read from the two partial indexes (the planner's choice),
    never from every answer's metadata."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's plan")
    unknown = {"knowledge": {"citations": [], "retrieved": [], "answered_from_knowledge": False, "unknown": True}}
    cited = {"knowledge": {"citations": [], "retrieved": [], "answered_from_knowledge": True}}

    def metadata(turn: int) -> dict:
        return unknown if turn % 100 == 0 else cited if turn % 10 == 0 else {}

    messages_over_ninety_days([tenant, outsider], telecom, lambda turn: {"metadata": metadata(turn)})
    week = {"start": days_ago(7), "end": timezone.now()}
    scope = {**week, "tenant_id": outsider.pk, "profile_id": None, "cohort": None, "version": None}
    answers = Message.objects.filter(role="assistant", conversation__tenant=outsider, created_at__gte=week["start"])

    assert "message_knowledge_searched" in _answers(KNOWLEDGE_SEARCHED, **scope).explain()
    assert "message_knowledge_unknown" in _answers(KNOWLEDGE_UNKNOWN, **scope).explain()
    figures = knowledge_gaps(**scope)
    assert figures["searched"] == sum(1 for m in answers if "knowledge" in m.metadata) > 0
    assert figures["unknown"] == sum(1 for m in answers if m.metadata.get("knowledge", {}).get("unknown")) > 0
