"""Publishing and reverting apply only what the acting user may change: a version whose model endpoint, model or key
variable differs from what customers are served is published only by a user with the operator's permission (the
admin's page, ``routing_publish`` and ``routing_revert`` with ``--user``; without it the command is the operator's),
and a version naming a key variable outside the allow-list is published by no one."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from agents.models import MODEL_ENDPOINT_PERMISSION, AgentProfile
from releases.versions import ModelSettingsForbidden, version_publish, version_revert
from routing.models import RoutingVersion

pytestmark = pytest.mark.django_db

OWN_ENDPOINT = "https://llm.example/v1"


@pytest.fixture
def published(telecom, admin_user):
    version_publish(profile=telecom, user=admin_user, note="first")
    return telecom


@pytest.fixture
def endpoint_in_the_draft(published):
    """An operator gave the profile its own endpoint and model in the admin; the draft is not published yet."""
    AgentProfile.objects.filter(pk=published.pk).update(llm_base_url=OWN_ENDPOINT, llm_model="billing-model")
    published.refresh_from_db()
    return published


def publish_url(profile: AgentProfile) -> str:
    return reverse("admin:agents_agentprofile_publish", args=[profile.pk])


def versions(profile: AgentProfile) -> list[int]:
    return list(RoutingVersion.objects.filter(profile=profile).order_by("number").values_list("number", flat=True))


def admin_messages(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_an_editor_may_not_publish_a_draft_whose_model_settings_an_operator_changed(
    editor_client, endpoint_in_the_draft
):
    page = editor_client.get(publish_url(endpoint_in_the_draft))
    assert MODEL_ENDPOINT_PERMISSION in page.context["refusal"]

    response = editor_client.post(publish_url(endpoint_in_the_draft), {"note": "mine", "based_on": "1"}, follow=True)

    (message,) = [m for m in admin_messages(response) if MODEL_ENDPOINT_PERMISSION in m]
    assert "llm_base_url" in message and "llm_model" in message and "llm_api_key_env" not in message
    assert versions(endpoint_in_the_draft) == [1]


def test_an_operator_publishes_it(admin_client, endpoint_in_the_draft):
    assert admin_client.get(publish_url(endpoint_in_the_draft)).context["refusal"] == ""
    response = admin_client.post(publish_url(endpoint_in_the_draft), {"note": "own model", "based_on": "1"})

    assert response.status_code == 302
    assert versions(endpoint_in_the_draft) == [1, 2]


def test_an_editor_still_publishes_what_they_may_change(editor_client, published):
    published.intents.filter(name="retail_order_tracking").update(priority=5)

    response = editor_client.post(publish_url(published), {"note": "priority", "based_on": "1"})

    assert response.status_code == 302
    assert versions(published) == [1, 2]


def test_routing_publish_applies_the_permissions_of_its_user(editor, endpoint_in_the_draft):
    with pytest.raises(CommandError) as refused:
        call_command("routing_publish", profile="telecom_contas", user="editor", stdout=StringIO())
    assert MODEL_ENDPOINT_PERMISSION in str(refused.value) and "llm_base_url" in str(refused.value)
    assert versions(endpoint_in_the_draft) == [1]

    call_command("routing_publish", profile="telecom_contas", stdout=StringIO())  # the operator, at the shell

    assert versions(endpoint_in_the_draft) == [1, 2]


def test_reverting_across_a_model_change_needs_the_operators_permission(
    editor, editor_client, admin_user, endpoint_in_the_draft
):
    version_publish(profile=endpoint_in_the_draft, user=admin_user, note="own endpoint")
    first = RoutingVersion.objects.get(profile=endpoint_in_the_draft, number=1)

    response = editor_client.post(reverse("admin:routing_routingversion_revert", args=[first.pk]), follow=True)
    assert any(MODEL_ENDPOINT_PERMISSION in message for message in admin_messages(response))
    with pytest.raises(CommandError, match=MODEL_ENDPOINT_PERMISSION):
        call_command("routing_revert", profile="telecom_contas", to=1, user="editor", stdout=StringIO())
    with pytest.raises(ModelSettingsForbidden):
        version_revert(profile=endpoint_in_the_draft, to=1, user=editor)
    assert versions(endpoint_in_the_draft) == [1, 2]

    call_command("routing_revert", profile="telecom_contas", to=1, stdout=StringIO())

    assert versions(endpoint_in_the_draft) == [1, 2, 3]


def test_a_draft_naming_a_platform_secret_as_its_model_key_is_published_by_no_one(admin_client, published):
    AgentProfile.objects.filter(pk=published.pk).update(llm_api_key_env="DJANGO_SECRET_KEY")  # stored before the rule

    response = admin_client.post(publish_url(published), {"note": "x", "based_on": "1"}, follow=True)
    assert any("DJANGO_SECRET_KEY" in message for message in admin_messages(response))
    with pytest.raises(CommandError, match="DJANGO_SECRET_KEY"):
        call_command("routing_publish", profile="telecom_contas", stdout=StringIO())

    assert versions(published) == [1]
