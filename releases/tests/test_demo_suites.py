"""The demo's routing test suites (config/demo/tests/) and conversation tests (config/demo/conversation_tests/):
seed_demo loads them, they all pass.

The demo is loaded as shipped, with the finance server running as a real process and synced (the way
``scripts/start`` does it), offline: no model is configured, so each case is decided by the keywords, the state
policies, the coordinator, the fallback or the offline goal reader. A profile whose suite failed would be left
unpublished by ``seed_demo``; version 1 is the proof that the publishing gate ran and passed.

finance_assistente's suites (the ``with_sync/`` folder of each) need the goals the sync reads, so ``seed_demo`` loads
them only with ``--sync`` once the finance server was read (without them the profile would be left unpublished).
"""

from __future__ import annotations

from collections import Counter
from urllib.parse import urlsplit

import pytest
import yaml

from agents.models import AgentProfile
from conversations.tests.test_conversation_language import demo_with_goals  # noqa: F401 — a fixture
from releases.evals import conversation_tests_parse, conversation_tests_saved
from releases.evals.run import conversation_tests_run
from releases.evals.transfer import conversation_tests_file_name
from releases.management.commands.seed_demo import CONVERSATION_TESTS_DIR, DEMO_DIR, SYNCED_TESTS, TESTS_DIR
from releases.models import ConversationTest, RoutingTestCase
from releases.routing_tests import (
    LIVE,
    routing_tests_parse,
    routing_tests_run,
    routing_tests_saved,
    routing_tests_spec,
)
from routing.selectors import live_version
from tests.demo_snapshot import demo_seed

LOADED = ["telecom_contas", "retail_orders", "telecom_assistente"]  # by seed_demo, before publishing
SYNCED = ["finance_assistente"]  # by seed_demo --sync, once the finance server was read
MIN_CASES = 30


def suite(agent_id: str):
    path = TESTS_DIR / f"{agent_id}.yaml" if agent_id in LOADED else TESTS_DIR / "with_sync" / f"{agent_id}.yaml"
    return routing_tests_parse(path.read_text(encoding="utf-8"), name=path.name)


@pytest.fixture
def demo(db, finance_mcp, monkeypatch):
    server = urlsplit(finance_mcp)
    monkeypatch.setenv("MCP_FINANCE_HOST", server.hostname)
    monkeypatch.setenv("MCP_FINANCE_PORT", str(server.port))
    return demo_seed("--sync").stderr  # seed_demo's warnings


def test_every_demo_profile_ships_a_suite_of_at_least_30_cases_for_itself(db):
    for agent_id in LOADED + SYNCED:
        profile, cases = suite(agent_id)
        assert profile == agent_id
        assert len(cases) >= MIN_CASES, (agent_id, len(cases))


@pytest.mark.parametrize("agent_id", LOADED)
def test_seed_demo_saves_the_suite_and_publishes_the_profile_as_version_1_because_every_case_passes(demo, agent_id):
    assert f"warning: {agent_id}" not in demo
    profile = AgentProfile.objects.get(agent_id=agent_id)
    shipped = suite(agent_id)[1]
    assert RoutingTestCase.objects.filter(profile=profile).count() == len(shipped) >= MIN_CASES
    assert live_version(profile).number == 1

    run = routing_tests_run(routing_tests_spec(profile, LIVE), routing_tests_saved(profile))
    assert run.total == len(shipped)
    assert [result.failure_text() for result in run.failures] == []
    conversations = [case for case in shipped if case.turns]
    assert RoutingTestCase.objects.filter(profile=profile).exclude(turns=[]).count() == len(conversations)


def test_seed_demo_with_sync_saves_the_finance_suite_and_publishes_it_because_every_case_passes(demo):
    assert "warning" not in demo
    profile = AgentProfile.objects.get(agent_id="finance_assistente")
    assert live_version(profile).number == 1
    assert RoutingTestCase.objects.filter(profile=profile).count() == len(suite("finance_assistente")[1])

    run = routing_tests_run(routing_tests_spec(profile, LIVE), routing_tests_saved(profile))
    assert run.total >= MIN_CASES
    assert [result.failure_text() for result in run.failures] == []


def test_seed_demo_without_the_sync_leaves_the_finance_suite_out_and_publishes_every_profile(db):
    err = demo_seed().stderr

    assert "warning" not in err
    finance = AgentProfile.objects.get(agent_id="finance_assistente")
    assert not RoutingTestCase.objects.filter(profile=finance).exists()
    assert not ConversationTest.objects.filter(profile=finance).exists()
    assert live_version(finance).number == 1
    for agent_id in CONVERSING:  # the others' conversation tests are loaded, and passed the publishing gate
        profile = AgentProfile.objects.get(agent_id=agent_id)
        assert ConversationTest.objects.filter(profile=profile).count() == len(conversation_suite(agent_id)[1])
        assert live_version(profile).number == 1


def test_the_suites_check_what_the_demo_is_about(db):
    """Each suite covers its profile's ways of deciding: not only keywords."""
    ways = {
        agent_id: {case.expect.get("status") or case.expect.get("method") for case in suite(agent_id)[1]}
        for agent_id in LOADED + SYNCED
    }
    assert {"keyword", "state", "small_talk", "fallback"} <= ways["telecom_contas"]
    assert {"keyword", "state", "small_talk", "fallback"} <= ways["retail_orders"]
    assert ways["telecom_assistente"] == {"coordinator", "sub_conversation", "small_talk"}
    assert {"plan", "clarification", "general"} <= ways["finance_assistente"]


@pytest.mark.parametrize("agent_id", LOADED)
def test_calibrating_a_demo_profile_never_lowers_the_out_of_scope_messages_it_leaves_alone(demo, agent_id):
    """The demo ships the rule its calibration chose: calibrating again keeps it, and leaves no fewer out-of-scope
    samples alone."""
    from releases.calibration import calibrate
    from releases.routing_tests import DRAFT

    profile = AgentProfile.objects.get(agent_id=agent_id)

    result = calibrate(routing_tests_spec(profile, DRAFT), routing_tests_saved(profile))

    assert result.chosen.out_of_scope_left_rate >= result.current.out_of_scope_left_rate
    assert (result.chosen.threshold, result.chosen.margin) == (profile.examples_threshold, profile.examples_margin)
    assert (result.state_threshold, result.keyword_check) == (
        profile.examples_state_threshold,
        profile.examples_keyword_check,
    )


def scenarios(case) -> set[str]:
    """What a conversation test of the demo shows: a side question and the reply after it, a cancel, a correction,
    two requests in one message, small talk inside a flow."""
    turns = [turn.expect for turn in case.turns]
    found = set()
    if any({"pushed", "resumed"} <= set(turn.get("events", ())) for turn in turns) and case.expect.get("method") == (
        "state"
    ):
        found.add("side question, then the reply")
    if case.expect.get("repair") == "cancel" and case.expect.get("state_after") == "":
        found.add("cancel")
    if case.expect.get("repair") == "correct" and case.expect.get("intent") == "retail_order_tracking":
        found.add("correction of the order lookup")
    if len(case.expect.get("topics", ())) >= 2:
        found.add("two requests")
    if any(turn.get("method") == "small_talk" and turn.get("state_after") for turn in turns):
        found.add("small talk in a flow")
    return found


@pytest.mark.parametrize("agent_id", ["telecom_contas", "retail_orders"])
def test_the_router_profiles_ship_conversation_tests_of_each_kind_in_three_languages(db, agent_id):
    shown: dict[str, set[str]] = {}
    for case in suite(agent_id)[1]:
        language = "en" if case.name.endswith("(en)") else "es" if case.name.endswith("(es)") else "pt"
        for scenario in scenarios(case):
            shown.setdefault(scenario, set()).add(language)

    assert set(shown) == {
        "side question, then the reply",
        "cancel",
        "correction of the order lookup",
        "two requests",
        "small talk in a flow",
    }
    assert all(languages == {"pt", "en", "es"} for languages in shown.values()), shown


# --- conversation tests: what the demo's answers say -------------------------------------------------------------

CONVERSING = ["telecom_contas", "retail_orders", "telecom_assistente"]  # loaded by seed_demo, before publishing
CONVERSING_SYNCED = ["finance_assistente"]  # by seed_demo --sync: its plans need the goals the sync reads
LANGUAGES = {"pt", "en", "es"}


def conversation_suite(agent_id: str):
    folder = CONVERSATION_TESTS_DIR / (SYNCED_TESTS if agent_id in CONVERSING_SYNCED else "")
    path = folder / conversation_tests_file_name(agent_id)
    return conversation_tests_parse(path.read_text(encoding="utf-8"), name=path.name)


def test_every_demo_profile_ships_conversation_tests_for_itself(db):
    demo = yaml.safe_load((DEMO_DIR / "agents.yaml").read_text(encoding="utf-8"))
    profiles = {entry["agent_id"] for entry in demo["agents"]}

    assert set(CONVERSING + CONVERSING_SYNCED) == profiles
    for agent_id in profiles:
        agent, cases = conversation_suite(agent_id)
        assert agent == agent_id
        assert len(cases) >= 12, (agent_id, len(cases))


@pytest.mark.usefixtures("demo_with_goals")
@pytest.mark.parametrize("agent_id", CONVERSING + CONVERSING_SYNCED)
def test_seed_demo_saves_the_conversation_tests_and_every_one_passes_against_the_live_version(agent_id):
    """The demo as shipped, its three MCP servers the running example servers (finance's synced): a tool the test
    records no answer for is called for real."""
    profile = AgentProfile.objects.get(agent_id=agent_id)
    shipped = conversation_suite(agent_id)[1]
    assert [case.name for case in conversation_tests_saved(profile)] == sorted(case.name for case in shipped)
    assert live_version(profile).number == 1  # the publishing gate ran them

    run = conversation_tests_run(routing_tests_spec(profile, LIVE), conversation_tests_saved(profile))

    assert run.total == len(shipped)
    assert [result.failure_text() for result in run.failures] == []


@pytest.mark.parametrize("agent_id", CONVERSING + CONVERSING_SYNCED)
def test_each_demo_flow_is_tested_in_three_languages_each_answers_language_named_and_the_suite_has_a_judge(
    db, agent_id
):
    agent, cases = conversation_suite(agent_id)
    assert agent == agent_id
    per_language = Counter(case.language for case in cases)
    assert set(per_language) == LANGUAGES
    assert len(set(per_language.values())) == 1, per_language  # every flow in each language
    turns = [turn for case in cases for turn in case.turns]
    assert all("answer_language" in turn.expect for turn in turns)
    assert all(case.required for case in cases)
    assert any("judge" in turn.expect for turn in turns)


@pytest.mark.parametrize("agent_id", CONVERSING + CONVERSING_SYNCED)
def test_every_tool_a_demo_test_expects_called_has_its_answer_recorded(db, agent_id):
    """So the suites, and the publishing gate that runs them, need no MCP server: the example servers' answers are
    recorded in the tests."""
    unrecorded = []
    for case in conversation_suite(agent_id)[1]:
        for number, turn in enumerate(case.turns, 1):
            recorded = {**case.tool_answers, **turn.tool_answers}
            called = set(turn.expect.get("tools_called") or ())
            unrecorded += [f"{case.name}, turn {number}: {tool}" for tool in sorted(called - set(recorded))]
    assert unrecorded == []
