"""Writes of routing data: tenants, API keys, the keyword rule, and ending or clearing a session."""

from __future__ import annotations

from typing import TypedDict

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from handoffs.models import Handoff
from routing.auth import key_generate, key_hash
from routing.models import ApiKey, Conversation, Intent, Message, RouteDecisionRecord, Tenant, ToolCall
from routing.selectors import keyword_conflicts

ERROR_KEYWORD_TAKEN = "Keyword {keyword!r} is already used by the enabled intent {intent!r} of this profile."


def keywords_validate_unique(*, intent: Intent, texts: list[str]) -> None:
    """Refuse keywords that another enabled intent of the same profile already uses.

    Raises :class:`ValidationError` whose message names the other intent. A
    disabled intent may share keywords (it does not route); enabling it runs
    this check again.
    """
    if not intent.enabled:
        return
    conflicts = keyword_conflicts(profile_id=intent.profile_id, texts=texts, exclude_intent_id=intent.pk)
    if conflicts:
        raise ValidationError(
            [ERROR_KEYWORD_TAKEN.format(keyword=keyword, intent=other) for keyword, other in conflicts.items()],
            code="keyword_taken",
        )


def tenant_get_or_create(*, slug: str, name: str = "") -> tuple[Tenant, bool]:
    return Tenant.objects.get_or_create(slug=slug, defaults={"name": name or slug})


@transaction.atomic
def api_key_create(
    *, tenant_slug: str, name: str = "", is_debug: bool = False, can_preview: bool = False
) -> tuple[ApiKey, str]:
    """Create a key for the tenant (creating the tenant if needed); returns the key and its raw secret."""
    tenant, _ = tenant_get_or_create(slug=tenant_slug)
    raw, prefix = key_generate()
    key = ApiKey.objects.create(
        tenant=tenant,
        name=name,
        prefix=prefix,
        key_hash=key_hash(raw),
        is_debug=is_debug,
        can_preview=can_preview,
    )
    return key, raw


# The conversation's live state: what the next message would continue. Turn tickets are not part of it: a turn
# may be queued or running while the session is ended, and the ordering still has to serve it.
LIVE_STATE_RESET = {
    "state": "",
    "active_specialist": "",
    "active_intent": "",
    "sub_conversation": None,
    "pending_result": None,
    "pending_permission": None,
}


class ClearedCounts(TypedDict):
    messages: int
    route_decisions: int
    tool_calls: int


def _locked(conversation: Conversation) -> Conversation:
    """The conversation's row, locked until the surrounding transaction ends.

    Raises :class:`Conversation.DoesNotExist` if the row went away since it was read.
    """
    return Conversation.objects.select_for_update().get(pk=conversation.pk)


@transaction.atomic
def session_end(*, conversation: Conversation) -> Conversation:
    """End the session: forget its live state (state, active specialist and intent, an open
    sub-conversation, a pending result or permission, granted permissions) and stamp ``ended_at``.

    The history (messages, route decisions, tool calls, handoffs) is kept; the next message in the
    session starts fresh on the same row. Returns the updated conversation.
    """
    locked = _locked(conversation)
    for field, value in LIVE_STATE_RESET.items():
        setattr(locked, field, value)
    locked.granted_permissions = []
    locked.ended_at = timezone.now()
    locked.save(update_fields=[*LIVE_STATE_RESET, "granted_permissions", "ended_at", "updated_at"])
    return locked


@transaction.atomic
def session_clear(*, conversation: Conversation) -> ClearedCounts:
    """Clear the session's history: delete its messages, route decisions and tool calls, set the
    message count to 0 and blank the context summary of its handoffs.

    Handoff rows stay (the analytics count them), but their summaries may quote the user. The live
    state is left alone (that is :func:`session_end`). Returns how many rows of each kind were deleted.
    """
    locked = _locked(conversation)
    # Decisions and tool calls first: both also cascade from their message, which would fold them into its count.
    _, tool_calls = ToolCall.objects.filter(conversation=locked).delete()
    _, route_decisions = RouteDecisionRecord.objects.filter(conversation=locked).delete()
    _, messages = Message.objects.filter(conversation=locked).delete()
    Handoff.objects.filter(conversation=locked).exclude(context_summary="").update(context_summary="")
    locked.message_count = 0
    locked.save(update_fields=["message_count", "updated_at"])
    return {
        "messages": messages.get(Message._meta.label, 0),
        "route_decisions": route_decisions.get(RouteDecisionRecord._meta.label, 0),
        "tool_calls": tool_calls.get(ToolCall._meta.label, 0),
    }
