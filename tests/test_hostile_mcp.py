"""A hostile MCP server synced into goal mode (``tests/hostile_mcp.py``): every limit the platform sets bites, is
reported in ``metadata.goal.limits``, and nothing huge is stored or returned; tool output stays data; a user's
``${…}`` stays text; and another tenant chatting meanwhile keeps its p95 within twice its p95 alone."""

from __future__ import annotations

import asyncio
import statistics
import time

import pytest
from django.conf import settings

from common.sizes import json_size
from conversations.goal_turn import FAILED_PLAN_ANSWER
from conversations.models import GoalStepRun, Message, ToolCall
from tests.hostile_mcp import (
    AGENT_ID,
    HUGE_CHARS,
    INJECTED,
    SEEN,
    SERVER_TIMEOUT_SECONDS,
    every_number_message,
    hostile_profile_create,
    hostile_register,
)

pytestmark = pytest.mark.slow


def say(api, text, *, session="h-1", agent_id=AGENT_ID):
    response = api.post(
        "/api/gateway/message",
        {"agent_id": agent_id, "payload": {"text": text, "session_id": session}},
        format="json",
    )
    assert response.status_code == 200, response.content[:500]
    return response


def limits(body) -> dict[str, dict]:
    return {hit["limit"]: hit for hit in body["metadata"]["goal"]["limits"]}


def stored_sizes() -> dict[str, int]:
    """The longest stored answer (characters), and the largest message metadata and tool result (JSON bytes)."""
    return {
        "answer": max(len(content) for content in Message.objects.values_list("content", flat=True)),
        "metadata": max(map(json_size, Message.objects.values_list("metadata", flat=True))),
        "tool result": max(map(json_size, ToolCall.objects.values_list("result", flat=True)), default=0),
    }


def test_a_tools_3_mb_output_is_cut_with_a_marker_and_nothing_huge_is_stored_or_returned(api, hostile_profile):
    response = say(api, "quero o relatório completo")
    body = response.json()

    assert len(response.content) <= settings.RESPONSE_MAX_BYTES
    assert len(body["answer"]) <= settings.ANSWER_MAX_CHARS
    assert "…[cut:" in body["answer"]
    cut = limits(body)["tool_output"]
    assert cut["setting"] == "MCP_TOOL_OUTPUT_MAX_BYTES"
    assert cut["asked"] > HUGE_CHARS and cut["ran"] <= settings.MCP_TOOL_OUTPUT_MAX_BYTES
    (call,) = ToolCall.objects.all()
    assert "…[cut:" in call.result["explanation"]
    sizes = stored_sizes()
    assert sizes["answer"] <= settings.ANSWER_MAX_CHARS
    assert sizes["metadata"] <= settings.RESPONSE_MAX_BYTES
    assert sizes["tool result"] <= settings.MCP_TOOL_OUTPUT_MAX_BYTES


def test_a_1000_way_fan_out_plans_at_most_the_platforms_steps_and_runs_at_most_its_concurrency(api, hostile_profile):
    message = every_number_message(1000)
    assert len(message) <= settings.MAX_INPUT_CHARS

    response = say(api, message)
    body = response.json()

    goal = body["metadata"]["goal"]
    assert goal["status"] == "success"
    assert len(goal["plan"]["steps"]) <= settings.GOAL_PLAN_MAX_STEPS
    assert goal["plan"]["max_concurrency"] <= settings.GOAL_PLAN_MAX_CONCURRENCY
    assert sum(SEEN.calls.values()) <= settings.GOAL_PLAN_MAX_STEPS
    assert SEEN.peak <= settings.GOAL_PLAN_MAX_CONCURRENCY
    hits = limits(body)
    assert hits["fanout_items"] == {
        "limit": "fanout_items",
        "setting": "GOAL_FANOUT_MAX_ITEMS",
        "value": settings.GOAL_FANOUT_MAX_ITEMS,
        "asked": 1000,
        "ran": settings.GOAL_FANOUT_MAX_ITEMS,
    }
    assert hits["turn_concurrency"]["asked"] == 1000
    assert hits["turn_concurrency"]["ran"] <= settings.GOAL_PLAN_MAX_CONCURRENCY
    assert len(response.content) <= settings.RESPONSE_MAX_BYTES
    assert GoalStepRun.objects.count() == len(goal["plan"]["steps"])


def test_the_plan_steps_limit_cuts_a_plan_that_the_fan_out_limit_leaves_too_long(api, hostile_profile, settings):
    settings.GOAL_PLAN_MAX_STEPS = 7  # three steps an item: two items whole, and a pre-step left alone is dropped

    body = say(api, every_number_message(5)).json()

    goal = body["metadata"]["goal"]
    assert [step["capability"] for step in goal["plan"]["steps"]] == [
        "find_item",
        "lookup_item",
        "find_item",
        "lookup_item",
        "notify",
        "notify",
    ]
    hit = limits(body)["plan_steps"]
    assert (hit["value"], hit["asked"], hit["ran"]) == (7, 15, 6)
    assert goal["status"] == "success"


def test_a_hanging_tool_ends_at_the_servers_timeout_and_the_plan_at_its_time_limit(api, hostile_profile, settings):
    settings.GOAL_PLAN_TIMEOUT_SECONDS = 0.5  # shorter than the server's 1 s: the plan's limit ends the calls

    started = time.monotonic()
    body = say(api, "espera " + " ".join(str(n) for n in range(1, 13))).json()
    elapsed = time.monotonic() - started

    assert elapsed < settings.GOAL_PLAN_TIMEOUT_SECONDS + 1.0
    hits = limits(body)
    assert hits["step_seconds"]["asked"] == 3600 and hits["step_seconds"]["ran"] == SERVER_TIMEOUT_SECONDS
    assert hits["plan_seconds"]["value"] == 0.5
    assert (hits["plan_seconds"]["asked"], hits["plan_seconds"]["ran"]) == (settings.GOAL_FANOUT_MAX_ITEMS, 0)
    assert body["metadata"]["goal"]["status"] == "failure"
    assert "Step" not in body["answer"] and "timeout" not in body["answer"]


def test_tool_output_reaches_the_answer_as_the_tools_quoted_words_never_expanded(api, hostile_profile):
    body = say(api, "quais são as instruções?").json()

    answer = body["answer"]
    assert f"“{INJECTED}”" in answer  # quoted: the tool's words, not the platform's
    assert "${1.explanation}" in answer  # never resolved as a reference
    assert body["metadata"]["goal"]["limits"] == []


def test_a_users_reference_inside_an_entity_is_literal_text(api, hostile_profile):
    body = say(api, "itens 7 ${2.result.secret}").json()

    goal = body["metadata"]["goal"]
    assert goal["status"] == "success", goal["reason"]
    assert ("find_item", {"query": "${2.result.secret}"}) in SEEN.arguments
    assert "refers to" not in body["answer"]


def test_a_plan_that_cannot_be_made_answers_a_customers_sentence_and_keeps_the_reason_internal(api, hostile_profile):
    from routing.models import Capability

    Capability.objects.filter(name="find_item").update(enabled=False)
    from common.config_version import config_version_bump

    config_version_bump()

    body = say(api, "itens 7").json()

    assert body["answer"] == FAILED_PLAN_ANSWER
    assert "find_item" in body["metadata"]["goal"]["reason"]


def test_a_specialists_tool_output_is_cut_in_router_mode_too(api, hostile_profile):
    body = say(api, "preciso da planilha").json()

    (result,) = body["metadata"]["mcp_results"]
    assert result["tool"] == "huge_report"
    assert result["cut"] > HUGE_CHARS
    assert json_size(result["result"]) <= settings.MCP_TOOL_OUTPUT_MAX_BYTES
    assert {hit["limit"] for hit in body["metadata"]["limits"]} == {"tool_output", "answer_chars"}
    assert stored_sizes()["tool result"] <= settings.MCP_TOOL_OUTPUT_MAX_BYTES
    assert len(body["answer"]) <= settings.ANSWER_MAX_CHARS


def test_the_sync_refuses_a_manifest_with_cycles_and_reports_the_bounded_values(db, hostile_mcp):
    _, report = hostile_register(hostile_mcp)

    (error,) = report.errors
    assert error.startswith("hostile manifest://hostile_loops: ")
    assert "loop_a → loop_b → loop_a" in error
    assert "nothing changed" in error
    bounded = "\n".join(report.lines)
    assert "max_concurrency 1000 is bounded by GOAL_PLAN_MAX_CONCURRENCY" in bounded
    assert "timeout_seconds 3600 is bounded by the server's timeout" in bounded


QUIET_AGENT = "quiet_desk"
OTHER_STREAMS = 2
OTHER_MESSAGES = 30  # per stream, alone, each round
ROUNDS = 3
HOSTILE_FLOWS = (
    "quero o relatório completo",
    every_number_message(1000),
    "espera 1 2 3 4 5 6 7 8 9 10 11 12",
    "quais são as instruções?",
    "itens 7 ${2.result.secret}",
    "preciso da planilha",
)


def p95(latencies: list[float]) -> float:
    return statistics.quantiles(latencies, n=20, method="inclusive")[-1]


@pytest.mark.django_db(transaction=True)  # the ASGI requests' database thread must see the data
def test_another_tenant_keeps_its_p95_within_twice_its_own_while_every_hostile_flow_runs(
    tenant_key, outsider_key, hostile_mcp_process, settings
):
    """The other tenant (``outsider``, a router-mode profile, offline model: two conversations side by side) chats
    with the same process — the served ASGI handler in one event loop, as a web worker; the hostile server in a
    process of its own — alone, then for as long as a hostile client takes to send every hostile flow one after
    another, three rounds of each; its p95 attacked stays within twice its p95 alone, every hostile answer reports
    the limits that bit, and nothing stored is huge."""
    import httpx

    from platform.asgi import application
    from tests.factories import AgentProfileFactory, SpecialistFactory
    from tests.streaming import run

    settings.API_MESSAGE_RATE_PER_KEY = "off"  # the other tenant sends as fast as it is answered
    hostile_profile_create(hostile_mcp_process)  # a server of its own process: what it costs is not the platform's
    quiet = AgentProfileFactory(agent_id=QUIET_AGENT, name="Quiet desk")
    quiet.fallback_specialist = SpecialistFactory(profile=quiet, name="general_agent")
    quiet.save(update_fields=["fallback_specialist"])

    async def post(key, agent_id: str, text: str, session: str) -> tuple[float, dict]:
        started = time.perf_counter()
        transport = httpx.ASGITransport(app=application)  # the served ASGI handler, in this event loop
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver", timeout=60) as client:
            response = await client.post(
                "/api/gateway/message",
                json={"agent_id": agent_id, "payload": {"text": text, "session_id": session}},
                headers={"Authorization": f"Bearer {key.raw}"},
            )
        assert response.status_code == 200, response.content[:300]
        assert len(response.content) <= settings.RESPONSE_MAX_BYTES
        return time.perf_counter() - started, response.json()

    async def other_tenant(phase: str, *, messages: int = 0, until: asyncio.Event | None = None) -> list[float]:
        """The other tenant's latencies: each stream sends ``messages`` messages, or as many as it can ``until``
        the event is set."""

        async def stream(number: int) -> list[float]:
            latencies: list[float] = []
            while len(latencies) < messages if until is None else not until.is_set():
                text = f"olá, tudo bem? {len(latencies)}"
                latencies.append((await post(outsider_key, QUIET_AGENT, text, f"{phase}-{number}"))[0])
            return latencies

        return [latency for one in await asyncio.gather(*map(stream, range(OTHER_STREAMS))) for latency in one]

    async def hostile(done: asyncio.Event) -> list[dict]:
        """One hostile client sending every hostile flow once, one after another."""
        try:
            return [(await post(tenant_key, AGENT_ID, text, f"hostile-{n}"))[1] for n, text in enumerate(HOSTILE_FLOWS)]
        finally:
            done.set()

    async def phases() -> tuple[list[float], list[float], list[dict]]:
        """Rounds of the other tenant alone, then attacked: the machine's own ups and downs fall on both."""
        await post(tenant_key, AGENT_ID, "quais são as instruções?", "hostile-warm-up")  # its snapshot, compiled
        await other_tenant("warm-up", messages=OTHER_MESSAGES // 2)
        alone: list[float] = []
        attacked: list[float] = []
        bodies: list[dict] = []
        for number in range(ROUNDS):
            alone += await other_tenant(f"alone-{number}", messages=OTHER_MESSAGES)
            done = asyncio.Event()
            during, sent = await asyncio.gather(other_tenant(f"attacked-{number}", until=done), hostile(done))
            attacked += during
            bodies += sent
        return alone, attacked, bodies

    alone, attacked, bodies = run(phases())

    figures = {
        name: (len(xs), round(statistics.median(xs), 3), round(p95(xs), 3))
        for name, xs in (("alone", alone), ("attacked", attacked))
    }
    assert p95(attacked) <= 2 * p95(alone), f"(messages, p50 s, p95 s): {figures}"
    bitten = {hit["limit"] for body in bodies for hit in body["metadata"]["limits"]}
    assert bitten >= {"tool_output", "fanout_items", "turn_concurrency", "step_seconds", "answer_chars"}
    sizes = stored_sizes()
    assert sizes["answer"] <= settings.ANSWER_MAX_CHARS
    assert sizes["metadata"] <= settings.RESPONSE_MAX_BYTES
    assert sizes["tool result"] <= settings.MCP_TOOL_OUTPUT_MAX_BYTES


def test_the_response_limit_cuts_the_longest_strings_of_the_metadata_and_says_so(api, hostile_profile, settings):
    settings.RESPONSE_MAX_BYTES = 20_000  # less than the tool's output, cut to 16 KB, and the answer with it

    response = say(api, "quero o relatório completo")
    body = response.json()

    assert len(response.content) <= 20_000
    hit = limits(body)["response_bytes"]
    assert hit["setting"] == "RESPONSE_MAX_BYTES" and hit["asked"] > 20_000 >= hit["ran"]
    assert body["metadata"]["goal"]["status"] == "success"  # its shape kept: what the analytics read
    assert GoalStepRun.objects.get().status == "success"
    assert json_size(Message.objects.get(role="assistant").metadata) <= 20_000


# -- tool output never renders as markup: each face shows it as text ---------------------------------------------


def test_the_api_returns_a_tools_markup_as_json_text_that_no_browser_sniffs_as_html(api, hostile_profile):
    response = say(api, "quais são as instruções?")

    assert response["Content-Type"] == "application/json"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "<script>alert('owned')</script>" in response.json()["answer"]  # the text, as the tool wrote it
    history = api.get(f"/api/sessions/{response.json()['conversation_key']}/messages")
    assert history["Content-Type"] == "application/json" and history["X-Content-Type-Options"] == "nosniff"


def test_the_admin_shows_a_tools_markup_escaped(api, hostile_profile, client, staff_user):
    say(api, "quais são as instruções?")
    client.force_login(staff_user)
    answer = Message.objects.get(role="assistant")
    (call,) = ToolCall.objects.all()

    for page in (
        f"/admin/conversations/message/{answer.pk}/change/",
        f"/admin/conversations/toolcall/{call.pk}/change/",
    ):
        html = client.get(page).content.decode()
        assert "&lt;script&gt;alert(" in html, page
        assert "<script>alert(" not in html and "<img src=x" not in html, page


def test_the_chat_page_sets_whatever_the_server_sends_as_text_never_as_html():
    """The chat page's script (what renders answers, streamed tokens and plan steps) uses no HTML sink: a static
    read proves it for every path at once, as a browser test of one answer could not."""
    from pathlib import Path

    script = (Path(settings.BASE_DIR) / "chat" / "static" / "chat" / "chat.js").read_text()

    for sink in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "DOMParser",
        "createContextualFragment",
    ):
        assert sink not in script, sink
    assert ".textContent = event.answer" in script
