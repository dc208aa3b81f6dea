"""Impact preview before publishing: a profile's real user messages of the last days replayed against its draft and
its live version, and how many would route differently, grouped by old → new intent.

The store does not keep the state a conversation had when a message arrived; it keeps each routed message's
decision. The replay rebuilds it as the graph leaves it: the state, specialist and intent a message arrives in are
the previous decision's next state, agent and intent in the same conversation (empty for its first message). The
decisions are read in conversation order, earlier ones of a conversation too, so a conversation that began before
the window still carries its state in. Not replayed: an open coordinator sub-conversation (not stored per message;
a coordinator profile is replayed as outside one), the single-agent cohort, goal mode and permission replies.
Both sides get the same input, so what differs is what the draft changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.utils import timezone

from agents.models import UsagePurpose
from agents.public import usage_outside_turns
from conversations.models import Conversation, RouteDecisionRecord
from routing.public import ProfileSpec, RouteDecision, delegated_of, route_decide, snapshot_current

CHUNK = 2000


@dataclass(frozen=True)
class Replayed:
    """One stored user message and the routing input it arrived with."""

    message_id: int
    conversation_id: int
    conversation_key: str
    text: str
    state: str
    active_agent: str
    active_intent: str


@dataclass
class ImpactGroup:
    old_intent: str
    new_intent: str
    old_agent: str
    new_agent: str
    count: int = 0
    samples: list[dict[str, Any]] = field(default_factory=list)


def _replayed(agent_id: str, since: Any, limit: int | None, tenant_ids: Collection[int] | None) -> Iterator[Replayed]:
    """The profile's routed user messages since ``since`` (of ``tenant_ids``' conversations only, when given), in
    conversation order, with their arrival state.

    One query, streamed in chunks: every decision of the conversations that had a user message in the window (the
    earlier ones only carry the state in)."""
    conversations = Conversation.objects.filter(
        profile__agent_id=agent_id, messages__role="user", messages__created_at__gte=since
    )
    if tenant_ids is not None:
        conversations = conversations.filter(tenant_id__in=tenant_ids)
    rows = (
        RouteDecisionRecord.objects.filter(conversation__in=conversations.values("pk"))
        .order_by("conversation_id", "created_at", "id")
        .values_list(
            "conversation_id",
            "conversation__conversation_key",
            "message_id",
            "message__content",
            "message__role",
            "message__created_at",
            "next_state",
            "agent",
            "intent",
        )
        .iterator(chunk_size=CHUNK)
    )
    conversation, state, agent, intent = None, "", "", ""
    given = 0
    for conv, key, message_id, text, role, at, next_state, decided_agent, decided_intent in rows:
        if conv != conversation:
            conversation, state, agent, intent = conv, "", "", ""
        if message_id is not None and role == "user" and at is not None and at >= since:
            if limit is not None and given >= limit:
                return
            given += 1
            yield Replayed(message_id, conv, key, text, state, agent, intent)
        state, agent, intent = next_state or "", decided_agent, decided_intent


class _Decider:
    """A profile spec's decisions, the same input decided once."""

    def __init__(self, spec: ProfileSpec) -> None:
        self.spec = spec
        self.memo: dict[tuple[str, str, str, str], RouteDecision] = {}

    async def decide(self, item: Replayed) -> RouteDecision:
        key = (item.text, item.state, item.active_agent, item.active_intent)
        decision = self.memo.get(key)
        if decision is None:
            decision = await route_decide(
                profile=self.spec,
                text=item.text,
                state=item.state or None,
                active_agent=item.active_agent,
                active_intent=item.active_intent,
                delegated_to=delegated_of(self.spec, item.active_agent),
            )
            self.memo[key] = decision
        return decision


Moved = tuple[str, str, str, str]  # old intent, new intent, old agent, new agent


async def _compare(live: _Decider, draft: _Decider, chunk: list[Replayed]) -> list[tuple[Replayed, Moved]]:
    """The messages of ``chunk`` the draft routes differently (another intent or another agent)."""
    changed = []
    for item in chunk:
        old, new = await live.decide(item), await draft.decide(item)
        if (old.intent, old.agent) != (new.intent, new.agent):
            changed.append((item, (old.intent, new.intent, old.agent, new.agent)))
    return changed


def _chunks(items: Iterator[Replayed], size: int) -> Iterator[list[Replayed]]:
    chunk: list[Replayed] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def impact_preview(
    *,
    agent_id: str,
    days: int = 7,
    limit: int | None = None,
    samples: int = 5,
    tenant_ids: Collection[int] | None = None,
) -> dict[str, Any]:
    """Replay the profile's user messages of the last ``days`` days against its live version and its draft: the
    messages of the tenants ``tenant_ids`` only (those the reader may read), of every tenant when ``None``.

    Returns ``{"agent_id", "days", "since", "messages", "changed", "share_changed", "same_spec", "groups"}``;
    each group ``{"old_intent", "new_intent", "old_agent", "new_agent", "count", "samples"}`` (a sample:
    ``message_id``, ``conversation_id``, ``conversation_key``, ``text``), the groups largest first. A message
    "routes differently" when the intent or the agent differs. Raises ``LookupError`` for an unknown profile.
    Called from synchronous code (the ORM reads between the chunks' decisions)."""
    snapshot = snapshot_current()
    live_spec, draft_spec = snapshot.profile(agent_id), snapshot.profile(agent_id, draft=True)
    if live_spec is None or draft_spec is None:
        raise LookupError(f"No profile {agent_id!r}.")
    since = timezone.now() - timedelta(days=days)
    live, draft = _Decider(live_spec), _Decider(draft_spec)
    if draft_spec is live_spec:
        draft = live
    total = changed = 0
    groups: dict[Moved, ImpactGroup] = {}
    # The decisions' model calls (a classifier) are counted: the loop's tasks carry this thread's context.
    with usage_outside_turns(purpose=UsagePurpose.IMPACT_PREVIEW, profile_id=live_spec.pk):
        loop = asyncio.new_event_loop()
        try:
            for chunk in _chunks(_replayed(agent_id, since, limit, tenant_ids), CHUNK):
                total += len(chunk)
                for item, moved in loop.run_until_complete(_compare(live, draft, chunk)):
                    changed += 1
                    group = groups.setdefault(moved, ImpactGroup(*moved))
                    group.count += 1
                    if len(group.samples) < samples:
                        group.samples.append(
                            {
                                "message_id": item.message_id,
                                "conversation_id": item.conversation_id,
                                "conversation_key": item.conversation_key,
                                "text": item.text,
                            }
                        )
        finally:
            loop.close()
    ordered = sorted(groups.values(), key=lambda g: (-g.count, g.old_intent, g.new_intent))
    return {
        "agent_id": agent_id,
        "days": days,
        "since": since,
        "messages": total,
        "changed": changed,
        "share_changed": changed / total if total else 0.0,
        "same_spec": draft is live,
        "groups": [
            {
                "old_intent": g.old_intent,
                "new_intent": g.new_intent,
                "old_agent": g.old_agent,
                "new_agent": g.new_agent,
                "count": g.count,
                "samples": g.samples,
            }
            for g in ordered
        ],
    }
