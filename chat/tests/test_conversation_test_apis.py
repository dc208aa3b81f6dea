"""``POST /api/profiles/{agent_id}/conversation-tests/runs`` and ``GET …/runs/{id}``: a debug key (or a staff
session holding the debug right over the tenant it names) runs a profile's conversation tests and reads the run back;
a key without the right, a tenant not granted and another tenant's run are refused; bad input is a 400 naming its
field, with nothing stored; a large suite is queued (202 and the run's URL)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from releases.evals import conversation_tests_load, conversation_tests_parse
from releases.evals.runs import QUEUE_FROM
from releases.models import ConversationTestRun
from tenants.models import TenantGrant, TenantRight
from tenants.services import api_key_create

pytestmark = pytest.mark.django_db

URL = "/api/profiles/telecom_contas/conversation-tests/runs"
SUITE = """\
profile: telecom_contas
conversation_tests:
  - name: an invoice question goes to billing
    turns:
      - user: minha fatura veio alta este mês
        expect: {agent: billing_agent}
  - name: an order question goes to billing
    required: false
    turns:
      - user: cadê meu pedido?
        expect: {agent: billing_agent}
"""


@pytest.fixture
def suite(telecom):
    conversation_tests_load(profile=telecom, cases=conversation_tests_parse(SUITE, name="suite.yaml")[1])
    return telecom


def test_a_debug_key_runs_the_tests_and_reads_the_run_back(debug_api, suite):
    answer = debug_api.post(URL, {"version": "draft", "compare": "live"}, format="json")

    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert (body["status"], body["total"], body["passed"], body["failed"], body["required_failed"]) == (
        "finished",
        2,
        1,
        1,
        0,
    )
    assert [result["name"] for result in body["results"]] == [
        "an order question goes to billing",
        "an invoice question goes to billing",
    ]
    assert body["results"][0]["compared"]["outcome"] == "still fails"
    assert set(body["coverage"]) == {"intents", "goals", "flows", "tools", "languages", "repairs"}
    assert ConversationTestRun.objects.get().tenant.slug == "tenant_a"
    again = debug_api.get(f"{URL}/{body['id']}")
    assert again.status_code == 200 and again.json() == body


def test_a_key_without_the_debug_right_and_another_tenants_key_are_refused(api, debug_api, suite, outsider):
    assert api.post(URL, {}, format="json").status_code == 403
    run_id = debug_api.post(URL, {"names": ["an invoice question goes to billing"]}, format="json").json()["id"]
    _, raw = api_key_create(tenant_slug=outsider.slug, name="their debug key", is_debug=True)

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    refused = client.get(f"{URL}/{run_id}")

    assert refused.status_code == 404 and "run_id" in refused.json()["error"]["fields"]


def test_a_staff_session_runs_for_a_tenant_it_holds_the_debug_right_over_only(django_user_model, tenant, suite):
    user = django_user_model.objects.create_user("tester", "t@example.com", "pw", is_staff=True)
    TenantGrant.objects.create(tenant=tenant, user=user, **{TenantRight.ACT.value: True})
    client = APIClient()
    client.force_login(user)

    refused = client.post(URL, {"tenant": tenant.slug}, format="json")
    assert refused.status_code == 403
    TenantGrant.objects.filter(user=user).update(**{TenantRight.DEBUG.value: True})
    answer = client.post(URL, {"tenant": tenant.slug}, format="json")

    assert answer.status_code == 200 and answer.json()["passed"] == 1
    assert ConversationTestRun.objects.get().started_by == user
    assert client.get(f"{URL}/{answer.json()['id']}").status_code == 400  # the tenant must be named
    assert client.get(f"{URL}/{answer.json()['id']}", {"tenant": tenant.slug}).status_code == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"version": "newest"}, "version"),
        ({"version": 9}, "version"),
        ({"compare": "yesterday"}, "compare"),
        ({"names": "an invoice question goes to billing"}, "names"),
        ({"names": ["nope"]}, "names"),
        ({"limit": 3}, "limit"),
        ({"tenant": {}}, "tenant"),
        ({"compare": None}, "compare"),
        ({"names": [1]}, "names"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_stores_nothing(debug_api, suite, body, field):
    answer = debug_api.post(URL, body, format="json")

    assert answer.status_code == 400, answer.content
    assert list(answer.json()["error"]["fields"]) == [field]
    assert not ConversationTestRun.objects.exists()


def test_an_unknown_profile_is_a_404_naming_it(debug_api, suite):
    answer = debug_api.post("/api/profiles/nobody/conversation-tests/runs", {}, format="json")

    assert answer.status_code == 404 and list(answer.json()["error"]["fields"]) == ["agent_id"]


def test_a_large_suite_is_queued_with_the_url_to_read_it(debug_api, telecom, settings):
    settings.REDIS_URL = settings.REDIS_URL or "redis://127.0.0.1:1/0"  # a broker configured: the run is queued
    tests = "".join(
        f"  - name: t{number}\n    language: pt\n    turns:\n      - user: minha fatura\n"
        for number in range(QUEUE_FROM)
    )
    conversation_tests_load(
        profile=telecom,
        cases=conversation_tests_parse(f"profile: telecom_contas\nconversation_tests:\n{tests}", name="s.yaml")[1],
    )

    answer = debug_api.post(URL, {}, format="json")

    assert answer.status_code == 202
    run = ConversationTestRun.objects.get()
    assert answer.json() == {"id": run.pk, "status": "queued", "url": f"http://testserver{URL}/{run.pk}"}
    shown = debug_api.get(f"{URL}/{run.pk}").json()
    assert (shown["status"], shown["done"], shown["total"]) == ("queued", 0, QUEUE_FROM) and "results" not in shown
