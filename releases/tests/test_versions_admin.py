"""A profile's versions in the admin: the profile's page says what is live and what the draft changes,
"Publish draft" publishes it (a stale review gets a conflict message, nothing lost), the history is read-only,
compares versions and reverts; routing editors may publish and revert, and no longer delete prompt history.
"""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command

from agents.models import AgentProfile, Specialist, SpecialistPrompt
from releases.versions import version_publish
from routing.models import Keyword, PublishedFrom, RoutingVersion
from routing.selectors import live_version
from tests.adminkit import (
    change_url,
    changelist_url,
    delete_url,
    error_messages,
    form_data,
    unread_errors,
    visible_text,
)

pytestmark = pytest.mark.django_db


def publish_url(profile: AgentProfile) -> str:
    return f"/admin/agents/agentprofile/{profile.pk}/publish/"


def revert_url(version: RoutingVersion) -> str:
    return f"/admin/routing/routingversion/{version.pk}/revert/"


def add_keyword(profile: AgentProfile, word: str, intent: str = "retail_order_tracking") -> None:
    Keyword.objects.create(intent=profile.intents.get(name=intent), text=word)


def say(api, text: str, session: str) -> dict:
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": session}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()["metadata"]


def messages_of(response) -> list[str]:
    return [str(message) for message in response.context["messages"]] if response.context else []


def test_a_profile_never_published_says_edits_go_live_on_save(admin_client, telecom):
    page = admin_client.get(change_url(telecom)).content.decode()

    assert "Never published: edits go live on save" in page
    assert "Publish draft" in page


def test_the_profile_page_shows_what_the_draft_changes_against_the_live_version(admin_client, admin_user, telecom):
    version_publish(profile=telecom, user=admin_user, note="first")
    add_keyword(telecom, "modem")
    billing = Specialist.objects.get(profile=telecom, name="billing_agent")
    SpecialistPrompt.objects.filter(specialist=billing).update(is_active=False)
    SpecialistPrompt.objects.create(specialist=billing, version=99, text="Ask for the invoice month.", is_active=True)

    page = admin_client.get(change_url(telecom)).content.decode()

    assert f"Live: version 1 (published by {admin_user.get_username()} on" in page
    assert "“first”" in page
    assert "Draft differs from live: 3 change(s)." in page
    assert "keyword &#x27;modem&#x27; added to intent retail_order_tracking" in page
    assert "specialist billing_agent: prompt changed" in page
    assert "+Ask for the invoice month." in page  # the prompt's text diff


def test_saving_a_profile_and_a_specialist_unedited_as_a_browser_sends_them_leaves_nothing_to_publish(
    admin_client, telecom
):
    """A browser sends a text box's lines ended by CRLF: the policy and the prompt read as they were, so the draft
    stays the live version (it said "policy changed", and a prompt version was added)."""
    AgentProfile.objects.filter(pk=telecom.pk).update(policy="Be brief.\nNever ask for a password.")
    billing = Specialist.objects.get(profile=telecom, name="billing_agent")
    billing.prompts.filter(is_active=True).update(text="You explain invoices.\nAsk for the month first.")
    version_publish(profile=telecom, note="first")
    prompts = SpecialistPrompt.objects.count()

    for obj in (telecom, billing):
        data = form_data(admin_client.get(change_url(obj)), newline="\r\n")
        assert "\r\n" in (data.get("policy") or data.get("prompt_text"))  # as a browser sends them
        response = admin_client.post(change_url(obj), data)
        assert response.status_code == 302, error_messages(response)

    telecom.refresh_from_db()
    assert telecom.policy == "Be brief.\nNever ask for a password."
    assert SpecialistPrompt.objects.count() == prompts
    assert "The draft is the live version." in admin_client.get(change_url(telecom)).content.decode()


def test_the_profile_list_says_which_version_is_live_and_what_the_draft_holds(admin_client, telecom):
    before = admin_client.get(changelist_url(AgentProfile)).content.decode()
    assert "never published" in before and "edits go live on save" in before
    version_publish(profile=telecom, note="first")
    assert "same as live" in admin_client.get(changelist_url(AgentProfile)).content.decode()
    add_keyword(telecom, "modem")

    after = admin_client.get(changelist_url(AgentProfile)).content.decode()
    assert ">v1<" in after and "1 change(s) to publish" in after


def test_publishing_through_the_admin_makes_a_version_the_next_message_follows(api, editor_client, editor, telecom):
    version_publish(profile=telecom, note="first")
    add_keyword(telecom, "modem")
    assert say(api, "meu modem", "s-1")["intent"] != "retail_order_tracking"

    form = editor_client.get(publish_url(telecom))
    assert "keyword &#x27;modem&#x27; added to intent retail_order_tracking" in form.content.decode()
    response = editor_client.post(publish_url(telecom), {"note": "modem goes to orders", "based_on": "1"}, follow=True)

    assert any("Published telecom_contas version 2" in message for message in messages_of(response))
    version = live_version(telecom)
    assert (version.number, version.note, version.created_by) == (2, "modem goes to orders", editor)
    metadata = say(api, "meu modem", "s-2")
    assert (metadata["intent"], metadata["version"]) == ("retail_order_tracking", 2)


def test_publishing_from_a_stale_review_gives_a_conflict_message_and_keeps_the_note(admin_client, telecom):
    version_publish(profile=telecom, note="first")
    add_keyword(telecom, "modem")
    admin_client.get(publish_url(telecom))  # the editor reviews version 1 …
    add_keyword(telecom, "roteador")
    version_publish(profile=telecom, note="someone else", based_on=1)  # … while another publishes version 2

    response = admin_client.post(publish_url(telecom), {"note": "my modem change", "based_on": "1"})

    assert response.status_code == 200
    assert any("Version 2 of telecom_contas was published meanwhile" in m for m in messages_of(response))
    assert 'value="my modem change"' in response.content.decode()
    assert live_version(telecom).number == 2
    assert response.context["form"]["based_on"].value() == 2  # the page now shows what differs from version 2


def test_publishing_nothing_new_is_refused_with_a_message(admin_client, telecom):
    version_publish(profile=telecom, note="first")

    response = admin_client.post(publish_url(telecom), {"note": "again", "based_on": "1"})

    assert any("is the same as the live version 1" in message for message in messages_of(response))
    assert RoutingVersion.objects.filter(profile=telecom).count() == 1


def test_only_who_may_add_versions_may_publish(client, django_user_model, telecom):
    viewer = django_user_model.objects.create_user("viewer", password="x", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_agentprofile"))
    client.force_login(viewer)

    assert "Publish draft" not in client.get(change_url(telecom)).content.decode()
    assert client.post(publish_url(telecom), {"note": "x"}).status_code == 403
    assert not RoutingVersion.objects.exists()


def test_the_version_history_compares_a_version_with_the_one_before_the_live_one_and_the_draft(admin_client, telecom):
    first = version_publish(profile=telecom, note="first")
    add_keyword(telecom, "modem")
    second = version_publish(profile=telecom, note="modem", based_on=1)
    add_keyword(telecom, "roteador")

    listing = admin_client.get(changelist_url(RoutingVersion) + f"?profile__id__exact={telecom.pk}").content.decode()
    assert "modem" in listing and "first" in listing
    before = admin_client.get(change_url(second)).content.decode()
    assert "From version 1 (the one before) to version 2" in before
    assert "keyword &#x27;modem&#x27; added" in before
    draft = admin_client.get(change_url(first) + "?with=draft").content.decode()
    assert "From version 1 to the draft" in draft
    assert "roteador" in draft and "modem" in draft
    assert "No differences." in admin_client.get(change_url(second) + "?with=live").content.decode()


def test_a_model_endpoints_credentials_are_masked_wherever_an_editor_reads_a_versions_changes(editor_client, telecom):
    first = version_publish(profile=telecom, note="first")
    telecom.llm_base_url = "https://llmuser:llm-pa55@llm.example/v1?api_key=llm-k3y"
    telecom.save()
    second = version_publish(profile=telecom, note="own model", based_on=1)
    telecom.llm_base_url = "https://llmuser:n3w-pa55@llm.example/v1"
    telecom.save()

    pages = [
        editor_client.get(change_url(telecom)),  # the draft against the live version
        editor_client.get(change_url(second)),  # a version against the one before
        editor_client.get(change_url(first) + "?with=draft"),
        editor_client.get(revert_url(first)),  # what a revert would change
    ]

    for page in pages:
        html = page.content.decode()
        assert page.status_code == 200
        assert "https://***@llm.example/v1" in html
        assert not any(secret in html for secret in ("llm-pa55", "llm-k3y", "n3w-pa55", "llmuser")), html


def test_reverting_through_the_admin_asks_first_then_publishes_the_old_version_again(api, editor_client, telecom):
    first = version_publish(profile=telecom, note="first")
    add_keyword(telecom, "modem")
    version_publish(profile=telecom, note="modem", based_on=1)

    confirm = editor_client.get(revert_url(first)).content.decode()
    assert "Yes, revert to version 1" in confirm
    assert "keyword &#x27;modem&#x27; removed from intent retail_order_tracking" in confirm
    assert live_version(telecom).number == 2  # asking changed nothing

    response = editor_client.post(revert_url(first), follow=True)

    assert any("reverted to version 1: published as version 3" in m for m in messages_of(response))
    assert '<li class="success">telecom_contas reverted to version 1' in response.content.decode()
    assert (live_version(telecom).number, live_version(telecom).reverted_from) == (3, 1)
    assert say(api, "meu modem", "r-1")["intent"] != "retail_order_tracking"


def test_the_first_version_says_what_it_holds_instead_of_no_differences(admin_client, telecom):
    first = version_publish(profile=telecom, note="first")

    page = admin_client.get(change_url(first)).content.decode()

    assert "Version 1 is the first version. It holds:" in page
    assert "4 intents: billing_invoice_explanation, product_information, retail_order_tracking, support_request" in page
    assert "4 specialists: billing_agent, orders_agent, product_agent, support_agent" in page
    assert "No differences" not in page and "everything in it is new" not in page


@pytest.mark.parametrize(
    ("published_from", "said"),
    [
        (PublishedFrom.IMPORT, "published by an import on"),
        (PublishedFrom.COMMAND, "published from the command line on"),
        (PublishedFrom.DEMO, "published by the demo set-up on"),
        ("", "published with no user recorded on"),
    ],
)
def test_a_version_nobody_signed_says_where_it_was_published(admin_client, telecom, published_from, said):
    version = version_publish(profile=telecom, note="first", published_from=published_from)

    pages = [admin_client.get(change_url(telecom)), admin_client.get(changelist_url(RoutingVersion))]

    assert said in pages[0].content.decode()
    assert said.removeprefix("published ").removesuffix(" on") in pages[1].content.decode()
    assert all("someone" not in page.content.decode() for page in pages)
    assert version.created_by is None


def test_the_commands_and_the_import_record_where_they_published(telecom, tmp_path):
    call_command("routing_publish", "--profile", "telecom_contas", "--note", "from the shell", stdout=StringIO())
    add_keyword(telecom, "modem")
    call_command("routing_revert", "--profile", "telecom_contas", "--to", "1", stdout=StringIO())
    path = tmp_path / "routing.telecom_contas.yaml"
    path.write_text(
        "agent_id: telecom_contas\nintents:\n  - name: retail_order_tracking\n    domain: retail\n"
        "    agent: orders_agent\n    priority: 21\n    keywords: [pedido, entrega, rastreio, atraso, modem]\n"
    )
    call_command("import_config", str(path), "--publish", stdout=StringIO(), stderr=StringIO())

    assert list(RoutingVersion.objects.order_by("number").values_list("published_from", flat=True)) == [
        PublishedFrom.COMMAND,
        PublishedFrom.COMMAND,
        PublishedFrom.IMPORT,
    ]


def test_the_version_admin_refuses_adds_edits_and_deletes(admin_client, telecom):
    version = version_publish(profile=telecom, note="first")

    assert admin_client.get("/admin/routing/routingversion/add/").status_code == 403
    page = admin_client.get(change_url(version)).content.decode()
    assert 'name="_save"' not in page
    admin_client.post(change_url(version), {"note": "rewritten"})
    assert admin_client.post(delete_url(version), {"post": "yes"}).status_code == 403
    version.refresh_from_db()
    assert version.note == "first"


def test_an_editor_cannot_delete_prompt_history(editor_client, telecom):
    billing = Specialist.objects.get(profile=telecom, name="billing_agent")
    old = SpecialistPrompt.objects.create(specialist=billing, version=50, text="Old.", is_active=False)

    assert editor_client.post(delete_url(old), {"post": "yes"}).status_code == 403
    assert SpecialistPrompt.objects.filter(pk=old.pk).exists()


PREVIEW_URL = "/admin/routing/intent/preview/"


def test_the_route_preview_tries_the_draft_and_says_which_version_the_live_preview_used(editor_client, telecom):
    version_publish(profile=telecom, note="first")
    add_keyword(telecom, "modem")
    asked = {"profile": telecom.pk, "text": "meu modem"}

    live = editor_client.get(PREVIEW_URL, {**asked, "version": "live"})
    draft = editor_client.get(PREVIEW_URL, {**asked, "version": "draft"})

    assert live.context["preview"].decision.intent != "retail_order_tracking"
    assert "Decided with live version 1" in live.content.decode()
    assert draft.context["preview"].decision.intent == "retail_order_tracking"
    assert "Decided with the draft (not yet published)" in draft.content.decode()
    assert "configuration version" not in live.content.decode()  # an internal counter, not a version people know


def test_the_route_preview_of_a_profile_never_published_says_customers_get_the_draft(editor_client, telecom):
    response = editor_client.get(PREVIEW_URL, {"profile": telecom.pk, "text": "minha fatura"})

    assert "Decided with the draft (never published: customers are served it too)" in response.content.decode()


# -- the Specialist drop-down of an intent or a state policy: the profile's own ------------------------------


@pytest.fixture
def other_profile():
    from tests.factories import AgentProfileFactory, SpecialistFactory

    profile = AgentProfileFactory(agent_id="retail_orders", name="Retail")
    SpecialistFactory(profile=profile, name="returns_agent")
    return profile


def specialist_choices_of(response) -> list[str]:
    field = response.context["adminform"].form.fields["specialist"]
    return [label for value, label in field.choices if value]


def test_an_intents_specialist_drop_down_lists_its_profiles_specialists_only(editor_client, telecom, other_profile):
    from routing.models import Intent

    intent = Intent.objects.get(profile=telecom, name="billing_invoice_explanation")

    choices = specialist_choices_of(editor_client.get(change_url(intent)))

    assert choices and all(label.startswith("telecom_contas/") for label in choices)
    assert "retail_orders/returns_agent" not in editor_client.get(change_url(intent)).content.decode()


def test_an_add_page_opened_for_a_profile_lists_its_specialists_and_without_one_lists_all(
    editor_client, telecom, other_profile
):
    scoped = specialist_choices_of(editor_client.get(f"/admin/routing/intent/add/?profile={other_profile.pk}"))
    everyone = specialist_choices_of(editor_client.get("/admin/routing/intent/add/"))
    not_a_number = specialist_choices_of(editor_client.get("/admin/routing/intent/add/?profile=²"))  # was a 500

    assert scoped == ["retail_orders/returns_agent"]
    assert "retail_orders/returns_agent" in everyone and "telecom_contas/billing_agent" in everyone
    assert not_a_number == everyone


def test_a_state_policys_specialist_and_intent_drop_downs_are_its_profiles(admin_client, telecom, other_profile):
    from routing.models import Intent, StatePolicy

    policy = StatePolicy.objects.create(
        profile=telecom,
        state="WAITING",
        specialist=Specialist.objects.get(profile=telecom, name="billing_agent"),
        intent=Intent.objects.get(profile=telecom, name="billing_invoice_explanation"),
    )
    form = admin_client.get(change_url(policy)).context["adminform"].form

    assert {s.profile_id for s in form.fields["specialist"].queryset} == {telecom.pk}
    assert {i.profile_id for i in form.fields["intent"].queryset} == {telecom.pk}


# -- the publishing gate, through the admin --------------------------------------------------------------------


@pytest.fixture
def modem_test(telecom):
    from releases.models import RoutingTestCase

    return RoutingTestCase.objects.create(
        profile=telecom, name="modem goes to orders", message="meu modem", expect={"intent": "retail_order_tracking"}
    )


def test_failing_routing_tests_refuse_an_editors_publish_with_a_message(editor_client, telecom, modem_test):
    page = editor_client.get(publish_url(telecom)).content.decode()
    assert "forced_reason" not in page  # editors may not publish failing versions

    response = editor_client.post(publish_url(telecom), {"note": "try", "based_on": ""})

    assert any("1 of 1 routing tests of telecom_contas fail" in m for m in messages_of(response))
    assert live_version(telecom) is None


def test_who_may_publish_failing_versions_gives_a_reason_and_the_version_keeps_it(admin_client, telecom, modem_test):
    response = admin_client.post(
        publish_url(telecom), {"note": "urgent", "based_on": "", "forced_reason": "The modem fix comes tomorrow."}
    )

    assert response.status_code == 302
    version = live_version(telecom)
    assert version.forced_reason == "The modem fix comes tomorrow."
    page = admin_client.get(change_url(version)).content.decode()
    assert "0 passed, 1 failed (published anyway)" in page


def test_a_version_named_by_a_digit_that_is_not_a_number_compares_with_the_one_before(admin_client, telecom):
    version_publish(profile=telecom, note="first")
    add_keyword(telecom, "modem")
    second = version_publish(profile=telecom, note="modem", based_on=1)

    response = admin_client.get(change_url(second) + "?with=²")  # a digit to str.isdigit, not to int (was a 500)

    assert response.status_code == 200
    assert "From version 1 (the one before) to version 2" in response.content.decode()


def test_an_error_of_an_input_the_publish_page_does_not_show_is_said_on_it(editor_client, telecom):
    # The live version the page was drawn on travels in a hidden input, and an editor is given no box for a reason
    # to publish failing tests: a post refused for either must say why on the page, not only "correct the errors".
    add_keyword(telecom, "modem")

    answer = editor_client.post(publish_url(telecom), {"note": "try", "based_on": "one", "forced_reason": "Because."})

    assert answer.status_code == 200 and live_version(telecom) is None
    assert unread_errors(answer) == []
    assert "Based on: Enter a whole number." in visible_text(answer.content.decode())

    answer = editor_client.post(publish_url(telecom), {"note": "try", "based_on": "", "forced_reason": "Because."})

    assert answer.status_code == 200 and live_version(telecom) is None
    assert unread_errors(answer) == []
