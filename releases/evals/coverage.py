"""What of a profile a conversation test suite exercises (:func:`suite_coverage`), area by area: its intents, its
goals (goal mode), its flows (the states its state policies wait in, and those its intents set), the tools its
specialists, intents, flows and capabilities may call, the platform's languages and the conversation-repair patterns
(:data:`routing.repairs.PATTERNS`).

A suite exercises what its tests expect (an ``intent``, ``topics``, a ``goal``, a ``state``, ``tools_called``, a
language, a ``repair``) and, once played, what the turns showed (the decision, the state after, the tools called, the
answer's language). Pure: no database."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from common.language import LANGUAGES
from routing.public import REPAIR_PATTERNS, ConversationCase, ProfileSpec, goal_label

INTENTS, GOALS, FLOWS, TOOLS, LANGUAGE, REPAIRS = "intents", "goals", "flows", "tools", "languages", "repairs"
AREAS = (INTENTS, GOALS, FLOWS, TOOLS, LANGUAGE, REPAIRS)
AREA_WORDS = {
    INTENTS: "intents",
    GOALS: "goals",
    FLOWS: "flows (states)",
    TOOLS: "tools",
    LANGUAGE: "languages",
    REPAIRS: "repair patterns",
}
SHOWN_MISSING = 10  # named in a line


@dataclass(frozen=True)
class Area:
    """One area: what the profile has, and which of it the suite exercises."""

    name: str
    has: tuple[str, ...]
    exercised: tuple[str, ...]

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(item for item in self.has if item not in self.exercised)

    def as_dict(self) -> dict[str, Any]:
        return {"has": list(self.has), "exercised": list(self.exercised), "missing": list(self.missing)}

    def line(self) -> str:
        """``intents: 12 of 14 (missing: a, b)``; ``goals: none in the profile``."""
        if not self.has:
            return f"{AREA_WORDS[self.name]}: none in the profile"
        said = f"{AREA_WORDS[self.name]}: {len(self.exercised)} of {len(self.has)}"
        missing = self.missing
        if not missing:
            return said
        names = ", ".join(missing[:SHOWN_MISSING]) + (" …" if len(missing) > SHOWN_MISSING else "")
        return f"{said} (missing: {names})"


@dataclass(frozen=True)
class Coverage:
    areas: tuple[Area, ...]

    def as_dict(self) -> dict[str, Any]:
        return {area.name: area.as_dict() for area in self.areas}

    def lines(self) -> list[str]:
        return [area.line() for area in self.areas]


def profile_has(profile: ProfileSpec) -> dict[str, tuple[str, ...]]:
    """Each area's names in the profile, sorted."""
    policies = profile.router.state_policies
    tools: set[str] = set()
    for specialist in profile.specialists.values():
        tools |= specialist.allowed_tools
    for intent in profile.intents:
        tools |= set(intent.mcp_tools)
    for policy in policies.values():
        tools |= set(policy.mcp_tools)
    tools |= {capability.tool_name for capability in profile.goals.capabilities.values() if capability.enabled}
    flows = set(policies) | {intent.next_state for intent in profile.intents if intent.next_state}
    flows |= {policy.next_state for policy in policies.values() if policy.next_state}
    return {
        INTENTS: tuple(sorted(intent.name for intent in profile.intents if not intent.remote)),
        GOALS: tuple(sorted(goal_label(goal) for goal in profile.goals.enabled_goals())),
        FLOWS: tuple(sorted(flows)),
        TOOLS: tuple(sorted(tools)),
        LANGUAGE: LANGUAGES,
        REPAIRS: REPAIR_PATTERNS,
    }


def suite_exercises(
    cases: Sequence[ConversationCase], results: Iterable[Mapping[str, Any]] = ()
) -> dict[str, set[str]]:
    """Each area's names the tests expect, and those the played turns showed (``results``: each test's
    :meth:`releases.evals.run.CaseResult.as_dict`)."""
    seen: dict[str, set[str]] = {area: set() for area in AREAS}
    for case in cases:
        if case.language:
            seen[LANGUAGE].add(case.language)
        for turn in case.turns:
            _expected(turn.expect, seen)
    for result in results:
        for turn in result.get("turns") or ():
            _shown(turn, seen)
    return seen


def _expected(expect: Mapping[str, Any], seen: dict[str, set[str]]) -> None:
    seen[INTENTS].update(_names(expect.get("intent")) | _names(expect.get("topics")))
    seen[GOALS].update(_names(expect.get("goal")))
    for key in ("state", "next_state", "state_after"):
        seen[FLOWS].update(_names(expect.get(key)))
    called = expect.get("tools_called") or ()
    seen[TOOLS].update(str(name) for name in called)
    seen[LANGUAGE].update(_names(expect.get("answer_language")) | _names(expect.get("language")))
    seen[REPAIRS].update(_names(expect.get("repair")))


def _shown(turn: Mapping[str, Any], seen: dict[str, set[str]]) -> None:
    decision = turn.get("decision") or {}
    seen[INTENTS].update(_names(decision.get("intent")) | _names(decision.get("topics")))
    seen[GOALS].update(_names(decision.get("goal")))
    seen[FLOWS].update(_names(turn.get("state")) | _names(decision.get("next_state")))
    seen[TOOLS].update(str(call.get("tool")) for call in turn.get("tools") or () if call.get("tool"))
    seen[LANGUAGE].update(_names(decision.get("language")))
    seen[REPAIRS].update(_names(decision.get("repair")))


def _names(value: Any) -> set[str]:
    if not value or isinstance(value, bool):
        return set()
    if isinstance(value, str):
        return {value}
    return {str(item) for item in value if item}


def suite_coverage(
    profile: ProfileSpec, cases: Sequence[ConversationCase], results: Iterable[Mapping[str, Any]] = ()
) -> Coverage:
    """What of ``profile`` (compiled) the tests exercise, area by area (:func:`profile_has`, :func:`suite_exercises`):
    a name the suite exercises that the profile does not have is left out (an intent of another version)."""
    has = profile_has(profile)
    seen = suite_exercises(cases, results)
    return Coverage(
        tuple(Area(area, has[area], tuple(name for name in has[area] if name in seen[area])) for area in AREAS)
    )
