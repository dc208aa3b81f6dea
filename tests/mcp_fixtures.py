"""Fixtures that run the example MCP servers as real processes (see ``tests/mcp_processes.py``).

* ``mcp_servers`` — both servers for the whole session: ``{"telecom": url, "retail": url}``;
* ``slow_telecom_server`` — a telecom server of its own whose every tool call takes 3 s: its URL;
* ``held_telecom_server`` — the same, each call held for a minute: a call that ended before did not end by itself,
  however slowly the machine ran;
* ``finance_mcp`` — the finance server (goal mode's example domain) for the whole session: its URL;
* ``all_content_mcp`` — the test server of every content kind (``mcp_servers.all_content``) for the whole session:
  its URL;
* ``lines`` — the all-content server synced as ``lines``, five of its tools on the ``telecom`` fixture's billing
  intent (two with no required argument, :data:`NO_ARGUMENT_TOOLS`; one with a dotted name); a message with
  :data:`ALL_CONTENT_CONTEXT` can call them all;
* ``seeded_demo`` — the demo configuration (``seed_demo``, seeded once per worker: ``tests/demo_snapshot.py``) with its
  MCP servers pointed at the running ones;
* ``module_demo`` — the demo seeded once for a module's tests, each test's writes rolled back after it;
  ``served_module_demo`` — the same with its MCP servers pointed at the running ones.
"""

from __future__ import annotations

import pytest

from tests.demo_snapshot import demo_seed
from tests.mcp_processes import MCPServerProcess, running_mcp_servers
from tests.shared_rows import rows_shared

SLOW_SERVER_DELAY_MS = 3000
ALL_CONTENT_CONTEXT = {"msisdn": "5511999999999", "invoice_id": "INV001", "path": "contract.txt"}
NO_ARGUMENT_TOOLS = {"server_status", "long_operation"}
HELD_SERVER_DELAY_MS = 60_000


@pytest.fixture(scope="session")
def mcp_servers():
    with running_mcp_servers("telecom", "retail") as urls:
        yield urls


@pytest.fixture(scope="session")
def finance_mcp():
    with running_mcp_servers("finance") as urls:
        yield urls["finance"]


@pytest.fixture(scope="session")
def all_content_mcp():
    server = MCPServerProcess("all_content", module="mcp_servers.all_content.server").start()
    yield server.url
    server.stop()


@pytest.fixture
def slow_telecom_server():
    with running_mcp_servers("telecom", delay_ms=SLOW_SERVER_DELAY_MS) as urls:
        yield urls["telecom"]


@pytest.fixture
def held_telecom_server():
    with running_mcp_servers("telecom", delay_ms=HELD_SERVER_DELAY_MS) as urls:
        yield urls["telecom"]


@pytest.fixture
def live_mcp(db, telecom, mcp_servers):
    """The ``telecom`` fixture's MCP servers pointed at the running example servers."""
    from agents.models import McpServer

    for name, url in mcp_servers.items():
        McpServer.objects.filter(name=name).update(endpoint=url)
    from common.config_version import config_version_bump

    config_version_bump()  # QuerySet.update bypasses the invalidation signals
    return mcp_servers


def _demo_servers_pointed(mcp_servers: dict[str, str]) -> None:
    """The demo's MCP servers pointed at the running example servers."""
    from agents.models import McpServer
    from common.config_version import config_version_bump

    for name, url in mcp_servers.items():
        McpServer.objects.filter(name=name).update(endpoint=url)
    config_version_bump()  # QuerySet.update bypasses the invalidation signals


@pytest.fixture
def seeded_demo(db, mcp_servers):
    """The demo configuration as shipped (``seed_demo``), its MCP servers the running example servers."""
    demo_seed()
    _demo_servers_pointed(mcp_servers)


@pytest.fixture(scope="module")
def module_demo(request, django_db_setup, django_db_blocker):
    """The demo as shipped (``seed_demo``), seeded once for the tests of a module (tests/shared_rows.py): each test
    sees it as seeded and nothing another test wrote: one restore (tests/demo_snapshot.py) instead of one a test."""
    with rows_shared(request, django_db_blocker, demo_seed):
        yield


@pytest.fixture
def served_module_demo(module_demo, db, mcp_servers):
    """``module_demo`` with its MCP servers pointed at the running example servers (for this test only)."""
    _demo_servers_pointed(mcp_servers)


@pytest.fixture
def lines(live_mcp, telecom, all_content_mcp):
    from agents.models import McpServer, McpTool
    from agents.services import mcp_tools_sync
    from common.config_version import config_version_bump

    server = McpServer.objects.create(name="lines", endpoint=all_content_mcp, timeout=10)
    mcp_tools_sync(server=server)
    tools = McpTool.objects.filter(
        server=server, name__in=[*NO_ARGUMENT_TOOLS, "resource_links", "tiny_image", "lines__files_read"]
    )
    billing = telecom.specialists.get(name="billing_agent")
    billing.allowed_tools.add(*tools)
    billing.intents.get(name="billing_invoice_explanation").mcp_tools.add(*tools)
    config_version_bump()
    return server
