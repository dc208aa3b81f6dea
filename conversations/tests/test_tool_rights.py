"""A tool's authorisation (needs_permission, enabled) is the profile's, versioned with its document; the tool's
definition (server, description, arguments) stays global."""

from __future__ import annotations

from dataclasses import replace

import pytest

from agents.models import McpTool
from conversations.runtime import tools_for_turn
from routing import snapshot
from routing.specs import ToolRights

pytestmark = pytest.mark.django_db

INVOICE_TOOLS = ["consultar_fatura", "consultar_pagamentos"]


def offered(profile, current) -> list[tuple[str, bool]]:
    tools = tools_for_turn(
        profile=profile,
        specialist=profile.specialists["billing_agent"],
        intent_tools=INVOICE_TOOLS,
        all_tools=current.tools,
    )
    return [(tool.name, tool.needs_permission) for tool in tools]


def test_the_profiles_document_gives_each_tool_its_rights(telecom):
    McpTool.objects.filter(name="consultar_fatura").update(needs_permission=True)
    snapshot.invalidate()
    current = snapshot.current()
    profile = current.profiles["telecom_contas"]

    assert profile.tool_rights["consultar_fatura"] == ToolRights(needs_permission=True, enabled=True)
    assert offered(profile, current) == [("consultar_fatura", True), ("consultar_pagamentos", False)]


def test_a_version_whose_rights_differ_from_the_tools_table_is_offered_its_own(telecom):
    current = snapshot.current()
    profile = current.profiles["telecom_contas"]
    version = replace(
        profile,
        tool_rights={
            "consultar_fatura": ToolRights(needs_permission=True, enabled=True),
            "consultar_pagamentos": ToolRights(needs_permission=False, enabled=False),
        },
    )

    tools = tools_for_turn(
        profile=version,
        specialist=version.specialists["billing_agent"],
        intent_tools=INVOICE_TOOLS,
        all_tools=current.tools,
    )

    assert [(tool.name, tool.needs_permission) for tool in tools] == [("consultar_fatura", True)]
    assert tools[0].args_schema == current.tools["consultar_fatura"].args_schema  # the definition is the global one
    assert tools[0].server == "telecom"
    assert not current.tools["consultar_fatura"].needs_permission  # the global spec is left alone


def test_a_tool_disabled_in_the_table_is_still_offered_by_a_version_that_enables_it(telecom):
    McpTool.objects.filter(name="consultar_pagamentos").update(enabled=False)
    snapshot.invalidate()
    current = snapshot.current()
    published = replace(
        current.profiles["telecom_contas"],
        tool_rights={name: ToolRights(needs_permission=False, enabled=True) for name in INVOICE_TOOLS},
    )

    assert not current.tools["consultar_pagamentos"].enabled
    assert offered(current.profiles["telecom_contas"], current) == [("consultar_fatura", False)]
    assert offered(published, current) == [("consultar_fatura", False), ("consultar_pagamentos", False)]
