"""The demo's saved routing tests (config/demo/tests/<profile>.yaml): seed_demo loads them, they all pass.

The demo is loaded as shipped, with the finance server running as a real process and synced (the way
``scripts/start`` does it), offline: no model is configured, so each case is decided by the keywords, the state
policies, the coordinator, the fallback or the offline goal reader. A profile whose suite failed would be left
unpublished by ``seed_demo``; version 1 is the proof that the publishing gate ran and passed.
"""

from __future__ import annotations

from io import StringIO
from urllib.parse import urlsplit

import pytest
from django.core.management import call_command

from agents.models import AgentProfile
from routing.management.commands.seed_demo import TESTS_DIR
from routing.models import RoutingTestCase
from routing.routing_tests import LIVE, routing_tests_parse, routing_tests_run, routing_tests_saved, routing_tests_spec
from routing.versions import live_version

DEMO_PROFILES = ["telecom_contas", "retail_orders", "telecom_assistente", "finance_assistente"]
MIN_CASES = 30


@pytest.fixture
def demo(db, finance_mcp, monkeypatch):
    server = urlsplit(finance_mcp)
    monkeypatch.setenv("MCP_FINANCE_HOST", server.hostname)
    monkeypatch.setenv("MCP_FINANCE_PORT", str(server.port))
    out, err = StringIO(), StringIO()
    call_command("seed_demo", "--sync", stdout=out, stderr=err)
    return err.getvalue()  # seed_demo's warnings


def test_every_demo_profile_ships_a_suite_of_at_least_30_cases_for_itself():
    for agent_id in DEMO_PROFILES:
        path = TESTS_DIR / f"{agent_id}.yaml"
        profile, cases = routing_tests_parse(path.read_text(encoding="utf-8"), name=path.name)
        assert profile == agent_id
        assert len(cases) >= MIN_CASES, (agent_id, len(cases))


@pytest.mark.parametrize("agent_id", DEMO_PROFILES)
def test_seed_demo_saves_the_suite_and_publishes_the_profile_as_version_1_because_every_case_passes(demo, agent_id):
    assert f"warning: {agent_id}" not in demo
    profile = AgentProfile.objects.get(agent_id=agent_id)
    shipped = routing_tests_parse((TESTS_DIR / f"{agent_id}.yaml").read_text(encoding="utf-8"))[1]
    assert RoutingTestCase.objects.filter(profile=profile).count() == len(shipped) >= MIN_CASES
    assert live_version(profile).number == 1

    run = routing_tests_run(routing_tests_spec(profile, LIVE), routing_tests_saved(profile))
    assert run.total == len(shipped)
    assert [result.failure_text() for result in run.failures] == []


def test_the_suites_check_what_the_demo_is_about():
    """Each suite covers its profile's ways of deciding: not only keywords."""
    methods = {}
    for agent_id in DEMO_PROFILES:
        _, cases = routing_tests_parse((TESTS_DIR / f"{agent_id}.yaml").read_text(encoding="utf-8"))
        methods[agent_id] = {case.expect.get("status") or case.expect.get("method") for case in cases}
    assert {"keyword", "state", "fallback"} <= methods["telecom_contas"]
    assert {"keyword", "state", "fallback"} <= methods["retail_orders"]
    assert methods["telecom_assistente"] == {"coordinator"}
    assert {"plan", "clarification", "general"} <= methods["finance_assistente"]
