"""The compiled snapshot carries each profile's goal catalogue from the synced goals and capabilities."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.models import McpTool, RoutingMode
from routing import snapshot
from routing.goals.planner import IntentOutput, goal_resolve, plan_build
from routing.models import Capability, Goal
from tests.factories import AgentProfileFactory, McpServerFactory, SpecialistFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def profile(finance):
    profile = AgentProfileFactory(agent_id="bolsa_assistente", routing_mode=RoutingMode.GOAL, goal_threshold=0.9)
    SpecialistFactory(profile=profile, name="general_agent")
    profile.goal_domains.set([finance])
    return profile


def catalogue(agent_id: str = "bolsa_assistente"):
    return snapshot.current().profiles[agent_id].goals


def test_a_goal_mode_profile_carries_its_domains_goals_and_capabilities(profile):
    spec = snapshot.current().profiles["bolsa_assistente"]

    assert spec.routing_mode == "goal" and spec.goal_threshold == 0.9
    goals = spec.goals
    assert set(goals.goals) == {("finance", "GET_QUOTE"), ("finance", "TOP_MOVERS")}
    assert set(goals.capabilities) == {
        "get_stock_price",
        "search_symbol",
        "get_top_gainers",
        "get_top_losers",
        "send_message",
    }
    movers = goals.goal("finance", "TOP_MOVERS")
    stored = Goal.objects.get(name="TOP_MOVERS")
    assert movers.entities_schema == stored.entities_schema and movers.examples == tuple(stored.examples)
    assert movers.enabled and movers.confidence_threshold is None
    price = goals.capabilities["get_stock_price"]
    stored_price = Capability.objects.get(name="get_stock_price")
    assert price.metadata["intent_hints"] == {"keywords": stored_price.keywords, "examples": stored_price.examples}
    assert price.metadata["composition"] == stored_price.metadata["composition"]
    assert price.tool == "get_stock_price" and price.enabled
    assert price.description == McpTool.objects.get(name="get_stock_price").description  # none of its own
    assert goals.capabilities["send_message"].roles == ("notifier",)


def test_the_compiled_catalogue_plans_seed_002s_top_movers(profile):
    goals = catalogue()
    intent = IntentOutput("finance", "TOP_MOVERS", {"direction": "BOTH"}, 0.97, "maiores altas e baixas")

    plan = plan_build(goal_resolve(intent, goals.goal("finance", "TOP_MOVERS")), goals.capabilities)

    assert [step.capability for step in plan.steps] == ["get_top_gainers", "get_top_losers"]


def test_business_edits_reach_the_catalogue(profile):
    goal = Goal.objects.get(name="TOP_MOVERS")
    goal.description, goal.confidence_threshold = "Altas e baixas (editado).", 0.7
    goal.save()
    quote = Goal.objects.get(name="GET_QUOTE")
    quote.enabled = False
    quote.save()
    gainers = Capability.objects.get(name="get_top_gainers")
    gainers.keywords = ["subiram"]
    gainers.save()

    goals = catalogue()

    movers = goals.goal("finance", "TOP_MOVERS")
    assert movers.description == "Altas e baixas (editado)." and movers.confidence_threshold == 0.7
    assert [goal.name for goal in goals.enabled_goals()] == ["TOP_MOVERS"]
    assert goals.capabilities["get_top_gainers"].metadata["intent_hints"]["keywords"] == ["subiram"]


def test_the_catalogue_carries_the_goals_examples_tier_while_the_profiles_examples_tier_is_on(profile):
    index = catalogue().examples

    assert index is not None and index.intents == ("finance.GET_QUOTE", "finance.TOP_MOVERS")
    stored = [*Goal.objects.get(name="GET_QUOTE").examples, *Capability.objects.get(name="get_stock_price").examples]
    assert index.texts[: len(stored)] == tuple(dict.fromkeys(stored))
    profile.examples_enabled = False
    profile.save(update_fields=["examples_enabled"])
    assert catalogue().examples is None


def test_a_capability_runs_only_with_its_tool_enabled_on_an_enabled_server(profile, finance):
    losers = McpTool.objects.get(name="get_top_losers")
    losers.enabled = False
    losers.save()
    search = Capability.objects.get(name="search_symbol")
    search.tool = None
    search.save()
    notify = Capability.objects.get(name="send_message")
    notify.enabled = False
    notify.save()

    capabilities = catalogue().capabilities

    assert not capabilities["get_top_losers"].enabled
    assert not capabilities["search_symbol"].enabled and capabilities["search_symbol"].tool == ""
    assert not capabilities["send_message"].enabled
    assert capabilities["get_top_gainers"].enabled
    finance.enabled = False
    finance.save()
    assert not catalogue().capabilities["get_top_gainers"].enabled


def test_a_profile_serves_its_goal_domains_or_every_domain_when_it_names_none(profile, finance):
    other = McpServerFactory(name="bolsa_nordica")
    Capability.objects.create(server=other, domain="nordic", name="nordic_quote")
    Goal.objects.create(server=other, domain="nordic", name="QUOTE", capabilities=["nordic_quote"])
    AgentProfileFactory(agent_id="every_domain", routing_mode=RoutingMode.GOAL)

    assert {domain for domain, _ in catalogue().goals} == {"finance"}
    assert {domain for domain, _ in catalogue("every_domain").goals} == {"finance", "nordic"}
    assert "nordic_quote" in catalogue("every_domain").capabilities
    profile.goal_domains.set([other])
    assert set(catalogue().goals) == {("nordic", "QUOTE")}
    assert set(catalogue().capabilities) == {"nordic_quote"}


def test_every_profile_carries_a_catalogue_for_routing_mode_goal(profile, settings):
    AgentProfileFactory(agent_id="router_profile", routing_mode=RoutingMode.ROUTER)
    settings.ROUTING_MODE = "goal"

    spec = snapshot.current().profiles["router_profile"]

    assert spec.effective_mode == "goal" and spec.goals.goal("finance", "GET_QUOTE") is not None


def test_the_catalogues_cost_the_same_queries_whatever_the_number_of_goals(profile):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            snapshot.build(version=0, generation=0)
        return len(captured)

    few = queries()
    for index in range(6):
        server = McpServerFactory(name=f"domain_{index}")
        for number in range(4):
            Capability.objects.create(server=server, domain=f"d{index}", name=f"d{index}_capability_{number}")
            Goal.objects.create(
                server=server, domain=f"d{index}", name=f"GOAL_{number}", capabilities=[f"d{index}_capability_{number}"]
            )
        AgentProfileFactory(agent_id=f"goal_profile_{index}", routing_mode=RoutingMode.GOAL).goal_domains.set([server])

    assert queries() == few
