"""Editing routing content in the admin, as an editor meets it: the keyword form's intent picker names each intent's
profile (two profiles' "support_request" are told apart), the intent's examples box is tall and says who reads it,
and a save in a profile customers are served a published version of says it went to the draft, with a link to
publish it."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from agents.models import Specialist
from releases.versions import version_publish
from routing.forms import INTENT_EXAMPLES_HELP
from routing.models import Intent, Keyword, StatePolicy
from tests.adminkit import add_url, change_url, form_data
from tests.factories import AgentProfileFactory, IntentFactory, SpecialistFactory

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

DRAFT_NOTE = "Saved to the draft of telecom_contas"


@pytest.fixture
def twin(telecom):
    """A second profile with its own "support_request"."""
    profile = AgentProfileFactory(agent_id="retail_orders")
    IntentFactory(profile=profile, name="support_request", specialist=SpecialistFactory(profile=profile, name="desk"))
    return profile


def picker_url(page: str) -> str:
    """The address the keyword form's intent picker asks for its choices."""
    select = re.search(r'<select[^>]*name="intent"[^>]*>', page).group(0)
    return re.search(r'data-ajax--url="([^"]+)"', select).group(1)


def test_the_keyword_forms_intent_picker_names_each_intents_profile(editor_client, twin):
    page = editor_client.get(add_url(Keyword)).content.decode()
    params = {"app_label": "routing", "model_name": "keyword", "field_name": "intent", "term": "support_request"}

    found = editor_client.get(picker_url(page), params).json()["results"]

    assert sorted(result["text"] for result in found) == [
        "retail_orders/support_request",
        "telecom_contas/support_request",
    ]


def test_the_picker_narrows_to_a_profile_by_its_name(editor_client, twin):
    page = editor_client.get(add_url(Keyword)).content.decode()
    params = {"app_label": "routing", "model_name": "keyword", "field_name": "intent", "term": "retail_orders support"}

    found = editor_client.get(picker_url(page), params).json()["results"]

    assert [result["text"] for result in found] == ["retail_orders/support_request"]


def test_a_stored_keywords_intent_is_shown_with_its_profile(editor_client, twin):
    keyword = Keyword.objects.create(intent=Intent.objects.get(profile=twin, name="support_request"), text="ajuda")

    page = editor_client.get(change_url(keyword)).content.decode()

    assert re.search(r'<option value="\d+" selected>retail_orders/support_request</option>', page)


def test_a_user_who_may_not_view_intents_gets_no_choices_from_the_picker(client, django_user_model, twin):
    clerk = django_user_model.objects.create_user("clerk", is_staff=True)
    clerk.user_permissions.add(Permission.objects.get(codename="view_keyword"))
    client.force_login(clerk)
    params = {"app_label": "routing", "model_name": "keyword", "field_name": "intent", "term": "support"}

    assert client.get(reverse("admin:routing_intent_autocomplete"), params).status_code == 403


def test_the_intents_examples_box_is_tall_and_says_the_examples_tier_reads_it_first(editor_client, telecom):
    intent = Intent.objects.get(profile=telecom, name="support_request")

    response = editor_client.get(change_url(intent))
    page = response.content.decode()

    box = re.search(r'<textarea[^>]*name="examples"[^>]*>', page).group(0)
    assert 'rows="15"' in box
    assert response.context["adminform"].form.fields["examples"].help_text == INTENT_EXAMPLES_HELP
    assert (
        "examples tier reads them first" in INTENT_EXAMPLES_HELP
        and "where the profile switches" in INTENT_EXAMPLES_HELP
    )


def save(client, obj):
    response = client.get(change_url(obj))
    return client.post(change_url(obj), form_data(response), follow=True)


def messages_of(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


@pytest.mark.parametrize("model", [Intent, Keyword, StatePolicy])
def test_a_save_in_a_published_profile_says_it_went_to_the_draft_with_a_link_to_publish(editor_client, telecom, model):
    version_publish(profile=telecom, note="live")
    billing = Intent.objects.get(profile=telecom, name="billing_invoice_explanation")
    obj = {
        Intent: billing,
        Keyword: billing.keywords.first(),
        StatePolicy: StatePolicy.objects.create(
            profile=telecom, state="WAITING", specialist=Specialist.objects.get(profile=telecom, name="billing_agent")
        ),
    }[model]

    response = save(editor_client, obj)

    notes = [message for message in messages_of(response) if DRAFT_NOTE in message]
    assert len(notes) == 1, messages_of(response)
    publish = reverse("admin:agents_agentprofile_publish", args=[telecom.pk])
    assert notes[0] == f'{DRAFT_NOTE} — <a href="{publish}">publish</a> to serve it.'
    assert editor_client.get(publish).status_code == 200  # the link works for the editor it is shown to


def test_a_new_intent_in_a_published_profile_gets_the_note_too(editor_client, telecom):
    version_publish(profile=telecom, note="live")
    data = form_data(editor_client.get(add_url(Intent) + f"?profile={telecom.pk}"))
    data.update(
        name="cancelamento",
        specialist=str(Specialist.objects.get(profile=telecom, name="support_agent").pk),
        priority="50",
    )

    response = editor_client.post(add_url(Intent), data, follow=True)

    assert Intent.objects.filter(profile=telecom, name="cancelamento").exists()
    assert any(DRAFT_NOTE in message for message in messages_of(response))


def test_a_profile_never_published_serves_its_edits_at_once_and_gets_no_note(editor_client, telecom):
    response = save(editor_client, Intent.objects.get(profile=telecom, name="support_request"))

    assert not any("draft" in message for message in messages_of(response))


def test_a_user_who_may_not_publish_is_told_without_a_link(client, django_user_model, telecom):
    version_publish(profile=telecom, note="live")
    writer = django_user_model.objects.create_user("writer", is_staff=True)
    writer.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_intent", "change_intent", "view_keyword", "add_keyword"])
    )
    client.force_login(writer)

    response = save(client, Intent.objects.get(profile=telecom, name="support_request"))

    notes = [message for message in messages_of(response) if DRAFT_NOTE in message]
    assert notes == [f"{DRAFT_NOTE}: customers get it once it is published."]
