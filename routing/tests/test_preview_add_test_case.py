"""The route preview's "Add as routing test case": the previewed message, state, specialist and decision become
a saved routing test's pre-filled add form, for users who may add one."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from agents.models import Specialist
from routing.forms import expect_field

pytestmark = pytest.mark.django_db

PREVIEW_URL = "/admin/routing/intent/preview/"


def test_the_preview_links_the_add_form_filled_with_the_previewed_message_and_decision(editor_client, telecom):
    billing = Specialist.objects.get(profile=telecom, name="billing_agent")
    response = editor_client.get(
        PREVIEW_URL,
        {"profile": telecom.pk, "text": "Minha fatura veio alta", "state": "WAITING", "active_specialist": billing.pk},
    )
    preview = response.context["preview"]
    assert 'id="route-add-test-case"' in response.content.decode()

    form = editor_client.get(preview.test_case_url).context["adminform"].form

    assert form.initial["profile"] == str(telecom.pk)
    assert (form.initial["message"], form.initial["state"], form.initial["active_specialist"]) == (
        "Minha fatura veio alta",
        "WAITING",
        "billing_agent",
    )
    assert (form.initial[expect_field("intent")], form.initial[expect_field("agent")]) == (
        preview.decision.intent,
        preview.decision.agent,
    )


def test_a_previewed_conversation_links_a_test_whose_earlier_turns_are_its_earlier_messages(editor_client, telecom):
    response = editor_client.get(
        PREVIEW_URL,
        {"profile": telecom.pk, "text": "antes disso, qual o vencimento?", "earlier": "Quero pagar com pix"},
    )
    preview = response.context["preview"]
    first = preview.conversation.earlier[0].decision

    form = editor_client.get(preview.test_case_url).context["adminform"].form

    assert form.initial["message"] == "antes disso, qual o vencimento?"
    assert form.initial["turns"] == f"Quero pagar com pix | intent: {first.intent}; specialist: {first.agent}"


def test_a_user_who_may_not_add_tests_gets_no_link(client, django_user_model, telecom):
    viewer = django_user_model.objects.create_user("viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_intent"))
    client.force_login(viewer)

    response = client.get(PREVIEW_URL, {"profile": telecom.pk, "text": "Minha fatura veio alta"})

    assert response.context["preview"] is not None
    assert response.context["preview"].test_case_url == ""
    assert 'id="route-add-test-case"' not in response.content.decode()


def test_the_add_forms_expectation_fields_show_the_decision(editor_client, telecom):
    response = editor_client.get(PREVIEW_URL, {"profile": telecom.pk, "text": "Minha fatura veio alta"})
    form = editor_client.get(response.context["preview"].test_case_url).context["adminform"].form

    assert form[expect_field("intent")].value() == "billing_invoice_explanation"
    assert form[expect_field("agent")].value() == "billing_agent"
    assert "expect" not in form.fields
