"""Health for load balancers and people: liveness, readiness, and the full report.

* ``GET /api/health/live`` — the process answers (200); touches nothing else.
* ``GET /api/health/ready`` — whether to send traffic here: 503 with ``Retry-After`` when the database cannot be
  reached (no chat can be answered); 200 otherwise, ``"status": "degraded"`` with the reasons when Redis or an
  enabled MCP server cannot be reached, or when several web workers share no channel layer (chat still answers: see
  docs/operations.md), ``"ok"`` when all is well.
* ``GET /api/health`` — the full report, with the same status code as readiness.

Readiness says what this process's requests get: while its database circuit is open (:mod:`common.infra.outages`) they
are refused with a 503, and so is readiness, at once; a check that finds the database down opens the circuit.
Every check is bounded (:data:`CHECK_SECONDS`), the database's retry included, and Redis and the MCP servers are
checked at once, so a probe never waits on a pool or a frozen server for longer. Anonymous callers see MCP servers
by name and reachability only; their addresses are shown to staff sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import httpx
from adrf.views import APIView as AsyncAPIView
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import permissions, serializers
from rest_framework.authentication import SessionAuthentication
from rest_framework.request import Request
from rest_framework.response import Response

from agents.public import llm_configured
from chat.intake import principal_is_staff
from common.checks import pushes_split
from common.endpoints import endpoint_mask
from common.errors import ERROR_SERVICE_UNAVAILABLE, RETRY_AFTER_SECONDS, error_body
from common.infra.outages import database_circuit, database_outage_evident, database_select_one
from common.outbound import outbound_async_client
from platform.serve import PUSHES_SPLIT_HINT
from routing.public import snapshot_current

# Seconds each check may take, all at once: the database (a pooled connection and SELECT 1), a Redis PING, an MCP
# server's HTTP answer (any status: a frozen server does not answer at all). A load balancer's probe times out
# after a few seconds; a loaded machine adds to this.
CHECK_SECONDS = 1.0
STATUS_OK = "ok"
STATUS_DEGRADED = "degraded"
STATUS_UNAVAILABLE = "unavailable"
CIRCUIT_OPEN = "circuit open: requests are answered 503 until it answers again"


def _database_problem() -> str | None:
    """``None`` when the database answers, else why not; when that shows the database down (not a pool busy with
    requests) the database circuit is opened, so requests are refused as readiness is. Waits at most
    ``CHECK_SECONDS`` in all.

    After a database restart the pool may still hold connections the server cut: on a failure the pool drops its
    broken ones (``check``) and the query is tried once more, so readiness does not lag the database.
    """
    deadline = time.monotonic() + CHECK_SECONDS
    problem: Exception = TimeoutError()
    for _ in range(2):
        try:
            database_select_one(timeout=max(deadline - time.monotonic(), 0.01))
            return None
        except Exception as exc:  # noqa: BLE001 — health reports, never raises
            problem = exc
        pool = getattr(connection, "pool", None)
        if pool is None or time.monotonic() >= deadline:
            break
        with contextlib.suppress(Exception):  # the second try says what is wrong
            pool.check()
    if database_outage_evident(problem):
        database_circuit.trip()
    return type(problem).__name__


async def _redis_problem() -> str | None:
    """``None`` when Redis answers PING (or none is configured), else why not."""
    if not settings.REDIS_URL:
        return None
    import redis.asyncio as redis

    client = redis.Redis.from_url(
        settings.REDIS_URL, socket_connect_timeout=CHECK_SECONDS, socket_timeout=CHECK_SECONDS
    )
    try:
        await asyncio.wait_for(client.ping(), CHECK_SECONDS)
        return None
    except Exception as exc:  # noqa: BLE001 — health reports, never raises
        return type(exc).__name__
    finally:
        await client.aclose()


async def _answers(endpoint: str) -> bool:
    """Whether an MCP server answers HTTP at all within ``CHECK_SECONDS`` (a connect alone passes a frozen one)."""
    try:
        async with (
            # Anyone reads readiness: an endpoint on an internal address the operator does not allow is not probed.
            outbound_async_client(timeout=CHECK_SECONDS) as client,
            # Streamable HTTP answers GET with an event stream that stays open: its headers are the answer.
            client.stream("GET", endpoint, headers={"Accept": "application/json, text/event-stream"}),
        ):
            return True
    except (httpx.HTTPError, OSError):
        return False


def _unavailable(reason: str) -> tuple[int, dict[str, Any]]:
    body: dict[str, Any] = {
        "status": STATUS_UNAVAILABLE,
        "reasons": [f"database unreachable ({reason})"],
        "database": {"engine": connection.vendor, "status": f"error: {reason}"},
        **error_body("service_unavailable", ERROR_SERVICE_UNAVAILABLE),
    }
    return 503, body


async def health_checks(*, full: bool, staff: bool) -> tuple[int, dict[str, Any]]:
    """The status code and body of a readiness probe (``full``: the whole report)."""
    if database_circuit.is_open:
        return _unavailable(CIRCUIT_OPEN)
    database = await sync_to_async(_database_problem, thread_sensitive=False)()
    if database is not None:
        return _unavailable(database)
    current = await sync_to_async(snapshot_current)()
    servers = [server for server in current.servers.values() if server.enabled]
    redis_problem, *answered = await asyncio.gather(
        _redis_problem(), *(_answers(server.endpoint) for server in servers)
    )
    reasons = [f"redis unreachable ({redis_problem}): cache skipped, fan-out in-process"] if redis_problem else []
    reasons += [f"MCP server {s.name} unreachable" for s, ok in zip(servers, answered, strict=True) if not ok]
    if split := pushes_split():
        reasons.append(f"{split} ({PUSHES_SPLIT_HINT})")
    body: dict[str, Any] = {"status": STATUS_DEGRADED if reasons else STATUS_OK, "reasons": reasons}
    mcp = [
        {"name": server.name, "reachable": ok, **({"endpoint": endpoint_mask(server.endpoint)} if staff else {})}
        for server, ok in zip(servers, answered, strict=True)
    ]
    if full:
        body |= {
            "routing_mode": settings.ROUTING_MODE or "per-profile",
            "routing_modes": {agent_id: p.effective_mode for agent_id, p in current.profiles.items()},
            "agents": sorted(current.profiles),
            "database": {"engine": connection.vendor, "status": STATUS_OK},
            "redis": "none" if not settings.REDIS_URL else (f"error: {redis_problem}" if redis_problem else "ok"),
            "broker": "redis" if settings.REDIS_URL else "none (embedded, in-process)",
            "llm": "openai" if llm_configured() else "offline",
            "routing_config_version": current.version,
            "mcp_servers": mcp,
        }
    else:
        body["mcp_servers"] = mcp
    return 200, body


HEALTH_RESPONSE = inline_serializer(
    "HealthReport",
    {
        "status": serializers.ChoiceField(choices=[STATUS_OK, STATUS_DEGRADED, STATUS_UNAVAILABLE]),
        "reasons": serializers.ListField(child=serializers.CharField()),
    },
)
HEALTH_RESPONSES = {
    200: OpenApiResponse(HEALTH_RESPONSE, description="Ready: `ok`, or `degraded` with reasons (chat answers)"),
    503: OpenApiResponse(HEALTH_RESPONSE, description="Not ready: the database cannot be reached (`Retry-After`)"),
}


class _HealthView(AsyncAPIView):
    # Anonymous load balancers; a staff session (if any) sees more. No API key: a probe carries none.
    authentication_classes = [SessionAuthentication]
    permission_classes = [permissions.AllowAny]
    full: bool = False

    async def get(self, request: Request) -> Response:
        status, body = await health_checks(full=self.full, staff=principal_is_staff(request.user))
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if status == 503 else None
        response = Response(body, status=status, headers=headers)
        # A probe's 503 is its answer, not a fault of this request: no ERROR line every few seconds of an outage
        # (the requests that met it logged one WARNING each).
        response._has_been_logged = True  # type: ignore[attr-defined]  # read by django.utils.log.log_response
        return response


class HealthApi(_HealthView):
    full = True

    @extend_schema(
        summary="Full health report: database, Redis, profiles, routing modes, MCP servers (status as readiness)",
        responses=HEALTH_RESPONSES,
    )
    async def get(self, request: Request) -> Response:
        return await super().get(request)


class HealthReadyApi(_HealthView):
    @extend_schema(
        summary="Readiness for load balancers: 503 when the database is unreachable", responses=HEALTH_RESPONSES
    )
    async def get(self, request: Request) -> Response:
        return await super().get(request)


class HealthLiveApi(AsyncAPIView):
    authentication_classes: list = []
    permission_classes = [permissions.AllowAny]

    @extend_schema(
        summary="Liveness: the process answers (touches no database)",
        responses={200: inline_serializer("Liveness", {"status": serializers.CharField()})},
    )
    async def get(self, request: Request) -> Response:
        return Response({"status": STATUS_OK})
