"""What an external desk reads (docs/external-desk.md): an escalation, a message, and the webhook's events, defined
once for the webhook (:mod:`conversations.desk.webhook`) and the escalations API (``chat/desk/apis.py``).

The contract is versioned (:data:`CONTRACT_VERSION`, in every event): a field may be added within a version, never
renamed, removed or given another meaning. Reads only; the writes are :mod:`conversations.desk.escalations`'s.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from common.cursors import ERROR_CURSOR, cursor_decode, cursor_encode, cursor_time, cursor_whole
from common.errors import DomainError
from conversations.desk.escalations import DESK_ROLES, message_public, queue_position
from conversations.models import (
    ESCALATION_OPEN,
    Escalation,
    EscalationPriority,
    EscalationStatus,
    Message,
    RouteDecisionRecord,
)

CONTRACT_VERSION = 1

# ``escalation_changed``'s kinds and the event types they are posted as.
EVENT_TYPES = {
    "opened": "escalation.opened",
    "customer_message": "escalation.customer_message",
    "taken": "escalation.taken",
    "message": "escalation.message",
    "transferred": "escalation.transferred",
    "returned": "escalation.returned",
    "closed": "escalation.closed",
}
HISTORY_ON_OPEN = 20  # the conversation's last messages an ``escalation.opened`` carries
DETAIL_MESSAGES = 200  # the last messages ``GET /api/escalations/{id}`` shows


@dataclass(frozen=True)
class Where:
    """The names an escalation is known by outside: its tenant's slug, its profile's ``agent_id``, its conversation's
    key."""

    tenant: str
    profile: str
    conversation_key: str


def where_of(escalation: Escalation) -> Where:
    """The names of ``escalation`` (one query, none when its conversation, tenant and profile are loaded)."""
    loaded = (Escalation.conversation, Escalation.tenant, Escalation.profile)
    if all(relation.is_cached(escalation) for relation in loaded):
        return Where(escalation.tenant.slug, escalation.profile.agent_id, escalation.conversation.conversation_key)
    tenant, profile, key = (
        Escalation.objects.filter(pk=escalation.pk)
        .values_list("tenant__slug", "profile__agent_id", "conversation__conversation_key")
        .get()
    )
    return Where(tenant, profile, key)


def _iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def escalation_for_desk(escalation: Escalation, *, where: Where, position: int | None) -> dict[str, Any]:
    """An escalation as a desk reads it: who, where, why, in which queue, and who has it."""
    person = None
    if escalation.person:
        ref = escalation.person_ref or (str(escalation.assigned_to_id) if escalation.assigned_to_id else "")
        person = {"name": escalation.person, "id": ref}
    return {
        "id": str(escalation.pk),
        "status": escalation.status,
        "team": escalation.team,
        "priority": EscalationPriority(escalation.priority).label.lower(),
        "position": position,
        "reason": escalation.reason,
        "reason_text": escalation.reason_text,
        "summary": escalation.summary,
        "language": escalation.language,
        "from_agent": escalation.from_agent,
        "intent": escalation.intent,
        "desk": escalation.desk or "platform",
        "person": person,
        "tenant": where.tenant,
        "profile": where.profile,
        "conversation_key": where.conversation_key,
        "created_at": _iso(escalation.created_at),
        "assigned_at": _iso(escalation.assigned_at),
        "ended_at": _iso(escalation.ended_at),
    }


def desk_history(*, conversation_id: int, limit: int) -> list[dict[str, Any]]:
    """The conversation's last ``limit`` messages a desk sees (the customer's, the assistants', the people's replies
    and internal notes), oldest first, each with its ``author``."""
    rows = Message.objects.filter(conversation_id=conversation_id, role__in=DESK_ROLES).order_by("-created_at", "-id")
    return [message_public(message) for message in reversed(rows[:limit])]


def desk_route_decisions(*, conversation_id: int, limit: int = DETAIL_MESSAGES) -> list[dict[str, Any]]:
    """The conversation's last ``limit`` routing decisions, oldest first: how each message was routed (``method``
    ``human`` while a person held it)."""
    rows = RouteDecisionRecord.objects.filter(conversation_id=conversation_id).order_by("-created_at", "-id")
    return [
        {
            "route": row.route,
            "agent": row.agent,
            "intent": row.intent,
            "confidence": row.confidence,
            "method": row.method,
            "reason": row.reason,
            "next_state": row.next_state,
            "created_at": _iso(row.created_at),
        }
        for row in reversed(rows[:limit])
    ]


def desk_event(
    escalation: Escalation, *, kind: str, where: Where, message: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The webhook's event for ``escalation_changed`` of ``kind`` (see :data:`EVENT_TYPES`): the envelope, the
    escalation as it is after the change, the message of ``customer_message`` and ``message``, and the last
    messages of the conversation for ``opened`` (what the bots and the customer said before)."""
    event: dict[str, Any] = {
        "version": CONTRACT_VERSION,
        "id": uuid.uuid4().hex,
        "type": EVENT_TYPES[kind],
        "time": dt.datetime.now(dt.UTC).isoformat(timespec="microseconds"),
        "tenant": where.tenant,
        "profile": where.profile,
        "conversation_key": where.conversation_key,
        "escalation": escalation_for_desk(escalation, where=where, position=queue_position(escalation)),
    }
    if message is not None:
        event["message"] = message
    if kind == "opened":
        event["messages"] = desk_history(conversation_id=escalation.conversation_id, limit=HISTORY_ON_OPEN)
    return event


# -- the queue, as the escalations API lists it ----------------------------------------------------------------------

LIST_OPEN = "open"
LIST_STATUSES = (LIST_OPEN, *EscalationStatus.values)
SERVING_ORDER = ("priority", "created_at", "id")  # urgent first, then first come
ENDED_ORDER = ("-created_at", "-id")  # newest first


def escalation_list(
    *,
    tenant_ids: set[int] | None,
    status: str = LIST_OPEN,
    team: str = "",
    profile_id: int | None = None,
    after: tuple[Any, ...] | None = None,
    limit: int = 50,
) -> tuple[list[Escalation], tuple[Any, ...] | None]:
    """One page of the escalations of ``tenant_ids`` (``None``: every tenant) — open ones (waiting or with a person,
    the default) or those of one ``status`` — in serving order (priority, then the time it was queued) for the open
    statuses, newest first for the ended ones; after the row whose sort key is ``after``. Returns the page and the
    key to ask the next page after (``None`` on the last page). Two queries: the page, and the positions of its
    waiting escalations."""
    rows = Escalation.objects.select_related("conversation", "tenant", "profile")
    if tenant_ids is not None:
        rows = rows.filter(tenant_id__in=tenant_ids)
    rows = rows.filter(status__in=ESCALATION_OPEN) if status == LIST_OPEN else rows.filter(status=status)
    if team:
        rows = rows.filter(team=team)
    if profile_id is not None:
        rows = rows.filter(profile_id=profile_id)
    ascending = status in (LIST_OPEN, *ESCALATION_OPEN)
    order = SERVING_ORDER if ascending else ENDED_ORDER
    if after is not None:
        rows = rows.filter(_after(order, after))
    page = list(rows.order_by(*order)[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    last = page[-1] if page else None
    key = tuple(getattr(last, name.lstrip("-")) for name in order) if more and last is not None else None
    return page, key


def list_cursor(key: tuple[Any, ...]) -> str:
    """The opaque text of a page's ``after`` key (:func:`escalation_list`)."""
    return cursor_encode([value.isoformat() if isinstance(value, dt.datetime) else str(value) for value in key])


def list_after(cursor: str, *, status: str) -> tuple[Any, ...]:
    """The ``after`` key of ``cursor`` for a list of ``status``; raises :class:`DomainError` naming ``cursor``."""
    try:
        if status in (LIST_OPEN, *ESCALATION_OPEN):
            priority, created_at, pk = cursor_decode(cursor, length=3)
            priority = cursor_whole(
                priority, lowest=min(EscalationPriority.values), highest=max(EscalationPriority.values)
            )
            return priority, cursor_time(created_at), uuid.UUID(pk)
        created_at, pk = cursor_decode(cursor, length=2)
        return cursor_time(created_at), uuid.UUID(pk)
    except (ValueError, TypeError, AttributeError):
        raise DomainError(ERROR_CURSOR, fields={"cursor": [ERROR_CURSOR]}) from None


def _after(order: tuple[str, ...], key: tuple[Any, ...]) -> Q:
    """Rows after ``key`` in ``order`` (a keyset: stable while rows are added or leave the queue)."""
    condition = Q()
    for index in reversed(range(len(order))):
        name = order[index].lstrip("-")
        beyond = Q(**{f"{name}__{'lt' if order[index].startswith('-') else 'gt'}": key[index]})
        same = Q(**{order[before].lstrip("-"): key[before] for before in range(index)})
        condition = (same & beyond) | condition if index < len(order) - 1 else same & beyond
    return condition


def positions(escalations: list[Escalation]) -> dict[Any, int]:
    """The place in line of each waiting escalation of ``escalations`` (1: next), in one query over their queues."""
    waiting = [item for item in escalations if item.status == EscalationStatus.QUEUED]
    if not waiting:
        return {}
    queues = {(item.tenant_id, item.profile_id, item.team) for item in waiting}
    where = Q()
    for tenant_id, profile_id, team in queues:
        where |= Q(tenant_id=tenant_id, profile_id=profile_id, team=team)
    found: dict[Any, int] = {}
    counts: dict[tuple[int, int, str], int] = {}
    lined = Escalation.objects.filter(where, status=EscalationStatus.QUEUED).order_by(*SERVING_ORDER)
    for pk, tenant_id, profile_id, team in lined.values_list("pk", "tenant_id", "profile_id", "team"):
        queue = (tenant_id, profile_id, team)
        counts[queue] = counts.get(queue, 0) + 1
        found[pk] = counts[queue]
    return found
