"""``GET /api/analytics/feedback``: feedback per cohort and per routing version, with the analytics' tenant scoping."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from agents.models import AgentProfile
from conversations.feedback import feedback_give
from conversations.models import Message
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
