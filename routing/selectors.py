"""Reads of routing data (the message path uses :mod:`routing.snapshot` instead)."""

from __future__ import annotations

from collections.abc import Iterable

from routing.models import Conversation, Keyword, Tenant
from routing.text import normalize


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


def conversation_get_for_tenant(*, tenant: Tenant, conversation_key: str) -> Conversation | None:
    """The conversation if it belongs to ``tenant``; ``None`` otherwise (callers answer 404, not 403)."""
    return Conversation.objects.filter(tenant=tenant, conversation_key=conversation_key).first()
