"""A hostile MCP server synced into goal mode (``tests/hostile_mcp.py``): every limit the platform sets bites, is
reported in ``metadata.goal.limits``, and nothing huge is stored or returned; tool output stays data; a user's
``${…}`` stays text; and another tenant chatting meanwhile is answered throughout (how fast: the benchmark
``bench/hostile_neighbour.py``)."""

from __future__ import annotations

import pytest
from django.conf import settings

from common.i18n import say as say_in
from common.sizes import json_size
from conversations.goals.turn import FAILED_PLAN_ANSWER
from conversations.models import GoalStepRun, Message, ToolCall
from tests.hostile_mcp import (
    AGENT_ID,
    BIG_CHARS,
    HOSTILE_FLOWS,
    HUGE_CHARS,
    INJECTED,
    LIMITS_BITTEN,
    SEEN,
    SERVER_TIMEOUT_SECONDS,
    every_number_message,
    hostile_profile_create,
    hostile_register,
    neighbours_run,
    quiet_profile_create,
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


def test_a_servers_6_mb_answer_is_not_read_its_step_fails_saying_so_and_nothing_huge_is_stored(api, hostile_profile):
    response = say(api, "quero o relatório completo")
    body = response.json()

    hit = limits(body)["tool_response"]
    assert hit["setting"] == "MCP_RESPONSE_MAX_BYTES" and hit["value"] == settings.MCP_RESPONSE_MAX_BYTES
    assert hit["asked"] > 2 * HUGE_CHARS and hit["ran"] == 0  # its declared length: not a byte of it read
    assert "tool_output" not in limits(body)
    (output,) = body["metadata"]["goal"]["outputs"].values()
    assert output["status"] == "failure" and output["metadata"]["refused"] == hit["asked"]
    assert output["explanation"] == "huge_report respondeu demais e não foi lido."  # in the customer's language
    (call,) = ToolCall.objects.all()
    assert call.status == "error" and "MCP_RESPONSE_MAX_BYTES" in call.error and call.result is None
    assert len(response.content) <= settings.RESPONSE_MAX_BYTES
    assert max(stored_sizes().values()) <= settings.MCP_TOOL_OUTPUT_MAX_BYTES


def test_a_tools_200_kb_output_is_read_then_cut_with_a_marker_and_nothing_huge_is_stored_or_returned(
    api, hostile_profile
):
    response = say(api, "quero o resumo")
    body = response.json()

    assert len(response.content) <= settings.RESPONSE_MAX_BYTES
    assert len(body["answer"]) <= settings.ANSWER_MAX_CHARS
    assert "…[cut:" in body["answer"]
    cut = limits(body)["tool_output"]
    assert cut["setting"] == "MCP_TOOL_OUTPUT_MAX_BYTES"
    assert cut["asked"] > BIG_CHARS and cut["ran"] <= settings.MCP_TOOL_OUTPUT_MAX_BYTES
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

    body = say(api, "espera " + " ".join(str(n) for n in range(1, 13))).json()

    hits = limits(body)
    assert hits["step_seconds"]["asked"] == 3600 and hits["step_seconds"]["ran"] == SERVER_TIMEOUT_SECONDS
    assert hits["plan_seconds"]["value"] == 0.5
    assert (hits["plan_seconds"]["asked"], hits["plan_seconds"]["ran"]) == (settings.GOAL_FANOUT_MAX_ITEMS, 0)
    # The plan's own clock, not the server's: every call started was given what was left of the plan's time
    # (shorter than the server's 1 s), read from what the engine did rather than from how long it took (that the
    # plan ends within its limit and grace even when the calls cannot end themselves: test_goal_engine.py).
    started = [out for out in body["metadata"]["goal"]["outputs"].values() if out["status"] != "skipped"]
    assert 1 <= len(started) <= settings.GOAL_PLAN_MAX_CONCURRENCY
    assert all(out["metadata"]["plan_time"] is True and out["metadata"]["status"] == "timeout" for out in started)
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

    assert body["answer"] == say_in(body["metadata"]["language"], FAILED_PLAN_ANSWER)
    assert "find_item" in body["metadata"]["goal"]["reason"]


def test_a_specialists_tool_output_is_cut_in_router_mode_too(api, hostile_profile):
    body = say(api, "preciso da planilha").json()  # the intent's one tool, with no argument

    (result,) = body["metadata"]["mcp_results"]
    assert result["tool"] == "big_report"
    assert result["cut"] > BIG_CHARS
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


@pytest.mark.django_db(transaction=True)  # the ASGI requests' database thread must see the data
def test_another_tenant_is_answered_throughout_every_hostile_flow_and_nothing_stored_is_huge(
    tenant_key, outsider_key, hostile_mcp_process, settings
):
    """The other tenant (``outsider``, a router-mode profile, the offline model: two conversations side by side)
    chats with the same process — the served ASGI handler in one event loop, as a web worker — while a hostile
    client sends every hostile flow, the hostile server in a process of its own: every message of both is answered
    within the response limit, every hostile answer reports the limits that bit, and nothing stored is huge. How
    much the other tenant's latency moves meanwhile is a figure of ``bench/hostile_neighbour.py``, not a timed
    assertion."""
    from platform.asgi import application
    from tests.streaming import run

    # The other tenant's streams send as fast as they are answered, each in one session: no customer's pace.
    settings.API_MESSAGE_RATE_PER_KEY = settings.API_MESSAGE_RATE_PER_SESSION = "off"
    hostile_profile_create(hostile_mcp_process)  # a server of its own process: what it costs is not the platform's
    quiet_profile_create()

    seen = run(neighbours_run(application, hostile_key=tenant_key.raw, quiet_key=outsider_key.raw, rounds=1))

    assert seen.attacked and len(seen.hostile_answers) == len(HOSTILE_FLOWS)
    assert all(body["answer"] and body["agent"] == "general_agent" for body in seen.quiet_answers)
    assert seen.limits_bitten() >= LIMITS_BITTEN
    sizes = stored_sizes()
    assert sizes["answer"] <= settings.ANSWER_MAX_CHARS
    assert sizes["metadata"] <= settings.RESPONSE_MAX_BYTES
    assert sizes["tool result"] <= settings.MCP_TOOL_OUTPUT_MAX_BYTES


def test_the_response_limit_cuts_the_longest_strings_of_the_metadata_and_says_so(api, hostile_profile, settings):
    settings.RESPONSE_MAX_BYTES = 20_000  # less than the tool's output, cut to 16 KB, and the answer with it

    response = say(api, "quero o resumo")
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
