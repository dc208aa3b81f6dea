"""``GET /api/analytics/feedback``: feedback per cohort and per routing version, with the analytics' tenant scoping;
``.../timeline``, ``.../breakdown`` and ``.../recent``: the dashboard's ratings panel (ratings over time, the share
rated down per profile, intent, agent and knowledge document cited, the latest answers rated down)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone

from agents.models import AgentProfile
from conversations.feedback import feedback_give
from conversations.models import Message
from conversations.tests.stored_turns import conversation_of, stored_turn
from knowledge.models import KnowledgeDocument, KnowledgeSource
from knowledge.services import document_delete, document_ingest
from tests.factories import AgentProfileFactory, ConversationFactory

pytestmark = pytest.mark.django_db

URL = "/api/analytics/feedback"


@pytest.fixture
def traffic(tenant, outsider):
    """tenant_a: multi_agent v2 (3 answers: 1 up, 1 down) and single_agent v1 (2 answers: 1 down); the outsider:
    one multi_agent v2 answer rated down; another profile of tenant_a: one draft answer rated up."""
    profile = AgentProfileFactory(agent_id="telecom_contas")
    other_profile = AgentProfileFactory(agent_id="varejo")
    ours = ConversationFactory(tenant=tenant, profile=profile)
    theirs = ConversationFactory(tenant=outsider, profile=profile)
    other = ConversationFactory(tenant=tenant, profile=other_profile)

    def answer(conversation, cohort, version, rating=None):
        message = Message.objects.create(
            conversation=conversation, role="assistant", content="…", cohort=cohort, routing_version=version
        )
        if rating:
            feedback_give(conversation=conversation, message_id=message.pk, rating=rating)

    answer(ours, "multi_agent", 2, "up")
    answer(ours, "multi_agent", 2, "down")
    answer(ours, "multi_agent", 2)
    answer(ours, "single_agent", 1, "down")
    answer(ours, "single_agent", 1)
    answer(theirs, "multi_agent", 2, "down")
    answer(other, "multi_agent", None, "up")


def row(cohort, version, answers, up, down, rate):
    return {
        "cohort": cohort,
        "routing_version": version,
        "answers": answers,
        "rated": up + down,
        "up": up,
        "down": down,
        "negative_rate_percentage": rate,
    }


def test_a_key_reads_its_own_tenant_per_cohort_per_version_and_per_pair(api, traffic):
    response = api.get(URL, {"days": 7, "profile": "telecom_contas"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["total"] == row(None, None, 5, 1, 2, 66.67)
    assert body["cohorts"] == [row("multi_agent", None, 3, 1, 1, 50.0), row("single_agent", None, 2, 0, 1, 100.0)]
    assert body["versions"] == [row(None, 1, 2, 0, 1, 100.0), row(None, 2, 3, 1, 1, 50.0)]
    assert body["pairs"] == [row("multi_agent", 2, 3, 1, 1, 50.0), row("single_agent", 1, 2, 0, 1, 100.0)]


def test_every_profile_includes_drafts_as_version_null(api, traffic):
    body = api.get(URL).json()
    assert body["total"] == row(None, None, 6, 2, 2, 50.0)
    assert row("multi_agent", None, 1, 1, 0, 0.0) in body["pairs"]  # the other profile's draft answer


def test_a_key_naming_another_tenant_gets_a_404_and_an_analyst_reads_every_tenant_or_one(
    api, traffic, django_user_model
):
    assert api.get(URL, {"tenant": "outsider"}).status_code == 404
    analyst = django_user_model.objects.create_user("ops", "ops@example.com", "ops-password", is_staff=True)
    analyst.user_permissions.add(Permission.objects.get(codename="view_analytics"))
    client = Client()
    client.force_login(analyst)
    everyone = client.get(URL, {"profile": "telecom_contas"}).json()
    assert everyone["total"] == row(None, None, 6, 1, 3, 75.0)
    outsider = client.get(URL, {"profile": "telecom_contas", "tenant": "outsider"}).json()
    assert outsider["pairs"] == [row("multi_agent", 2, 1, 0, 1, 100.0)]


def test_a_user_without_the_analytics_permission_is_refused_and_bad_filters_are_400s(api, traffic, django_user_model):
    user = django_user_model.objects.create_user("nobody", "n@example.com", "pw", is_staff=True)
    client = Client()
    client.force_login(user)
    assert client.get(URL).status_code == 403
    assert Client().get(URL).status_code == 401
    bad = api.get(URL, {"days": "0", "profile": "nope"})
    assert bad.status_code == 400
    assert set(bad.json()["error"]["fields"]) == {"days", "profile"}
    assert AgentProfile.objects.filter(agent_id="nope").count() == 0


def test_an_empty_window_answers_zeros(api, db):
    body = api.get(URL).json()
    assert body == {"total": row(None, None, 0, 0, 0, None), "cohorts": [], "versions": [], "pairs": []}


# -- over time, per profile / intent / agent, the latest rated down ------------------------------------------------


def days_ago(days: int, hour: int = 10) -> dt.datetime:
    today = timezone.now().astimezone(dt.UTC).date()
    return dt.datetime.combine(today - dt.timedelta(days=days), dt.time(hour), tzinfo=dt.UTC)


@pytest.fixture
def rated_turns(tenant, outsider):
    """tenant_a, telecom_contas: three days ago a keyword turn rated down and one rated up (v1, multi_agent); a day
    ago (10:00, 11:00) a misroute by examples rated down with a comment and a support turn rated up (v2); today at
    midnight an answer without a stored decision rated down. tenant_a, retail_orders: today at midnight a fallback
    rated down. The outsider: one down a day ago."""
    telecom = conversation_of(tenant, "telecom_contas", "t-1")
    later = conversation_of(tenant, "telecom_contas", "t-2")
    retail = conversation_of(tenant, "retail_orders", "r-1")
    theirs = conversation_of(outsider, "telecom_contas", "o-1")
    old = {"version": 1, "cohort": "multi_agent", "when": days_ago(3)}
    stored_turn(telecom, "minha fatura", rating="down", comment="não explicou", **old)
    stored_turn(telecom, "segunda via", rating="up", **old)
    stored_turn(
        later,
        "fui mal atendido na loja",
        answer="Sua fatura tem roaming.",
        method="examples",
        version=2,
        rating="down",
        comment="queria reclamar do vendedor",
        when=days_ago(1),
    )
    stored_turn(
        later,
        "quero reclamar",
        intent="support_request",
        agent="support_agent",
        version=2,
        rating="up",
        when=days_ago(1, 11),
    )
    stored_turn(
        retail,
        "cancelar pedido",
        answer="Não entendi.",
        intent="fallback",
        agent="general_agent",
        method="fallback",
        version=2,
        rating="down",
        when=days_ago(0, 0),
    )
    stored_turn(theirs, "segredo do outro", rating="down", comment="segredo", when=days_ago(1))
    # An answer with no customer message nor decision stored before it (today at midnight, after retail's).
    alone = conversation_of(tenant, "telecom_contas", "t-3")
    lone = Message.objects.create(conversation=alone, role="assistant", agent="billing_agent", content="Sem decisão")
    Message.objects.filter(pk=lone.pk).update(created_at=days_ago(0, 0))
    feedback_give(conversation=alone, message_id=lone.pk, rating="down")


def test_the_timeline_counts_ratings_per_day_of_the_answer_every_day_listed(api, rated_turns):
    response = api.get(f"{URL}/timeline", {"days": 4})

    assert response.status_code == 200, response.content
    days = [(row["period"][:10], row["rated"], row["up"], row["down"]) for row in response.json()]
    assert days == [
        (days_ago(3).date().isoformat(), 2, 1, 1),
        (days_ago(2).date().isoformat(), 0, 0, 0),
        (days_ago(1).date().isoformat(), 2, 1, 1),  # the outsider's rating is not the key's
        (days_ago(0).date().isoformat(), 2, 0, 2),
    ]
    assert response.json()[0]["negative_rate_percentage"] == 50.0
    assert response.json()[1]["negative_rate_percentage"] is None


def test_the_timeline_by_the_hour_and_narrowed_to_a_version_or_a_cohort(api, rated_turns):
    hours = api.get(f"{URL}/timeline", {"days": 2, "bucket": "hour"}).json()
    assert len(hours) >= 24
    busy = [(row["period"][:13], row["up"], row["down"]) for row in hours if row["rated"]]
    yesterday, today = days_ago(1).date().isoformat(), days_ago(0).date().isoformat()
    assert busy == [(f"{yesterday}T10", 0, 1), (f"{yesterday}T11", 1, 0), (f"{today}T00", 0, 2)]

    version_one = api.get(f"{URL}/timeline", {"days": 4, "version": 1}).json()
    assert sum(row["rated"] for row in version_one) == 2
    multi = api.get(f"{URL}/timeline", {"days": 4, "cohort": "multi_agent"}).json()
    assert sum(row["rated"] for row in multi) == 2
    assert api.get(f"{URL}/timeline", {"bucket": "week"}).status_code == 400


def test_the_breakdown_gives_the_share_rated_down_per_profile_intent_and_agent(api, rated_turns):
    response = api.get(f"{URL}/breakdown", {"days": 7})

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["profiles"] == [
        {"profile": "telecom_contas", "rated": 5, "up": 2, "down": 3, "negative_rate_percentage": 60.0},
        {"profile": "retail_orders", "rated": 1, "up": 0, "down": 1, "negative_rate_percentage": 100.0},
    ]
    assert body["intents"] == [
        {
            "profile": "telecom_contas",
            "intent": "billing_invoice_explanation",
            "rated": 3,
            "up": 1,
            "down": 2,
            "negative_rate_percentage": 66.67,
        },
        {
            "profile": "retail_orders",
            "intent": "fallback",
            "rated": 1,
            "up": 0,
            "down": 1,
            "negative_rate_percentage": 100.0,
        },
        {"profile": "telecom_contas", "intent": "", "rated": 1, "up": 0, "down": 1, "negative_rate_percentage": 100.0},
        {
            "profile": "telecom_contas",
            "intent": "support_request",
            "rated": 1,
            "up": 1,
            "down": 0,
            "negative_rate_percentage": 0.0,
        },
    ]
    agents = {(row["profile"], row["agent"]): (row["rated"], row["down"]) for row in body["agents"]}
    assert agents == {
        ("telecom_contas", "billing_agent"): (4, 3),
        ("telecom_contas", "support_agent"): (1, 0),
        ("retail_orders", "general_agent"): (1, 1),
    }


@pytest.mark.sqlite_too
def test_the_breakdown_gives_the_share_rated_down_per_knowledge_document_an_answer_cites(api, tenant, outsider):
    ours = conversation_of(tenant, "telecom_contas", "k-1")
    source = KnowledgeSource.objects.create(profile=ours.profile, name="Central", language="pt")
    bills = document_ingest(source=source, file_name="faturas.md", data=b"# Faturas\n\nA segunda via sai no app.\n")
    plans = document_ingest(source=source, file_name="planos.md", data=b"# Planos\n\nTroque de plano no app.\n")

    def cited(conversation, text, rating, *documents, unknown=False):
        turn = stored_turn(conversation, text, rating=rating, when=days_ago(1))
        citations = [{"document": document, "title": "?", "passage": 1, "score": 0.9} for document in documents]
        knowledge = {"citations": citations, "retrieved": [], "answered_from_knowledge": bool(documents)}
        Message.objects.filter(pk=turn.answer.pk).update(metadata={"knowledge": knowledge | {"unknown": unknown}})

    cited(ours, "segunda via?", "down", bills.document_id, plans.document_id)
    cited(ours, "segunda via pelo app?", "down", bills.document_id, bills.document_id)  # one answer: counted once
    cited(ours, "trocar de plano?", "up", plans.document_id)
    cited(ours, "vale-presente?", "down", unknown=True)  # cites nothing: no document's
    cited(conversation_of(outsider, "telecom_contas", "k-2"), "segredo?", "down", plans.document_id)
    document_delete(document=KnowledgeDocument.objects.get(pk=plans.document_id))

    body = api.get(f"{URL}/breakdown", {"days": 7}).json()

    assert body["documents"] == [
        {
            "profile": "telecom_contas",
            "document": bills.document_id,
            "title": "Faturas",
            "rated": 2,
            "up": 0,
            "down": 2,
            "negative_rate_percentage": 100.0,
        },
        {
            "profile": "telecom_contas",
            "document": plans.document_id,
            "title": "(deleted)",
            "rated": 2,
            "up": 1,
            "down": 1,
            "negative_rate_percentage": 50.0,
        },
    ]


def test_the_breakdown_of_one_profile_and_of_an_empty_window(api, rated_turns):
    retail = api.get(f"{URL}/breakdown", {"days": 7, "profile": "retail_orders"}).json()
    assert [row["profile"] for row in retail["profiles"]] == ["retail_orders"]
    assert [row["agent"] for row in retail["agents"]] == ["general_agent"]
    empty = api.get(f"{URL}/breakdown", {"start": "2020-01-01", "end": "2020-01-02"}).json()
    assert empty == {"profiles": [], "intents": [], "agents": [], "documents": []}


def test_the_latest_rated_down_come_newest_first_with_comment_message_answer_and_route(api, rated_turns):
    response = api.get(f"{URL}/recent", {"days": 7})

    assert response.status_code == 200, response.content
    rows = response.json()
    assert [row["question"] for row in rows] == ["", "cancelar pedido", "fui mal atendido na loja", "minha fatura"]
    assert (rows[0]["intent"], rows[0]["method"]) == ("", "")  # no decision stored for that answer
    misroute = rows[2]
    assert misroute["comment"] == "queria reclamar do vendedor"
    assert misroute["answer"] == "Sua fatura tem roaming."
    assert (misroute["intent"], misroute["agent"], misroute["method"]) == (
        "billing_invoice_explanation",
        "billing_agent",
        "examples",
    )
    assert (misroute["profile"], misroute["tenant"], misroute["routing_version"]) == ("telecom_contas", "tenant_a", 2)
    answer = Message.objects.get(content="Sua fatura tem roaming.")
    assert (misroute["conversation_id"], misroute["message_id"]) == (answer.conversation_id, answer.pk)
    assert all("segredo" not in str(row) for row in rows)


def test_the_latest_rated_down_take_a_limit_and_the_filters(api, rated_turns):
    assert len(api.get(f"{URL}/recent", {"days": 7, "limit": 2}).json()) == 2
    assert api.get(f"{URL}/recent", {"limit": 0}).status_code == 400
    version_one = api.get(f"{URL}/recent", {"days": 7, "version": 1}).json()
    assert [row["question"] for row in version_one] == ["minha fatura"]


def test_an_analyst_reads_every_tenants_ratings_or_one_and_a_key_only_its_own(api, rated_turns, django_user_model):
    assert api.get(f"{URL}/recent", {"tenant": "outsider"}).status_code == 404
    analyst = django_user_model.objects.create_user("ops", "ops@example.com", "ops-password", is_staff=True)
    analyst.user_permissions.add(Permission.objects.get(codename="view_analytics"))
    client = Client()
    client.force_login(analyst)
    everyone = client.get(f"{URL}/recent", {"days": 7}).json()
    assert "segredo do outro" in [row["question"] for row in everyone]
    outsider = client.get(f"{URL}/breakdown", {"days": 7, "tenant": "outsider"}).json()
    assert outsider["profiles"] == [
        {"profile": "telecom_contas", "rated": 1, "up": 0, "down": 1, "negative_rate_percentage": 100.0}
    ]
    for path in ("timeline", "breakdown", "recent"):
        assert Client().get(f"{URL}/{path}").status_code == 401


def test_the_ratings_panels_hold_the_granted_tenants_ratings_only(tenant_analyst, tenant, outsider):
    # A member of "Analysts" granted tenant_a (its other reads: analytics/tests/test_analysts.py).
    stored_turn(conversation_of(tenant, "telecom_contas", "a-1"), "fatura alta", rating="down", comment="de A")
    stored_turn(conversation_of(outsider, "retail_orders", "b-1"), "cliente B", rating="down", comment="segredo de B")
    analyst = Client()
    analyst.force_login(tenant_analyst)

    recent = analyst.get(f"{URL}/recent")
    breakdown = analyst.get(f"{URL}/breakdown")
    timeline = analyst.get(f"{URL}/timeline")

    assert recent.status_code == breakdown.status_code == timeline.status_code == 200, recent.content
    assert [row["comment"] for row in recent.json()] == ["de A"]
    assert "segredo de B" not in str(breakdown.json()) and "retail_orders" not in str(breakdown.json())
