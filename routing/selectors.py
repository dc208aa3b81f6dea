"""Reads of routing data (the message path uses :mod:`routing.snapshot` instead)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from common.text import normalize
from common.translation_forms import missing_lines
from routing.models import (
    INTENT_TRANSLATED,
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
    return missing_lines(
        (
            (
                f"intent {intent.name}" if named else "",
                {field: getattr(intent, field) for field in INTENT_TRANSLATED},
                intent.translations,
            )
            for intent in intents
        ),
        own=language,
        labels=INTENT_TEXT_NAMES,
    )
