"""Health for load balancers: liveness, readiness with status codes they read, and the full report."""

from __future__ import annotations

import time

import pytest

from common.tests.database_outage import database_outage
from common.tests.private_redis import PrivateRedis


def test_liveness_answers_without_touching_the_database(client):
    response = client.get("/api/health/live")  # no django_db mark: a query would raise here
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_readiness_is_ok_when_the_database_redis_and_every_mcp_server_answer(client, live_mcp):
    response = client.get("/api/health/ready")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["status"], body["reasons"]) == ("ok", [])
    assert {(s["name"], s["reachable"]) for s in body["mcp_servers"]} == {("telecom", True), ("retail", True)}


def test_readiness_is_ok_in_a_new_worker_whose_pool_no_query_has_opened_yet(transactional_db, client):
    from django.db import connection

    connection.close()
    connection.close_pool()  # as in a worker process that has served nothing yet: Django opens it on first use
    assert connection.pool is not None and connection.pool.closed
    response = client.get("/api/health/ready")
    assert response.status_code == 200, response.content
    assert response.json()["status"] in ("ok", "degraded")  # no MCP server runs in this test


def test_an_mcp_server_that_is_down_makes_readiness_degraded_not_unavailable(client, live_mcp, mcp_servers):
    from agents.models import McpServer
    from common.config_version import config_version_bump

    McpServer.objects.filter(name="telecom").update(endpoint="http://127.0.0.1:9/mcp")  # nothing listens there
    config_version_bump()

    response = client.get("/api/health/ready")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "degraded"
    assert body["reasons"] == ["MCP server telecom unreachable"]
    full = client.get("/api/health")
    assert full.status_code == 200 and full.json()["status"] == "degraded"


def test_an_mcp_server_stored_on_an_internal_address_is_not_probed(client, telecom, settings):
    """Anyone reads readiness: an operator's endpoint aimed at an internal address (stored before the outbound policy,
    common/outbound.py) gets no request from it, and reads as unreachable."""
    from agents.models import McpServer
    from common.config_version import config_version_bump
    from tests.webhook_receiver import Receiver

    settings.OUTBOUND_ALLOWED = []
    receiver = Receiver()
    try:
        McpServer.objects.filter(name="telecom").update(endpoint=f"http://127.0.0.1:{receiver.port}/mcp")
        config_version_bump()
        body = client.get("/api/health/ready").json()
    finally:
        receiver.stop()

    assert receiver.requests == []
    assert {"name": "telecom", "reachable": False} in body["mcp_servers"]


def test_anonymous_callers_see_mcp_server_names_and_reachability_but_not_their_addresses(client, live_mcp, staff_user):
    for path in ("/api/health", "/api/health/ready"):
        anonymous = client.get(path).json()
        assert anonymous["mcp_servers"] and all(set(s) == {"name", "reachable"} for s in anonymous["mcp_servers"])
        assert "127.0.0.1" not in str(anonymous)
    client.force_login(staff_user)
    staff = client.get("/api/health").json()
    assert {s["endpoint"] for s in staff["mcp_servers"]} == set(live_mcp.values())


def test_a_staff_session_sees_an_mcp_servers_address_without_its_credentials(client, live_mcp, editor):
    from agents.models import McpServer
    from common.config_version import config_version_bump

    with_secrets = live_mcp["telecom"].replace("http://", "http://mcpuser:mcp-pa55@") + "?token=mcp-t0ken"
    McpServer.objects.filter(name="telecom").update(endpoint=with_secrets)
    config_version_bump()
    client.force_login(editor)  # any staff member, a routing editor included

    body = client.get("/api/health").json()

    servers = {server["name"]: server for server in body["mcp_servers"]}
    assert servers["telecom"]["reachable"] is True  # the check itself still uses the whole address
    assert servers["telecom"]["endpoint"] == live_mcp["telecom"].replace("http://", "http://***@") + "?token=***"
    assert "mcp-pa55" not in str(body) and "mcp-t0ken" not in str(body)


def test_redis_down_makes_readiness_degraded_and_says_so(client, live_mcp, settings):
    with PrivateRedis() as redis:
        settings.REDIS_URL = redis.url
        assert client.get("/api/health/ready").json()["status"] == "ok"
        redis.stop()
        response = client.get("/api/health/ready")
    assert response.status_code == 200  # chat still answers without Redis: keep sending traffic
    body = response.json()
    assert body["status"] == "degraded"
    assert any(reason.startswith("redis unreachable") for reason in body["reasons"]), body
    assert client.get("/api/health").json()["redis"].startswith("error")


def test_several_workers_over_an_in_memory_channel_layer_make_readiness_degraded_and_say_so(client, live_mcp, settings):
    settings.WEB_CONCURRENCY = 3
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

    response = client.get("/api/health")

    assert response.status_code == 200  # each worker still answers its own customers: keep sending traffic
    body = response.json()
    assert body["status"] == "degraded"
    assert any("3 web workers" in reason and "REDIS_URL" in reason for reason in body["reasons"]), body


@pytest.mark.django_db(transaction=True)
def test_the_database_down_makes_readiness_and_the_report_503_with_retry_after(client, telecom):
    with database_outage() as (down, up):
        down()
        ready = client.get("/api/health/ready")
        report = client.get("/api/health")
        live = client.get("/api/health/live")
        up()
    for response in (ready, report):
        assert response.status_code == 503
        assert response["Content-Type"].startswith("application/json")
        assert int(response["Retry-After"]) > 0
        body = response.json()
        assert body["status"] == "unavailable"
        assert body["reasons"][0].startswith("database unreachable")
        assert body["error"]["code"] == "service_unavailable"
    assert live.status_code == 200  # the process itself is fine: do not restart it
    # Back without a restart, once the database circuit readiness opened has found the database again.
    deadline = time.monotonic() + 60  # a hang guard
    while (again := client.get("/api/health/ready")).status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert again.status_code == 200
