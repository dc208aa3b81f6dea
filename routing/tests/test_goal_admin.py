"""The goal and capability admins, and the goal-mode part of the profile's page.

Goals and capabilities come from the finance example server's manifest (a real process); business users edit
them here, a routing editor too (add, change, view — never delete).
"""

from __future__ import annotations

import importlib

import pytest
from django.contrib.auth.models import Group, Permission

from agents.models import AgentProfile, McpTool, RoutingMode
from routing.models import Capability, Goal
from tests.adminkit import add_url, change_url, changelist_url, delete_url, error_messages, form_data
from tests.factories import McpServerFactory, McpToolFactory

pytestmark = pytest.mark.django_db

GRANTS = importlib.import_module("routing.migrations.0013_routing_editors_edit_goals")


@pytest.fixture
def goal_editor_client(editor, editor_client):
    """The routing editor, with the group's grants on goals (rebuilt when a flush removed the group)."""
    group = editor.groups.get(name=GRANTS.GROUP_NAME)
    group.permissions.add(
        *(
            Permission.objects.get(content_type__app_label=app, content_type__model=model, codename=f"{action}_{model}")
            for (app, model), actions in GRANTS.PERMISSIONS.items()
            for action in actions
        )
    )
    return editor_client


def edit(client, obj, **changes) -> object:
    data = form_data(client.get(change_url(obj)))
    data.update(changes)
    return client.post(change_url(obj), data)


def test_the_routing_editors_group_may_add_change_and_view_goals_and_capabilities_but_not_delete_them():
    codenames = set(Group.objects.get(name=GRANTS.GROUP_NAME).permissions.values_list("codename", flat=True))

    for model in ("goal", "capability"):
        assert {f"add_{model}", f"change_{model}", f"view_{model}"} <= codenames
        assert f"delete_{model}" not in codenames


def test_the_goal_list_shows_domain_threshold_and_what_was_edited_since_the_sync(staff_client, finance):
    goal = Goal.objects.get(name="TOP_MOVERS")
    goal.description, goal.confidence_threshold = "Editado.", 0.8
    goal.save()

    response = staff_client.get(changelist_url(Goal), {"domain": "finance", "q": "TOP"})

    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == [goal]
    page = response.content.decode()
    assert "0.8" in page and ">description<" in page
    everything = staff_client.get(changelist_url(Goal), {"enabled__exact": "1"}).content.decode()
    assert "GET_QUOTE" in everything and "profile&#x27;s" in everything


def test_a_goals_description_examples_and_threshold_are_edited_and_the_synced_values_stay_visible(
    staff_client, finance
):
    goal = Goal.objects.get(name="GET_QUOTE")
    page = staff_client.get(change_url(goal)).content.decode()
    assert "Synced from the manifest" in page and "Nothing edited since." in page

    response = edit(
        staff_client,
        goal,
        description="Cotações (texto do negócio).",
        examples="quanto vale a Vale?\ncotação da Nordea",
        confidence_threshold="0.85",
    )

    assert response.status_code == 302, error_messages(response)
    goal.refresh_from_db()
    assert goal.description == "Cotações (texto do negócio)."
    assert goal.examples == ["quanto vale a Vale?", "cotação da Nordea"]
    assert goal.confidence_threshold == 0.85
    assert goal.edited_fields() == ["description", "examples"]
    assert "Edited since: description, examples" in staff_client.get(change_url(goal)).content.decode()


def test_an_entities_schema_that_breaks_the_manifest_rules_is_refused_naming_the_entity(staff_client, finance):
    goal = Goal.objects.get(name="TOP_MOVERS")

    no_values = edit(staff_client, goal, entities_schema='{"direction": {"type": "enum"}}')
    unknown = edit(
        staff_client,
        goal,
        entities_schema='{"direction": {"type": "enum", "values": ["UP"], "capability_map": {"UP": "get_dividends"}}}',
    )
    bad_default = edit(
        staff_client, goal, entities_schema='{"direction": {"type": "enum", "values": ["UP"], "default": "DOWN"}}'
    )
    not_json = edit(staff_client, goal, entities_schema='{"direction": ')

    assert no_values.status_code == 200
    assert error_messages(no_values) == ["TOP_MOVERS.entities_schema.direction: an enum needs its values"]
    assert error_messages(unknown) == [
        "TOP_MOVERS.entities_schema.direction: capability_map names unknown capability 'get_dividends'"
    ]
    assert error_messages(bad_default) == ["TOP_MOVERS.entities_schema.direction: default must be one of the values"]
    assert error_messages(not_json) == ["entities_schema: enter valid JSON, an object in braces ({} for none)."]
    goal.refresh_from_db()
    assert goal.edited_fields() == []


def test_a_goals_capabilities_must_be_of_its_domain(staff_client, finance):
    goal = Goal.objects.get(name="GET_QUOTE")

    response = edit(staff_client, goal, capabilities="get_stock_price\nget_dividends")

    assert error_messages(response) == ["GET_QUOTE.capabilities: unknown capability 'get_dividends'"]


def test_a_capabilitys_hints_and_metadata_are_edited_and_checked(staff_client, finance):
    capability = Capability.objects.get(name="get_top_gainers")

    saved = edit(staff_client, capability, keywords="subiram\ndispararam", metadata='{"roles": ["movers"]}')
    refused = edit(staff_client, capability, metadata="[1, 2")

    assert saved.status_code == 302, error_messages(saved)
    capability.refresh_from_db()
    assert capability.keywords == ["subiram", "dispararam"] and capability.metadata == {"roles": ["movers"]}
    assert error_messages(refused) == ["metadata: enter valid JSON, an object in braces ({} for none)."]


def test_a_capabilitys_tool_is_one_of_its_servers_tools(staff_client, finance):
    capability = Capability.objects.get(name="get_top_gainers")
    stranger = McpToolFactory(name="consultar_fatura", server=McpServerFactory(name="telecom"))

    page = staff_client.get(change_url(capability))
    response = edit(staff_client, capability, tool=str(stranger.pk))

    choices = {tool.name for tool in page.context["adminform"].form.fields["tool"].queryset}
    assert choices == set(McpTool.objects.filter(server=finance).values_list("name", flat=True))
    assert response.status_code == 200 and capability.tool != stranger


def test_a_goal_made_by_hand_is_saved_and_marked_as_made_here(staff_client, finance):
    data = form_data(staff_client.get(add_url(Goal)))
    data.update(server=str(finance.pk), domain="finance", name="SEARCH", capabilities="search_symbol")

    response = staff_client.post(add_url(Goal), data)

    assert response.status_code == 302, error_messages(response)
    goal = Goal.objects.get(name="SEARCH")
    assert goal.capabilities == ["search_symbol"] and goal.synced == {}
    assert "made here" in staff_client.get(changelist_url(Goal), {"q": "SEARCH"}).content.decode()


def test_the_resync_action_syncs_the_selected_goals_server_and_says_what_it_did(staff_client, finance):
    goal = Goal.objects.get(name="TOP_MOVERS")
    goal.description = "Editado."
    goal.save()

    response = staff_client.post(changelist_url(Goal), {"action": "resync", "_selected_action": [goal.pk]}, follow=True)

    messages = [message.message for message in response.context["messages"]]
    assert messages[0].startswith("finance: 0 created, 0 updated,")
    assert any(
        "goals 0 created, 0 updated, 2 unchanged; capabilities 0 created, 0 updated, 5 unchanged" in m for m in messages
    )
    assert any("kept as edited" in m and "goal TOP_MOVERS (description)" in m for m in messages)
    goal.refresh_from_db()
    assert goal.description == "Editado."


def test_a_routing_editor_edits_goals_and_capabilities_but_cannot_delete_them(goal_editor_client, finance):
    goal = Goal.objects.get(name="TOP_MOVERS")
    capability = Capability.objects.get(name="get_stock_price")

    assert goal_editor_client.get(changelist_url(Goal)).status_code == 200
    assert goal_editor_client.get(changelist_url(Capability), {"q": "price"}).status_code == 200
    assert goal_editor_client.get(add_url(Goal)).status_code == 200
    saved = edit(goal_editor_client, goal, enabled="", description="Altas e baixas.")
    assert saved.status_code == 302, error_messages(saved)
    assert edit(goal_editor_client, capability, examples="preço da Vale").status_code == 302
    assert goal_editor_client.post(delete_url(goal), {"post": "yes"}).status_code == 403
    goal.refresh_from_db()
    capability.refresh_from_db()
    assert goal.description == "Altas e baixas." and goal.enabled is False
    assert capability.examples == ["preço da Vale"]
    assert Goal.objects.filter(pk=goal.pk).exists()


def test_the_profile_page_sets_goal_mode_its_threshold_and_domains(staff_client, telecom, finance):
    page = staff_client.get(change_url(telecom))
    assert "Goal mode" in page.content.decode()

    response = edit(
        staff_client,
        telecom,
        routing_mode=RoutingMode.GOAL,
        goal_threshold="0.9",
        goal_domains=[str(finance.pk)],
    )

    assert response.status_code == 302, error_messages(response)
    profile = AgentProfile.objects.get(pk=telecom.pk)
    assert profile.routing_mode == "goal" and profile.goal_threshold == 0.9
    assert list(profile.goal_domains.all()) == [finance]
    refused = edit(staff_client, profile, goal_threshold="1.5")
    assert error_messages(refused) == ["Ensure this value is less than or equal to 1.0."]
