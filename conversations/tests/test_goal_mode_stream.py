"""Goal mode streamed: the demo's finance_assistente over the real finance MCP server, its plan's steps sent as Server-
Sent Events. A transactional test (the ASGI request's thread must see the data), so a file of its own: the other goal
mode tests (conversations/tests/test_goal_mode.py) share one seeded demo through savepoints, which a test that commits
and flushes would break.
"""

from __future__ import annotations

import pytest

from conversations.tests.test_goal_mode import AGENT_ID, finance_seeded
from tests.streaming import run, sse_events


@pytest.fixture(autouse=True)
def finance(transactional_db, finance_mcp, monkeypatch):
    """The demo seeded with the finance server's manifest, before the test's own fixtures (its tenant's key)."""
    finance_seeded(monkeypatch, finance_mcp)
    return finance_mcp


@pytest.mark.django_db(transaction=True)  # the ASGI request's thread must see the data
def test_a_streaming_client_sees_the_goal_and_each_plan_step(tenant_key, finance):
    from django.test import AsyncClient

    async def stream() -> bytes:
        client = AsyncClient()
        response = await client.post(
            "/api/gateway/message/stream",
            {"channel": "api", "agent_id": AGENT_ID, "payload": {"text": "maiores altas do Brasil", "session_id": "s"}},
            content_type="application/json",
            headers={"Authorization": f"Bearer {tenant_key.raw}"},
        )
        return b"".join([chunk async for chunk in response.streaming_content])

    events = sse_events(run(stream()))

    names = [name for name, _ in events]
    assert "goal" in names
    step_events = [data for name, data in events if name == "plan_step"]
    assert [e["status"] for e in step_events] == ["started", "success"]
    assert step_events[0]["capability"] == "get_top_gainers"
    assert names[-1] == "done"
