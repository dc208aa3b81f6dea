"""The agents admin: profiles, specialists, prompt versions with revert, MCP servers and tools.

Every page's smoke test (list, search, add, change) is in ``tests/test_admin_smoke.py``.
"""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from agents.admin.profiles import ERROR_COORDINATOR_OTHER_PROFILE
from agents.models import McpServer, McpTool, Specialist, SpecialistPrompt
from agents.services import prompt_version_create
from common.models import ConfigVersion
from tests.adminkit import add_url, change_url, changelist_url, delete_url, error_messages, form_data
from tests.factories import SpecialistFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def billing(telecom) -> Specialist:
    return Specialist.objects.get(profile=telecom, name="billing_agent")


@pytest.fixture
def versions(billing, staff_user) -> list[SpecialistPrompt]:
    """billing_agent with three versions; v3 is active."""
    prompt_version_create(specialist=billing, text="You explain invoices.\nBe brief.", note="second", user=staff_user)
    prompt_version_create(
        specialist=billing, text="You explain invoices.\nBe brief and kind.", note="third", user=staff_user
    )
    return list(billing.prompts.order_by("version"))


def activate_url(prompt: SpecialistPrompt) -> str:
    return reverse("admin:agents_specialistprompt_activate", args=[prompt.pk])


# -- adding -----------------------------------------------------------------------------


def test_adding_a_specialist_with_a_prompt_creates_its_first_version(staff_client, telecom):
    data = form_data(staff_client.get(add_url(Specialist)))
    data.update(
        {
            "profile": telecom.pk,
            "name": "retention_agent",
            "prompt_text": "You keep customers.",
            "prompt_note": "first",
            "allowed_tools": [McpTool.objects.get(name="consultar_fatura").pk],
        }
    )
    response = staff_client.post(add_url(Specialist), data)
    assert response.status_code == 302, error_messages(response)
    specialist = Specialist.objects.get(name="retention_agent")
    prompt = specialist.prompts.get()
    assert (prompt.version, prompt.text, prompt.note, prompt.is_active) == (1, "You keep customers.", "first", True)
    assert list(specialist.allowed_tools.values_list("name", flat=True)) == ["consultar_fatura"]


def test_adding_a_prompt_version_creates_the_next_active_version(staff_client, billing, staff_user):
    data = form_data(staff_client.get(add_url(SpecialistPrompt)))
    data.update({"specialist": billing.pk, "text": "You explain invoices in detail.", "note": "more detail"})
    response = staff_client.post(add_url(SpecialistPrompt), data)
    assert response.status_code == 302, error_messages(response)
    active = billing.prompts.get(is_active=True)
    assert (active.version, active.text, active.created_by) == (2, "You explain invoices in detail.", staff_user)
    assert billing.prompts.count() == 2


def test_a_prompt_version_can_be_added_as_a_draft(staff_client, billing):
    data = form_data(staff_client.get(add_url(SpecialistPrompt)))
    data.update({"specialist": billing.pk, "text": "Draft."})
    del data["activate"]
    assert staff_client.post(add_url(SpecialistPrompt), data).status_code == 302
    assert billing.prompts.get(is_active=True).version == 1
    assert billing.prompts.get(version=2).text == "Draft."


def test_the_new_version_page_starts_from_the_active_text(staff_client, versions, billing):
    response = staff_client.get(add_url(SpecialistPrompt), {"specialist": billing.pk})
    assert response.context["adminform"].form.initial["text"] == versions[-1].text


def test_adding_a_server_and_a_tool_with_a_shorthand_schema(staff_client):
    data = form_data(staff_client.get(add_url(McpServer)))
    data.update({"name": "billing_mcp", "endpoint": "http://127.0.0.1:8300/mcp"})
    assert staff_client.post(add_url(McpServer), data).status_code == 302
    server = McpServer.objects.get(name="billing_mcp")

    data = form_data(staff_client.get(add_url(McpTool)))
    data.update({"name": "segunda_via", "server": server.pk, "args_schema": '{"msisdn": "string"}'})
    response = staff_client.post(add_url(McpTool), data)
    assert response.status_code == 302, error_messages(response)
    assert McpTool.objects.get(name="segunda_via").args_schema == {
        "type": "object",
        "properties": {"msisdn": {"type": "string"}},
    }


# -- prompts: never edited, reverted in one click ---------------------------------------------


def test_a_stored_prompt_version_is_read_only(staff_client, versions):
    older = versions[0]
    response = staff_client.get(change_url(older))
    assert response.context["adminform"].form.fields == {}
    page = response.content.decode()
    assert 'name="_save"' not in page
    assert activate_url(older) in page

    assert staff_client.post(change_url(older), {"text": "rewritten"}).status_code == 302
    older.refresh_from_db()
    assert older.text.startswith("You are billing_agent")


def test_reverting_makes_an_older_version_active_again(staff_client, versions, billing):
    first = versions[0]
    response = staff_client.post(activate_url(first), follow=True)
    assert response.status_code == 200
    assert any(
        "Version 1 of telecom_contas/billing_agent is now active." in str(m) for m in response.context["messages"]
    )
    assert billing.prompts.get(is_active=True) == first
    assert billing.prompts.count() == 3


def test_the_revert_returns_to_the_specialist_page_it_was_clicked_on(staff_client, versions, billing):
    specialist_page = change_url(billing)
    response = staff_client.get(specialist_page)
    assert f"{activate_url(versions[0])}?next=" in response.content.decode()
    response = staff_client.post(f"{activate_url(versions[0])}?next={specialist_page}")
    assert response["Location"] == specialist_page
    response = staff_client.post(f"{activate_url(versions[1])}?next=https://evil.example/")
    assert response["Location"] == change_url(versions[1])


def test_the_revert_view_refuses_get(staff_client, versions):
    assert staff_client.get(activate_url(versions[0])).status_code == 405


def test_the_make_active_action_reverts_one_version_per_specialist(staff_client, versions, billing):
    url = changelist_url(SpecialistPrompt)
    staff_client.post(url, {"action": "make_active", "_selected_action": [versions[1].pk]})
    assert billing.prompts.get(is_active=True) == versions[1]

    response = staff_client.post(
        url, {"action": "make_active", "_selected_action": [versions[0].pk, versions[2].pk]}, follow=True
    )
    assert any("Choose one version" in str(m) for m in response.context["messages"])
    assert billing.prompts.get(is_active=True) == versions[1]


def test_an_older_version_shows_its_diff_against_the_active_one(staff_client, versions):
    page = staff_client.get(change_url(versions[1])).content.decode()
    assert "v3 (active)" in page
    assert "-Be brief and kind." in page
    assert "+Be brief." in page
    active_page = staff_client.get(change_url(versions[2])).content.decode()
    assert "This is the active version." in active_page


def test_the_active_version_cannot_be_deleted(staff_client, versions):
    active = versions[-1]
    assert staff_client.post(delete_url(active), {"post": "yes"}).status_code == 403
    assert staff_client.post(delete_url(versions[0]), {"post": "yes"}).status_code == 302
    assert SpecialistPrompt.objects.filter(pk=active.pk).exists()


def test_editing_the_prompt_on_the_specialist_page_creates_a_new_version(staff_client, billing):
    data = form_data(staff_client.get(change_url(billing)))
    data.update({"prompt_text": "You explain invoices, politely.", "prompt_note": "politer"})
    response = staff_client.post(change_url(billing), data)
    assert response.status_code == 302, error_messages(response)
    active = billing.prompts.get(is_active=True)
    assert (active.version, active.text, active.note) == (2, "You explain invoices, politely.", "politer")


def test_saving_a_specialist_without_touching_the_prompt_creates_no_version(staff_client, billing):
    data = form_data(staff_client.get(change_url(billing)))
    data["display_name"] = "Billing"
    assert staff_client.post(change_url(billing), data).status_code == 302
    assert billing.prompts.count() == 1


def test_handoff_targets_must_be_specialists_of_the_same_profile(staff_client, billing):
    stranger = SpecialistFactory(profile__agent_id="retail_orders", name="orders_agent")
    form = staff_client.get(change_url(billing)).context["adminform"].form
    choices = {specialist.name for specialist in form.fields["handoff_targets"].queryset}
    assert choices == {"orders_agent", "product_agent", "support_agent"}
    assert stranger not in form.fields["handoff_targets"].queryset


def test_the_fallback_specialist_is_chosen_among_the_profile_own(staff_client, telecom):
    SpecialistFactory(profile__agent_id="retail_orders", name="stranger_agent")
    form = staff_client.get(change_url(telecom)).context["adminform"].form
    names = {specialist.name for specialist in form.fields["fallback_specialist"].queryset}
    assert names == {"billing_agent", "orders_agent", "product_agent", "support_agent"}


# -- profiles: delegation, loop safety, conversation words --------------------------------


@pytest.fixture
def stranger() -> Specialist:
    return SpecialistFactory(profile__agent_id="retail_orders", name="stranger_agent")


def post_profile(client, profile, **changes):
    data = form_data(client.get(change_url(profile)))
    data.update(changes)
    return client.post(change_url(profile), data)


def test_the_coordinator_is_chosen_among_the_profile_own_specialists(staff_client, telecom, stranger):
    form = staff_client.get(change_url(telecom)).context["adminform"].form
    names = {specialist.name for specialist in form.fields["coordinator"].queryset}
    assert names == {"billing_agent", "orders_agent", "product_agent", "support_agent"}


def test_a_coordinator_of_the_same_profile_can_be_set_on_the_profile_page(staff_client, telecom):
    support = Specialist.objects.get(profile=telecom, name="support_agent")
    response = post_profile(staff_client, telecom, coordinator=support.pk)
    assert response.status_code == 302, error_messages(response)
    telecom.refresh_from_db()
    assert telecom.coordinator == support

    response = post_profile(staff_client, telecom, coordinator="")
    assert response.status_code == 302, error_messages(response)
    telecom.refresh_from_db()
    assert telecom.coordinator is None


def test_a_coordinator_of_another_profile_is_refused_naming_the_field(staff_client, telecom, stranger):
    response = post_profile(staff_client, telecom, coordinator=stranger.pk)
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["coordinator"] == [ERROR_COORDINATOR_OTHER_PROFILE]
    assert "coordinator" in ERROR_COORDINATOR_OTHER_PROFILE
    telecom.refresh_from_db()
    assert telecom.coordinator is None


def test_loop_safety_limits_and_word_lists_are_saved_from_the_profile_page(staff_client, telecom):
    data = form_data(staff_client.get(change_url(telecom)))
    del data["block_ping_pong"]  # unticked
    data.update(
        {
            "max_handoffs_per_turn": "2",
            "max_steps_per_agent": "6",
            "loop_window": "4",
            "loop_max_repeats": "2",
            "closing_words": '["valeu", "era só isso"]',
            "denial_words": "",
        }
    )
    response = staff_client.post(change_url(telecom), data)
    assert response.status_code == 302, error_messages(response)
    telecom.refresh_from_db()
    assert (telecom.max_handoffs_per_turn, telecom.max_steps_per_agent) == (2, 6)
    assert (telecom.block_ping_pong, telecom.loop_window, telecom.loop_max_repeats) == (False, 4, 2)
    assert telecom.closing_words == ["valeu", "era só isso"]
    assert telecom.denial_words == []  # an emptied box means no words


@pytest.mark.sqlite_too
def test_the_running_summary_is_switched_off_and_on_in_the_profile_pages_answers_section(staff_client, telecom):
    page = staff_client.get(change_url(telecom))
    answers = next(options for title, options in page.context["adminform"].fieldsets if title == "Answers")
    assert "summarise_conversations" in answers["fields"]
    assert "Keep a running summary of long conversations for the specialists" in page.content.decode()

    data = form_data(page)
    assert data["summarise_conversations"] == "on"
    del data["summarise_conversations"]  # unticked
    response = staff_client.post(change_url(telecom), data)
    assert response.status_code == 302, error_messages(response)
    telecom.refresh_from_db()
    assert telecom.summarise_conversations is False

    response = post_profile(staff_client, telecom, summarise_conversations="on")
    assert response.status_code == 302, error_messages(response)
    telecom.refresh_from_db()
    assert telecom.summarise_conversations is True


def test_the_word_lists_are_edited_as_indented_json(staff_client, telecom):
    form = staff_client.get(change_url(telecom)).context["adminform"].form
    assert form["confirmation_words"].value() == json.dumps(telecom.confirmation_words, ensure_ascii=False, indent=2)


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("confirmation_words", '[""]', "confirmation_words[0]: each entry must be a non-empty word or phrase."),
        ("denial_words", '["não", 3]', "denial_words[1]: each entry must be a non-empty word or phrase."),
        ("closing_words", '"obrigado"', "closing_words: Give a list of words or phrases"),
        ("closing_words", '{"obrigado": true}', "closing_words: Give a list of words or phrases"),
    ],
    ids=["empty-word", "not-a-string", "a-string", "a-mapping"],
)
def test_a_bad_word_list_is_refused_naming_the_field(staff_client, telecom, field, value, expected):
    before = getattr(telecom, field)
    response = post_profile(staff_client, telecom, **{field: value})
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == [field]
    assert errors[field][0].startswith(expected), errors[field]
    telecom.refresh_from_db()
    assert getattr(telecom, field) == before


def test_a_loop_safety_limit_out_of_range_is_refused_on_its_field(staff_client, telecom):
    response = post_profile(staff_client, telecom, loop_window="1", max_handoffs_per_turn="0")
    assert response.status_code == 200
    assert set(response.context["adminform"].form.errors) == {"loop_window", "max_handoffs_per_turn"}


def test_more_repeats_than_the_window_holds_is_refused_on_the_repeats_field(staff_client, telecom):
    response = post_profile(staff_client, telecom, loop_window="2", loop_max_repeats="3")
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == ["loop_max_repeats"]
    assert "window (2)" in errors["loop_max_repeats"][0]


def test_a_routing_editor_sees_the_delegation_settings_but_cannot_change_them(editor_client, telecom):
    response = editor_client.get(change_url(telecom))
    assert response.status_code == 200
    page = response.content.decode()
    for heading in ("Handoffs and delegation", "Loop safety", "Conversation words"):
        assert heading in page
    assert 'name="_save"' not in page


# -- MCP tools and servers -------------------------------------------------------------


def test_the_tool_argument_schema_is_edited_as_indented_json(staff_client):
    tool = McpTool.objects.create(
        name="consultar_conta",
        server=McpServer.objects.create(name="s", endpoint="http://127.0.0.1:9/mcp"),
        args_schema={"type": "object", "properties": {"msisdn": {"type": "string"}}},
    )
    form = staff_client.get(change_url(tool)).context["adminform"].form
    assert form["args_schema"].value() == json.dumps(tool.args_schema, indent=2)


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ('{"type": "object", "properties": {"msisdn": {"type": "strin"}}}', "Invalid JSON Schema at"),
        ('{"type": "string"}', "must describe an object"),
        ('{"type": "object", "properties": {}, "required": ["msisdn"]}', "required names arguments"),
        ('{"msisdn": "text"}', "unknown type"),
        ('{"type": "object",', "Enter a valid JSON"),
    ],
    ids=["bad-type", "not-an-object", "unknown-required", "bad-shorthand", "bad-json"],
)
def test_an_invalid_argument_schema_is_reported_on_its_field(staff_client, telecom, schema, expected):
    tool = McpTool.objects.get(name="consultar_fatura")
    data = form_data(staff_client.get(change_url(tool)))
    data["args_schema"] = schema
    response = staff_client.post(change_url(tool), data)
    assert response.status_code == 200
    field_errors = response.context["adminform"].form.errors["args_schema"]
    assert any(expected in error for error in field_errors), field_errors


def test_the_server_actions_switch_servers_and_invalidate_the_routing(staff_client, telecom):
    server = McpServer.objects.get(name="telecom")
    before = ConfigVersion.objects.get(pk=1).version
    staff_client.post(changelist_url(McpServer), {"action": "disable_selected", "_selected_action": [server.pk]})
    server.refresh_from_db()
    assert not server.enabled
    assert ConfigVersion.objects.get(pk=1).version > before

    staff_client.post(changelist_url(McpServer), {"action": "enable_selected", "_selected_action": [server.pk]})
    server.refresh_from_db()
    assert server.enabled


def test_the_tool_actions_switch_tools(staff_client, telecom):
    tool = McpTool.objects.get(name="consultar_fatura")
    staff_client.post(changelist_url(McpTool), {"action": "disable_selected", "_selected_action": [tool.pk]})
    tool.refresh_from_db()
    assert not tool.enabled


def test_the_specialist_changelist_does_not_query_per_row(staff_client, telecom, django_assert_max_num_queries):
    staff_client.get(changelist_url(Specialist))
    with django_assert_max_num_queries(20) as few:
        staff_client.get(changelist_url(Specialist))
    for index in range(10):
        SpecialistFactory(profile=telecom, name=f"extra_{index}")
    with django_assert_max_num_queries(len(few.captured_queries)):
        response = staff_client.get(changelist_url(Specialist))
    assert response.context["cl"].result_count == 14


# -- routing editors -------------------------------------------------------------------


def test_an_editor_can_add_and_revert_prompt_versions(editor_client, editor, billing):
    data = form_data(editor_client.get(add_url(SpecialistPrompt)))
    data.update({"specialist": billing.pk, "text": "Editor's version."})
    assert editor_client.post(add_url(SpecialistPrompt), data).status_code == 302
    new = billing.prompts.get(is_active=True)
    assert (new.version, new.created_by) == (2, editor)

    first = billing.prompts.get(version=1)
    assert editor_client.post(activate_url(first)).status_code == 302
    assert billing.prompts.get(is_active=True) == first


def test_an_editor_sees_a_specialist_and_its_prompt_history_read_only(editor_client, versions, billing):
    response = editor_client.get(change_url(billing))
    assert response.status_code == 200
    page = response.content.decode()
    assert "Be brief and kind." in page
    assert activate_url(versions[0]) in page  # editors may revert prompts
    assert 'name="_save"' not in page


def test_an_editor_cannot_switch_servers_or_tools(editor_client, telecom):
    tool = McpTool.objects.get(name="consultar_fatura")
    response = editor_client.post(
        changelist_url(McpTool), {"action": "disable_selected", "_selected_action": [tool.pk]}
    )
    tool.refresh_from_db()
    assert tool.enabled
    assert response.status_code in (200, 302, 403)
    assert editor_client.get(changelist_url(McpServer)).status_code == 403
