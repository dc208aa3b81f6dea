"""Saved routing tests in goal mode: the demo's finance_assistente over the real finance MCP server's manifest
(synced as ``scripts/start`` does), decided by goal_decide — the status (plan, clarification, general) and the
goal — and by the router for what no goal covers."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from agents.models import AgentProfile, McpServer
from common.config_version import config_version_bump
from releases.routing_tests import Case, CaseTurn, routing_tests_run, routing_tests_spec
from tests.demo_snapshot import demo_seed


@pytest.fixture
def finance(db, finance_mcp):
    demo_seed()
    McpServer.objects.filter(name="finance").update(endpoint=finance_mcp)
    config_version_bump()  # QuerySet.update bypasses the invalidation signals
    call_command("sync_mcp_tools", "finance", stdout=StringIO())
    return AgentProfile.objects.get(agent_id="finance_assistente")


def test_goal_cases_expect_a_status_and_a_goal(finance):
    cases = [
        Case(name="preço sem ativo", message="qual o preço?", expect={"status": "clarification", "goal": "GET_QUOTE"}),
        Case(
            name="maiores altas",
            message="maiores altas do Brasil",
            expect={"status": "plan", "goal": "finance.TOP_MOVERS", "agent": "goal_planner", "method": "goal"},
        ),
        Case(name="bom dia", message="bom dia", expect={"status": "general", "agent": "general_agent"}),
        Case(name="cotação pedida", message="cotação da PETR4", expect={"status": "clarification"}),
    ]

    run = routing_tests_run(routing_tests_spec(finance), cases)

    asked, planned, general, quoted = run.results
    assert asked.passed, asked.failure_text()
    assert asked.actual["intent"] == "finance.GET_QUOTE" and "symbol" in asked.reason
    assert planned.passed, planned.failure_text()
    assert general.passed, general.failure_text()
    assert general.actual["goal"] == "" and general.actual["method"] != "goal"
    assert quoted.failed == ("status",) and quoted.actual["status"] == "plan"
    assert quoted.actual["goal"] == "finance.GET_QUOTE"
    assert run.failed == 1


def test_a_goal_mode_profile_decides_every_case_with_goal_decide(finance):
    intent_only = Case(name="intent", message="maiores altas do Brasil", expect={"intent": "finance.TOP_MOVERS"})

    (result,) = routing_tests_run(routing_tests_spec(finance), [intent_only]).results

    assert result.passed, result.failure_text()
    assert result.actual["status"] == "plan"


def test_a_goal_conversation_carries_the_goal_state_so_the_answer_to_a_clarification_completes_the_goal(finance):
    asked = CaseTurn("qual o preço?", {"status": "clarification", "goal": "GET_QUOTE"})
    conversation = Case(
        name="preço, depois o ativo",
        message="da Vale",
        expect={"status": "plan", "goal": "finance.GET_QUOTE", "state_after": ""},
        turns=(asked,),
    )
    alone = Case(name="só o ativo", message="da Vale", expect={"status": "plan", "goal": "finance.GET_QUOTE"})

    played, single = routing_tests_run(routing_tests_spec(finance), [conversation, alone]).results

    assert played.passed, played.failure_text()
    assert played.turns[0].actual["status"] == "clarification"
    assert not single.passed and single.actual["status"] == "general"  # alone, "da Vale" is no quote
