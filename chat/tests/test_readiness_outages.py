"""Readiness says what requests get, and answers within its bound whatever a dependency does."""

from __future__ import annotations

import socket
import time

import pytest

from chat import health
from common.infra import circuit
from common.infra.outages import database_circuit

# A load balancer's probe gives up after a few seconds; with a frozen MCP server readiness took 2.3 s (4 s under
# load, with the database's retry).
READY_WITHIN_SECONDS = 1.8


@pytest.mark.django_db(transaction=True)
def test_readiness_answers_503_at_once_while_the_database_circuit_refuses_requests(
    client, tenant_key, telecom, monkeypatch
):
    """The circuit is per process and readiness ran a query of its own: it said 200 while the same process answered
    every request 503, until its circuit closed."""
    monkeypatch.setattr(circuit, "CHECK_INTERVAL_SECONDS", 60.0)  # the circuit stays open for the whole test
    assert client.get("/api/health/ready").status_code == 200
    database_circuit.trip()  # a request met an outage; the database answers again, the circuit is not closed yet

    started = time.monotonic()
    ready = client.get("/api/health/ready")
    answered_in = time.monotonic() - started
    request = client.get("/api/agents", HTTP_AUTHORIZATION=f"Bearer {tenant_key.raw}")

    assert request.status_code == 503
    assert ready.status_code == 503, ready.json()
    assert int(ready["Retry-After"]) > 0
    body = ready.json()
    assert body["status"] == "unavailable" and body["reasons"] == [f"database unreachable ({health.CIRCUIT_OPEN})"]
    assert answered_in < 0.5  # no query: the circuit says it
    database_circuit.reset()
    assert client.get("/api/health/ready").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_readiness_answers_within_its_bound_with_an_mcp_server_that_accepts_connections_but_never_answers(
    client, live_mcp
):
    from agents.models import McpServer
    from common.config_version import config_version_bump

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as frozen:  # the kernel accepts; nothing reads or answers
        frozen.bind(("127.0.0.1", 0))
        frozen.listen(16)
        port = frozen.getsockname()[1]
        McpServer.objects.filter(name="telecom").update(endpoint=f"http://127.0.0.1:{port}/mcp")
        config_version_bump()

        started = time.monotonic()
        response = client.get("/api/health/ready")
        answered_in = time.monotonic() - started

    assert response.status_code == 200
    assert response.json()["reasons"] == ["MCP server telecom unreachable"]
    assert answered_in < READY_WITHIN_SECONDS, answered_in
