"""Tool names as servers give them: a ``.`` in a name (MCP allows it) and a name two servers share, synced from a
real server (``mcp_servers.all_content``, registered twice) and called under the platform's name."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from agents.models import McpServer, McpTool
from agents.services import TOOL_NAME_MAX, mcp_tools_sync, tool_name_for
from mcp_servers.all_content.server import DOTTED

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_servers(all_content_mcp):
    """Two servers listing the same tools (the same process behind both)."""
    return (
        McpServer.objects.create(name="alpha", endpoint=all_content_mcp, timeout=10),
        McpServer.objects.create(name="beta", endpoint=all_content_mcp, timeout=10),
    )


def test_a_tool_with_a_dot_in_its_name_is_synced_under_a_name_a_model_can_call(two_servers):
    alpha, _ = two_servers

    report = mcp_tools_sync(server=alpha)

    tool = McpTool.objects.get(server=alpha, remote_name=DOTTED)
    assert tool.name == "alpha__files_read" and tool.called_as == DOTTED
    assert "alpha__files_read" in report.created
    assert McpTool.objects.get(server=alpha, name="tiny_image").remote_name == ""  # a plain name stays as it is


def test_a_name_two_servers_share_arrives_from_both_each_under_its_own_name(two_servers):
    alpha, beta = two_servers
    mcp_tools_sync(server=alpha)

    report = mcp_tools_sync(server=beta)

    assert McpTool.objects.get(name="tiny_image").server == alpha
    shared = McpTool.objects.get(name="beta__tiny_image")
    assert (shared.server, shared.remote_name) == (beta, "tiny_image")
    assert len(report.created) == McpTool.objects.filter(server=alpha).count()
    again = mcp_tools_sync(server=beta)
    assert again.created == [] and "beta__tiny_image" in again.unchanged


@pytest.mark.usefixtures("two_servers")
def test_a_renamed_tool_is_called_on_its_server_by_its_servers_name(debug_api):
    call_command("sync_mcp_tools", stdout=StringIO())

    dotted = debug_api.post("/api/debug/mcp/call/alpha__files_read", {"path": "a.txt"}, format="json").json()
    shared = debug_api.post("/api/debug/mcp/call/beta__files_read", {"path": "b.txt"}, format="json").json()

    assert (dotted["status"], dotted["result"], dotted["tool"]) == (
        "ok",
        {"result": "contents of a.txt"},
        "alpha__files_read",
    )
    assert (shared["status"], shared["result"]) == ("ok", {"result": "contents of b.txt"})


@pytest.mark.sqlite_too  # an operator's admin page, on the embedded default's database too
def test_the_admin_shows_a_renamed_tools_name_on_its_server(two_servers, client, staff_user):
    alpha, _ = two_servers
    mcp_tools_sync(server=alpha)
    client.force_login(staff_user)

    page = client.get("/admin/agents/mcptool/", {"server__id__exact": alpha.pk}).content.decode()

    assert "alpha__files_read" in page and DOTTED in page


def test_a_platform_name_fits_a_models_function_names_however_long_or_taken():
    taken = {"srv__a_b", "srv__a_b_2"}

    assert tool_name_for("srv", "a.b", taken.__contains__) == "srv__a_b_3"
    long = tool_name_for("srv", "x" * 200, lambda name: False)
    assert len(long) == TOOL_NAME_MAX and long.startswith("srv__xxx")
    assert tool_name_for("srv", "github/search", lambda name: False) == "srv__github_search"
