"""Domain manifests read over MCP (resources/list, then resources/read of each manifest:// resource)."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync

from agents.mcp import Endpoint, McpUnavailable, manifests_read, manifests_read_sync
from tests.mcp_processes import running_mcp_servers


@pytest.fixture(scope="module")
def finance_url():
    with running_mcp_servers("finance") as urls:
        yield urls["finance"]


def test_the_finance_server_serves_its_manifest(finance_url):
    served = manifests_read_sync(Endpoint("finance", finance_url, 10))

    assert [uri for uri, _ in served] == ["manifest://finance"]
    manifest = json.loads(served[0][1])
    assert manifest["domain"] == "finance"
    assert {goal["goal"] for goal in manifest["goals"]} == {"GET_QUOTE", "TOP_MOVERS"}


def test_the_async_reader_reads_the_same(finance_url):
    endpoint = Endpoint("finance", finance_url, 10)

    assert async_to_sync(manifests_read)(endpoint) == manifests_read_sync(endpoint)


def test_a_server_without_resources_has_no_manifest(mcp_servers):
    assert manifests_read_sync(Endpoint("telecom", mcp_servers["telecom"], 10)) == []


def test_a_server_that_cannot_be_reached_is_unavailable():
    with pytest.raises(McpUnavailable):
        manifests_read_sync(Endpoint("nowhere", "http://127.0.0.1:9/mcp", 2))
