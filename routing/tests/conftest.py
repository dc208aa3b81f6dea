"""Fixtures of the routing tests: the finance example server (goal mode's domain), a real process, synced."""

from __future__ import annotations

import pytest

from agents.models import McpServer
from agents.services import mcp_server_sync
from tests.factories import McpServerFactory
from tests.mcp_processes import running_mcp_servers


@pytest.fixture(scope="module")
def finance_url():
    with running_mcp_servers("finance") as urls:
        yield urls["finance"]


@pytest.fixture
def finance(finance_url) -> McpServer:
    """The finance server, its manifest synced into goals and capabilities."""
    server = McpServerFactory(name="finance", endpoint=finance_url)
    assert mcp_server_sync(server=server).ok
    return server
