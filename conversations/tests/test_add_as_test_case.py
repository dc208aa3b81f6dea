"""A real misroute becomes a saved routing test in two clicks: "Add as routing test case" on a stored
route decision or user message opens the test's add form pre-filled with the message, the customer's earlier
messages of the conversation as its earlier turns (each expecting what was decided for it), and what was decided;
the editor corrects the expectation and saves. The decision list's action saves the selected decisions as cases
directly."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission

from conversations.models import Message, RouteDecisionRecord
from releases.models import RoutingTestCase
from routing.forms import expect_field
from tenants.models import TenantGrant

pytestmark = pytest.mark.django_db

LINK = 'id="add-routing-test-case"'


def say(api, text, session="t-1"):
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": session}},
        format="json",
    )
    assert response.status_code == 200, response.content


def decision_of(text: str) -> RouteDecisionRecord:
    return RouteDecisionRecord.objects.select_related("message").get(message__content=text)


@pytest.fixture
def stored(api, telecom):
    say(api, "Minha fatura veio alta")
    say(api, "quero rastrear meu pedido")
    return decision_of("quero rastrear meu pedido")


@pytest.fixture
def reader(editor, tenant):
    """A routing editor who may also read the conversation store, and tenant_a's conversations."""
    editor.user_permissions.add(*Permission.objects.filter(codename__in=["view_routedecisionrecord", "view_message"]))
    TenantGrant.objects.create(tenant=tenant, user=editor, read_conversations=True)
    return editor


def auditor_of(django_user_model, tenant):
    """Staff who may read tenant_a's route decisions and add no routing test."""
    auditor = django_user_model.objects.create_user("auditor", is_staff=True)
    auditor.user_permissions.add(Permission.objects.get(codename="view_routedecisionrecord"))
    TenantGrant.objects.create(tenant=tenant, user=auditor, read_conversations=True)
    return auditor


def add_form_of(client, page: str):
    url = re.search(r'<a href="([^"]+)" class="addlink" ' + LINK, page).group(1).replace("&amp;", "&")
    response = client.get(url)
    assert response.status_code == 200
    return response.context["adminform"].form


def test_a_decisions_link_opens_the_add_form_filled_with_the_message_and_what_was_decided(client, reader, stored):
    client.force_login(reader)
    page = client.get(f"/admin/conversations/routedecisionrecord/{stored.pk}/change/").content.decode()

    form = add_form_of(client, page)

    assert form.initial["profile"] == str(stored.conversation.profile_id)
    assert form.initial["message"] == "quero rastrear meu pedido"
    assert form.initial["name"].startswith("quero rastrear meu pedido (")
    first = decision_of("Minha fatura veio alta")
    # The conversation is played from its start: the earlier message is a turn, expecting what was decided then.
    assert form.initial["turns"] == f"Minha fatura veio alta | intent: {first.intent}; specialist: {first.agent}"
    assert "active_specialist" not in form.initial and "state" not in form.initial
    assert form.initial[expect_field("intent")] == stored.intent  # the add form starts from the decided values


def test_saving_the_corrected_form_creates_the_case(client, reader, stored):
    client.force_login(reader)
    page = client.get(f"/admin/conversations/routedecisionrecord/{stored.pk}/change/").content.decode()
    form = add_form_of(client, page)

    response = client.post(
        "/admin/releases/routingtestcase/add/",
        {
            **form.initial,
            expect_field("intent"): "retail_order_tracking",
            expect_field("agent"): "orders_agent",
            "enabled": "on",
        },
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    case = RoutingTestCase.objects.get()
    first = decision_of("Minha fatura veio alta")
    assert (case.message, case.active_specialist) == ("quero rastrear meu pedido", "")
    assert case.turns == [
        {"message": "Minha fatura veio alta", "expect": {"intent": first.intent, "agent": first.agent}}
    ]
    assert case.expect == {"intent": "retail_order_tracking", "agent": "orders_agent"}
    # Which message it came from and what was decided for it stay with the test: a correction the analytics count.
    assert (case.source_message_id, case.source_intent, case.source_agent) == (
        stored.message_id,
        stored.intent,
        stored.agent,
    )


def test_a_user_messages_page_has_the_link_too(client, reader, stored):
    client.force_login(reader)
    message = Message.objects.get(content="Minha fatura veio alta")

    form = add_form_of(client, client.get(f"/admin/conversations/message/{message.pk}/change/").content.decode())

    assert form.initial["message"] == "Minha fatura veio alta"
    assert "active_specialist" not in form.initial  # the conversation's first message: nobody answered yet


def test_a_superuser_sees_the_link_and_a_reader_who_may_not_add_tests_does_not(
    client, staff_user, django_user_model, tenant, stored
):
    url = f"/admin/conversations/routedecisionrecord/{stored.pk}/change/"
    client.force_login(staff_user)
    assert LINK in client.get(url).content.decode()

    client.force_login(auditor_of(django_user_model, tenant))
    page = client.get(url)
    assert page.status_code == 200 and LINK not in page.content.decode()


def test_the_action_saves_the_selected_decisions_as_cases_expecting_what_was_decided(client, reader, stored):
    client.force_login(reader)
    first = decision_of("Minha fatura veio alta")

    response = client.post(
        "/admin/conversations/routedecisionrecord/",
        {"action": "add_as_routing_test_cases", "_selected_action": [first.pk, stored.pk]},
        follow=True,
    )

    assert "2 routing test case(s) added" in response.content.decode()
    cases = {case.message: case for case in RoutingTestCase.objects.all()}
    assert cases["Minha fatura veio alta"].expect == {"intent": first.intent, "agent": first.agent}
    assert [turn["message"] for turn in cases["quero rastrear meu pedido"].turns] == ["Minha fatura veio alta"]
    assert cases["Minha fatura veio alta"].turns == []  # the conversation's first message: a single message
    assert len({case.name for case in cases.values()}) == 2
    assert cases["Minha fatura veio alta"].source_message_id == first.message_id
    assert cases["Minha fatura veio alta"].source_intent == first.intent


def test_the_action_is_not_offered_to_a_reader_who_may_not_add_tests(client, django_user_model, tenant, stored):
    client.force_login(auditor_of(django_user_model, tenant))

    page = client.get("/admin/conversations/routedecisionrecord/").content.decode()

    assert "add_as_routing_test_cases" not in page


def test_a_page_of_no_record_is_a_404_as_another_tenants_record_is(client, reader, stored):
    client.force_login(reader)

    assert client.get("/admin/conversations/routedecisionrecord/not-a-number/change/").status_code == 404
    assert client.get(f"/admin/conversations/routedecisionrecord/{stored.pk + 1000}/change/").status_code == 404
