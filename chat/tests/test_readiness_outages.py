"""Readiness says what requests get, and answers within its bound whatever a dependency does."""

from __future__ import annotations

import contextlib
import socket

import pytest
from django.db import connection

from chat import health
from common.infra import circuit
from common.infra.outages import database_circuit

# A load balancer's probe gives up after a few seconds; with a frozen MCP server readiness took 2.3 s (4 s under
# load, with the database's retry).
PROBE_GIVES_UP_SECONDS = 5.0


def pool_requests() -> int:
    """The connections asked of this process's database pool so far."""
    return connection.pool.get_stats().get("requests_num", 0)


@pytest.mark.django_db(transaction=True)
def test_readiness_answers_503_at_once_while_the_database_circuit_refuses_requests(
    client, tenant_key, telecom, monkeypatch
):
    """The circuit is per process and readiness ran a query of its own: it said 200 while the same process answered
    every request 503, until its circuit closed."""
    monkeypatch.setattr(circuit, "CHECK_INTERVAL_SECONDS", 60.0)  # the circuit stays open for the whole test
    assert client.get("/api/health/ready").status_code == 200
    database_circuit.trip()  # a request met an outage; the database answers again, the circuit is not closed yet

    asked = pool_requests()
    ready = client.get("/api/health/ready")
    assert pool_requests() == asked  # no query: the circuit says it
    request = client.get("/api/agents", HTTP_AUTHORIZATION=f"Bearer {tenant_key.raw}")

    assert request.status_code == 503
    assert ready.status_code == 503, ready.json()
    assert int(ready["Retry-After"]) > 0
    body = ready.json()
    assert body["status"] == "unavailable" and body["reasons"] == [f"database unreachable ({health.CIRCUIT_OPEN})"]
    database_circuit.reset()
    assert client.get("/api/health/ready").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_readiness_checks_mcp_servers_that_accept_connections_but_never_answer_at_once_each_within_its_bound(
    client, live_mcp, monkeypatch
):
    from agents.models import McpServer
    from common.config_version import config_version_bump

    checks: list[tuple[str, object]] = []  # each MCP server's check as it starts (with its timeout) and ends
    opened = health.outbound_async_client

    @contextlib.asynccontextmanager
    async def recorded(**options):
        checks.append(("start", options.get("timeout")))
        try:
            async with opened(**options) as checking:
                yield checking
        finally:
            checks.append(("end", None))

    monkeypatch.setattr(health, "outbound_async_client", recorded)
    with contextlib.ExitStack() as frozen_servers:
        for server in McpServer.objects.filter(enabled=True):
            frozen = frozen_servers.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            frozen.bind(("127.0.0.1", 0))  # the kernel accepts; nothing reads or answers
            frozen.listen(16)
            server.endpoint = f"http://127.0.0.1:{frozen.getsockname()[1]}/mcp"
            server.save(update_fields=["endpoint"])
        config_version_bump()
        names = sorted(McpServer.objects.filter(enabled=True).values_list("name", flat=True))

        response = client.get("/api/health/ready")

    assert len(names) >= 2
    assert response.status_code == 200
    assert sorted(response.json()["reasons"]) == [f"MCP server {name} unreachable" for name in names]
    # Every check started before any ended: the probe waits one check's bound for all of them, not one each, and
    # that bound, after the database's, is within what a probe waits.
    assert checks == [("start", health.CHECK_SECONDS)] * len(names) + [("end", None)] * len(names)
    assert 2 * health.CHECK_SECONDS < PROBE_GIVES_UP_SECONDS
