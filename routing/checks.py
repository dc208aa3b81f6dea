"""System checks over what the published versions serve (the rows' own are :mod:`agents.checks`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.apps import AppConfig
from django.core.checks import CheckMessage, Tags, Warning, register
from django.db import DatabaseError

from agents.public import HINT_KEY_VARIABLE, model_key_variable_refusal
from common.patterns import pattern_problem
from platform import env
from routing.models import Goal, ProfileRelease


@register(Tags.database)
def served_model_key_variables_check(
    app_configs: Sequence[AppConfig] | None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """The key variable of each profile's released version (:func:`served_version_problems`; a rollout's candidate:
    :mod:`releases.checks`)."""
    if not databases:
        return []
    try:
        served = [
            (release.profile, release.version, "is served")
            for release in ProfileRelease.objects.select_related("profile", "version").order_by("profile__agent_id")
        ]
    except DatabaseError:  # migrate runs the checks before it creates or alters the tables
        return []
    return served_version_problems(served)


def served_version_problems(served: Iterable[tuple[Any, Any, str]]) -> list[CheckMessage]:
    """The key variable of each version customers are served (``served``: its profile, the version, and how it is
    served, in words) is one the operator allows (``routing.W002``; else it is never read), and holds a value here
    when it is not the profile's own (``routing.W001``; ``agents.W002`` warns of that one): an edit of the variable
    not yet published leaves the served version reading the old one. Names the variable, never a value."""
    problems: list[CheckMessage] = []
    for profile, version, how in served:
        if profile is None or version is None:  # a plan not yet given its candidate
            continue
        settings = version.document.get("profile", {})
        variable = settings.get("llm_api_key_env", "")
        if not variable or not settings.get("enabled", True):
            continue
        refusal = model_key_variable_refusal(variable)
        if refusal is not None:  # whatever the row says: a version published before the rule
            problems.append(
                Warning(
                    f"Version {version.number} of profile {profile.agent_id} {how}, but its model key variable is "
                    f"never read, so its answers will be the error answer: {refusal}",
                    hint=f"Publish the profile with an allowed variable. {HINT_KEY_VARIABLE}",
                    obj=profile,
                    id="routing.W002",
                )
            )
            continue
        if variable == profile.llm_api_key_env:
            continue
        if not env.string(variable):
            problems.append(
                Warning(
                    f"Version {version.number} of profile {profile.agent_id} {how} and reads its model key from "
                    f"{variable}, which is not set; its answers will be the error answer.",
                    hint=f"Set {variable} in this process's environment, or publish the profile's current model "
                    "settings.",
                    obj=profile,
                    id="routing.W001",
                )
            )
    return problems


@register(Tags.database)
def entity_patterns_check(
    app_configs: Sequence[AppConfig] | None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """Each goal's entity patterns compile under RE2 (``routing.W003``): one stored before patterns were checked at
    save (a lookaround, a backreference) is skipped by the offline reader — its entity is not read from messages —
    until it is rewritten on the goal's page or by its server's manifest."""
    if not databases:
        return []
    try:
        goals = list(Goal.objects.order_by("domain", "name").only("domain", "name", "entities_schema"))
    except DatabaseError:  # migrate runs the checks before it creates or alters the tables
        return []
    problems: list[CheckMessage] = []
    for goal in goals:
        schema = goal.entities_schema if isinstance(goal.entities_schema, dict) else {}
        for name, entity in schema.items():
            pattern = entity.get("pattern") if isinstance(entity, dict) else None
            problem = pattern_problem(pattern) if isinstance(pattern, str) else ""
            if problem:
                problems.append(
                    Warning(
                        f"The goal {goal.domain}.{goal.name}'s entity {name!r} has a pattern the platform does not "
                        f"match, so the entity is not read from messages: {problem}.",
                        hint="Rewrite the pattern without lookarounds or backreferences on the goal's page (or in "
                        "its server's manifest); docs/goals.md says how.",
                        obj=goal,
                        id="routing.W003",
                    )
                )
    return problems
