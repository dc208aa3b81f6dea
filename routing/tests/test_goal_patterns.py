"""An entity's ``pattern`` is written by an editor (the goal's admin page, a goals file) or by an MCP server's
manifest, and matched against every customer message of its domain: it is compiled by RE2 (common/patterns.py),
whose matching time grows with the text, never exponentially. A pattern RE2 cannot compile (a backreference, a
lookaround) is refused where it is written, naming the entity; one stored before is skipped by the reader, listed by
a system check, and never stalls or breaks a turn."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest
from django.core.checks import run_checks

from common.patterns import pattern_compiled, pattern_problem
from routing.goals.intent import INCOMPLETE, intent_read
from routing.goals.manifest import ManifestError, manifest_read
from routing.goals.planner import GoalCatalogue, GoalSpec, IntentOutput
from routing.models import Capability, Goal
from routing.tests.test_goal_intent import profile_serving
from tests.adminkit import change_url, error_messages, form_data
from tests.factories import McpServerFactory

CATASTROPHIC = r"^(?P<value>(a+)+)$"  # nested quantifiers: Python's engine tries 2 ** n ways on n a's and a "!"
LOOKAHEAD = r"(?=\d{4})(?P<value>\d+)"
BACKREFERENCE = r"(?P<value>(\w)\2)"


def manifest(pattern: Any) -> dict[str, Any]:
    return {
        "domain": "codes",
        "goals": [
            {
                "goal": "FIND_CODE",
                "capabilities": ["find_code"],
                "entities_schema": {"code": {"type": "string", "required": True, "pattern": pattern}},
            }
        ],
        "capabilities": [{"capability": "find_code", "metadata": {"intent_hints": {"keywords": ["code", "codigo"]}}}],
    }


def catalogue(goal: GoalSpec) -> GoalCatalogue:
    return GoalCatalogue(goals={(goal.domain, goal.name): goal}, capabilities=manifest_read(manifest("x")).capabilities)


def read(goal: GoalSpec, text: str) -> Any:
    """``text`` read as the answer to the goal's question for its entity (the pending goal's entities are read)."""
    pending = IntentOutput(goal.domain, goal.name, {}, INCOMPLETE, "codigo")
    return asyncio.run(intent_read(profile_serving(catalogue(goal)), text, previous=pending))


@pytest.fixture(autouse=True)
def offline(settings):
    settings.OPENAI_BASE_URL = ""
    settings.ROUTER_LLM_BASE_URL = ""


def test_a_nested_quantifier_reads_a_customers_long_message_without_backtracking():
    goal = manifest_read(manifest(CATASTROPHIC)).goals["FIND_CODE"]

    # 60 a's and a "!": 2 ** 60 ways for Python's engine (the probe's 25 took 13 s); RE2 reads it once.
    stalled = read(goal, "a" * 60 + "!")
    found = read(goal, "a" * 60)

    assert stalled.entities == {}
    assert found.entities == {"code": "a" * 60}


def test_editor_patterns_are_compiled_by_re2_with_their_named_groups():
    compiled = pattern_compiled(r"\b(?:code|codigo)\s+(?P<value>[A-Z]{2}\d{3})")

    assert compiled is not None and type(compiled).__module__.startswith("re2")
    assert [match.groupdict()["value"] for match in compiled.finditer("code AB123 and codigo CD456")] == [
        "AB123",
        "CD456",
    ]


def test_a_word_class_reads_letters_of_any_script_as_pythons_does():
    compiled = pattern_compiled(r"\b(?:para|to)\s+(?P<value>[A-ZÀ-Ý][\w-]*)\W")

    assert compiled is not None
    assert compiled.search("voos para Atlântida!").group("value") == "Atlântida"


@pytest.mark.parametrize(
    ("pattern", "why"),
    [(LOOKAHEAD, "(?="), (BACKREFERENCE, "\\2"), ("(?P<value>[a-", "missing ]")],
    ids=["lookahead", "backreference", "broken"],
)
def test_a_pattern_re2_cannot_compile_is_refused_in_a_manifest_naming_the_entity_and_why(pattern, why):
    with pytest.raises(ManifestError) as refused:
        manifest_read(manifest(pattern))

    message = str(refused.value)
    assert message.startswith("goals[0].entities_schema.code.pattern: ")
    assert why in message and "RE2" in message
    assert pattern_problem(pattern) in message


def test_a_pattern_that_is_not_text_is_refused():
    with pytest.raises(ManifestError, match=r"entities_schema\.code\.pattern: must be text"):
        manifest_read(manifest(["a"]))


def test_a_stored_pattern_re2_refuses_is_skipped_by_the_reader_and_the_turn_goes_on():
    valid = manifest_read(manifest(r"(?P<value>\d+)")).goals["FIND_CODE"]
    stored = replace(valid, entities_schema={"code": {"type": "string", "pattern": LOOKAHEAD}})

    assert read(valid, "12345").entities == {"code": "12345"}
    assert read(stored, "12345").entities == {}


def test_the_value_is_the_first_value_group_that_took_part_and_a_match_without_one_reads_nothing():
    # RE2 lets a name appear once: alternatives name their groups value, value_2, ...; an alternative with none
    # (here: the courtesy word) is matched so that no other alternative reads it.
    pattern = r"^\s*(?i:thanks)|^\s*(?P<value_alone>[A-Z]\w+)\s*$|\bcode\s+(?P<value>[A-Z]\w+)"
    goal = manifest_read(manifest(pattern)).goals["FIND_CODE"]

    assert read(goal, "code Alpha").entities == {"code": "Alpha"}
    assert read(goal, "Thanks").entities == {}


# -- where patterns are written and kept -----------------------------------------------------------------------------


@pytest.fixture
def goal(db) -> Goal:
    server = McpServerFactory(name="codes")
    Capability.objects.create(server=server, domain="codes", name="find_code")
    return Goal.objects.create(
        server=server,
        domain="codes",
        name="FIND_CODE",
        capabilities=["find_code"],
        entities_schema={"code": {"type": "string", "pattern": r"(?P<value>\d+)"}},
    )


@pytest.mark.sqlite_too
def test_the_goal_admin_refuses_a_lookahead_naming_the_entity_and_saying_why(staff_client, goal):
    data = form_data(staff_client.get(change_url(goal)))
    data["entities_schema"] = '{"code": {"type": "string", "pattern": "(?=\\\\d{4})(?P<value>\\\\d+)"}}'

    response = staff_client.post(change_url(goal), data)

    assert response.status_code == 200
    [message] = error_messages(response)
    assert message.startswith("FIND_CODE.entities_schema.code.pattern: ") and "(?=" in message
    goal.refresh_from_db()
    assert goal.entities_schema["code"]["pattern"] == r"(?P<value>\d+)"


@pytest.mark.django_db
def test_a_system_check_lists_the_stored_patterns_re2_refuses(goal):
    Goal.objects.filter(pk=goal.pk).update(entities_schema={"code": {"type": "string", "pattern": LOOKAHEAD}})

    warnings = [message for message in run_checks(include_deployment_checks=False, databases=["default"])]

    [found] = [message for message in warnings if message.id == "routing.W003"]
    assert "codes.FIND_CODE" in found.msg and "code" in found.msg and "(?=" in found.msg
