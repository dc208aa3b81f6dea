"""Reads of routing data (the message path uses :mod:`routing.snapshot` instead)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Q

from agents.models import AgentProfile, RoutingMode
from common.i18n import DEFAULT_LANGUAGE
from common.text import normalize
from common.translation_forms import missing_lines, rows_missing
from routing.goals.planner import GOAL_TRANSLATED
from routing.models import (
    INTENT_TRANSLATED,
    Goal,
    Intent,
    Keyword,
    ProfileRelease,
    RolloutFlag,
    RolloutFlagChange,
    RoutingVersion,
)


def keyword_conflicts(*, profile_id: int, texts: Iterable[str], exclude_intent_id: int | None = None) -> dict[str, str]:
    """Map each given keyword already used by another *enabled* intent of the profile to that intent's name.

    Keys are the keywords as given; comparison is on the normalised form, so
    ``"Cobrança"`` conflicts with ``"cobranca"``.
    """
    by_normalized: dict[str, str] = {}
    for text in texts:
        by_normalized.setdefault(normalize(text), text)
    if not by_normalized:
        return {}
    rows = Keyword.objects.filter(
        intent__profile_id=profile_id,
        intent__enabled=True,
        normalized__in=list(by_normalized),
    )
    if exclude_intent_id is not None:
        rows = rows.exclude(intent_id=exclude_intent_id)
    conflicts: dict[str, str] = {}
    for normalized, intent_name in rows.values_list("normalized", "intent__name").order_by("intent__name"):
        conflicts.setdefault(by_normalized[normalized], intent_name)
    return conflicts


def rollout_flag_get(*, key: str) -> RolloutFlag | None:
    """The flag with its user and tenant overrides (and their tenants) loaded, or ``None``."""
    return RolloutFlag.objects.prefetch_related("user_overrides", "tenant_overrides__tenant").filter(key=key).first()


def rollout_flag_changes(*, key: str, limit: int = 10) -> list[RolloutFlagChange]:
    """The flag's latest history rows, newest first (also those of a deleted flag of that key)."""
    return list(RolloutFlagChange.objects.filter(flag_key=key).order_by("-changed_at", "-id")[:limit])


def live_version(profile: Any) -> RoutingVersion | None:
    """The version customers are served, or ``None`` for a profile never published."""
    release = ProfileRelease.objects.filter(profile=profile).select_related("version").first()
    return release.version if release else None


# How the admin's warning names an intent's texts.
INTENT_TEXT_NAMES = {"description": "subject line"}


def intent_translations_missing(*, intents: Iterable[Intent], language: str, named: bool) -> list[str]:
    """A line per text of ``intents`` (written in ``language``, their profile's) that lacks another language:
    "subject line lacks en, es", each prefixed "intent <name>: " when ``named``."""
    return rows_missing(
        ((f"intent {intent.name}" if named else "", intent) for intent in intents),
        INTENT_TRANSLATED,
        own=language,
        labels=INTENT_TEXT_NAMES,
    )


# How the admin's warning names a goal's texts: its description, and each required entity's label (what the
# clarification question asks for it by; a manifest sentence, one per language).
GOAL_TEXT_NAMES = {"description": "description", "label": "label"}


def goal_language(goal: Goal) -> str:
    """The language a goal's own texts are taken as written in: that of the profiles serving its domain (those naming
    its server, and goal-mode profiles naming no domain) when they share one, else the platform's default."""
    languages = set(
        AgentProfile.objects.filter(
            Q(goal_domains=goal.server_id) | Q(routing_mode=RoutingMode.GOAL, goal_domains=None)
        ).values_list("language", flat=True)
    )
    return languages.pop() if len(languages) == 1 else DEFAULT_LANGUAGE


def profile_goals(profile: AgentProfile) -> list[Goal]:
    """The goals ``profile`` serves: its goal domains' (a goal-mode profile naming none serves every domain's)."""
    goals = Goal.objects.select_related("server").order_by("domain", "name")
    if profile.goal_domains.exists():
        return list(goals.filter(server__in=profile.goal_domains.all()))
    return list(goals) if profile.routing_mode == RoutingMode.GOAL else []


def goal_translations_missing(*, goals: Iterable[Goal], language: str, named: bool) -> list[str]:
    """A line per text of ``goals`` (written in ``language``) that lacks another language: "description lacks en",
    "entity symbol_text: label lacks es" (a required entity's ``label`` not given in that language), each prefixed
    "goal <domain>.<name>" when ``named``."""
    lines = []
    for goal in goals:
        name = f"goal {goal}" if named else ""
        lines += rows_missing([(name, goal)], GOAL_TRANSLATED, own=language, labels=GOAL_TEXT_NAMES)
        entities = goal.entities_schema if isinstance(goal.entities_schema, dict) else {}
        labels = [
            (entity, schema.get("label"))
            for entity, schema in sorted(entities.items())
            if isinstance(schema, dict) and schema.get("required")
        ]
        lines += missing_lines(
            (
                (", ".join(filter(None, (name, f"entity {entity}"))), {"label": entity}, _by_language(label))
                for entity, label in labels
            ),
            own=language,
            labels=GOAL_TEXT_NAMES,
        )
    return lines


def _by_language(label: Any) -> dict[str, dict[str, str]]:
    """A manifest sentence (one string, or one per language) as translations of ``label``: a string is in none."""
    if not isinstance(label, dict):
        return {}
    return {language: {"label": text} for language, text in label.items() if isinstance(text, str) and text.strip()}
