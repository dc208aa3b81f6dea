"""Tools stored before ``synced_description`` existed count as unedited: the next sync may update them."""

from __future__ import annotations

import pytest

BEFORE = ("agents", "0004_profile_delegation_loop_safety_words")
MIGRATION = ("agents", "0005_goal_mode_synced_descriptions")


@pytest.mark.slow  # migrates a database of an early state forwards
@pytest.mark.django_db(transaction=True)
def test_a_tool_stored_before_the_migration_records_its_description_as_the_servers(migrations):
    apps = migrations.installed_at(BEFORE)
    server = apps.get_model("agents", "McpServer").objects.create(name="old", endpoint="http://127.0.0.1:9/mcp")
    apps.get_model("agents", "McpTool").objects.create(name="old_tool", server=server, description="Server's text.")

    after = migrations.forward_to(MIGRATION)

    tool = after.get_model("agents", "McpTool").objects.get(name="old_tool")
    assert tool.synced_description == tool.description == "Server's text."
