"""Reads of the conversation store (the turn reads what it needs itself, see :mod:`conversations.graph`)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Count, F, Q, QuerySet, Sum
from django.db.models.functions import TruncDate

from agents.models import AgentProfile, ModelCallUsage, ModelPrice
from common.cursors import ERROR_CURSOR, cursor_decode, cursor_encode, cursor_time, cursor_whole
from common.errors import DomainError
from conversations.desk.escalations import escalation_public, message_author, queue_position
from conversations.models import (
    ESCALATION_OPEN,
    OPEN,
    UNMEASURED,
    Conversation,
    Escalation,
    Message,
    MessageRole,
    Outcome,
)
from tenants.models import Tenant
from tenants.public import TenantScope, tenant_scope_where

MILLION = Decimal(1_000_000)
# The ``purpose`` of the usage rows of customers' turns (the others are agents.models.UsagePurpose's).
PURPOSE_CONVERSATION = "conversation"


def conversation_get_for_tenant(*, tenant: Tenant, conversation_key: str) -> Conversation | None:
    """The conversation if it belongs to ``tenant``; ``None`` otherwise (callers answer 404, not 403)."""
    return Conversation.objects.filter(tenant=tenant, conversation_key=conversation_key).first()


# A conversation's status in the sessions list: its outcome, or ``open`` while it has none.
STATUS_OPEN = "open"
CONVERSATION_STATUSES = (STATUS_OPEN, *Outcome.values, UNMEASURED)
# What the sessions list reads of a conversation (its JSON fields, the live state of a turn, stay unread).
LISTED_FIELDS = (
    "conversation_key",
    "session_id",
    "user_id",
    "channel",
    "state",
    "active_specialist",
    "cohort",
    "message_count",
    "outcome",
    "escalation_id",
    "created_at",
    "updated_at",
    "ended_at",
    "profile__agent_id",
)


def conversation_list(
    *,
    tenant_id: int,
    profile_id: int | None = None,
    status: str | None = None,
    with_person: bool | None = None,
    updated_after: dt.datetime | None = None,
    updated_before: dt.datetime | None = None,
) -> QuerySet[Conversation]:
    """The tenant's conversations, with their profile, unordered (the sessions API pages them newest first by
    ``updated_at``, on the index ``conversation_tenant_recent``): of one profile; of one of
    :data:`CONVERSATION_STATUSES`; held by a person now (waiting for one or answered by one) or not; last active at
    or after ``updated_after`` and before ``updated_before``. ``None``: no filter."""
    rows = Conversation.objects.filter(tenant_id=tenant_id).select_related("profile").only(*LISTED_FIELDS)
    if profile_id is not None:
        rows = rows.filter(profile_id=profile_id)
    if status is not None:
        rows = rows.filter(outcome=OPEN if status == STATUS_OPEN else status)
    if with_person is not None:
        rows = rows.filter(escalation__isnull=not with_person)
    if updated_after is not None:
        rows = rows.filter(updated_at__gte=updated_after)
    if updated_before is not None:
        rows = rows.filter(updated_at__lt=updated_before)
    return rows


def conversation_status(conversation: Conversation) -> str:
    """One of :data:`CONVERSATION_STATUSES`."""
    return conversation.outcome or STATUS_OPEN


@dataclass(frozen=True)
class MessagePage:
    """Messages of a conversation, oldest first, with the route decisions made in their span.

    The span is ``(since, until]``: after the previous page's last message, up to this page's last one (``None``: from
    the start, to the end). Consecutive pages' spans meet, so every decision (and handoff) is on exactly one page.
    ``after`` is the key to ask the next page with (``None`` on the last page)."""

    messages: list[dict[str, Any]]
    route_decisions: list[dict[str, Any]]
    since: dt.datetime | None
    until: dt.datetime | None
    after: tuple[dt.datetime, int] | None


def conversation_messages(
    *, conversation: Conversation, after: tuple[dt.datetime, int] | None = None, limit: int | None = None
) -> MessagePage:
    """The conversation's messages after the message whose ``(created_at, id)`` is ``after``, ``limit`` of them
    (``None``: all), as the sessions API shows them: each with its ``author`` (the customer, an assistant, or a person
    of the desk); the desk's internal notes are not shown. Two queries: the messages, the decisions of their span."""
    rows = conversation.messages.exclude(role=MessageRole.NOTE).order_by("created_at", "id")
    if after is not None:
        rows = rows.filter(Q(created_at__gt=after[0]) | Q(created_at=after[0], id__gt=after[1]))
    page = list(rows if limit is None else rows[: limit + 1])
    more = limit is not None and len(page) > limit
    page = page[:limit] if more else page
    since = after[0] if after is not None else None
    until = page[-1].created_at if more else None
    decisions = conversation.route_decisions.order_by("created_at", "id")
    if since is not None:
        decisions = decisions.filter(created_at__gt=since)
    if until is not None:
        decisions = decisions.filter(created_at__lte=until)
    return MessagePage(
        messages=[
            {
                "id": message.pk,  # an answer's id is what POST /api/sessions/{key}/feedback rates
                "role": message.role,
                "agent": message.agent,
                "author": message_author(message.role, message.agent, message.metadata),
                "content": message.content,
                "step": message.step,
                "created_at": message.created_at,
                "metadata": message.metadata,
            }
            for message in page
        ],
        route_decisions=[
            {
                "mode": decision.mode,
                "route": decision.route,
                "agent": decision.agent,
                "intent": decision.intent,
                "confidence": decision.confidence,
                "reason": decision.reason,
                "method": decision.method,
                "next_state": decision.next_state,
                "handoff": decision.handoff,
                "domain": decision.domain,
                "mcp_tools": decision.mcp_tools,
                "metadata": decision.metadata,
                "created_at": decision.created_at,
            }
            for decision in decisions
        ],
        since=since,
        until=until,
        after=(page[-1].created_at, page[-1].pk) if more else None,
    )


def message_cursor(after: tuple[dt.datetime, int]) -> str:
    """The opaque ``cursor`` of a message page's ``after`` key (:func:`conversation_messages`)."""
    return cursor_encode([after[0].isoformat(), after[1]])


def message_after(cursor: str) -> tuple[dt.datetime, int]:
    """The ``after`` key of a ``cursor``; raises :class:`DomainError` naming ``cursor``."""
    try:
        created_at, pk = cursor_decode(cursor, length=2)
        return cursor_time(created_at), cursor_whole(pk, lowest=1)
    except ValueError:
        raise DomainError(ERROR_CURSOR, fields={"cursor": [ERROR_CURSOR]}) from None


def conversation_escalation(*, conversation: Conversation) -> dict[str, Any] | None:
    """The escalation a person holds the conversation under, as the customer's side reads it (with its place in
    line while it waits); ``None`` when the assistants answer."""
    if conversation.escalation_id is None:
        return None
    held = Escalation.objects.filter(pk=conversation.escalation_id, status__in=ESCALATION_OPEN).first()
    return escalation_public(held, position=queue_position(held)) if held is not None else None


def conversation_get(*, conversation_key: str) -> Conversation | None:
    """Any tenant's conversation (staff); tenants' callers use :func:`conversation_get_for_tenant`."""
    return Conversation.objects.filter(conversation_key=conversation_key).first()


def conversation_route_state(*, conversation_key: str) -> tuple[str, str]:
    """``(state, active_specialist)`` of the conversation, ``("", "")`` when it does not exist yet."""
    row = Conversation.objects.filter(conversation_key=conversation_key).values_list("state", "active_specialist")
    return row.first() or ("", "")


def conversation_goal_state(*, conversation_key: str) -> dict[str, Any] | None:
    """The conversation's goal state (goal mode's pending and last goal), ``None`` when it has none or does not
    exist yet."""
    return Conversation.objects.filter(conversation_key=conversation_key).values_list("goal_state", flat=True).first()


def answers_usage_by_day(
    *, start: dt.datetime, end: dt.datetime, tenant_id: TenantScope, profile_id: int | None = None
) -> QuerySet[Any, Any]:
    """Answers a model wrote in ``[start, end)`` whose turn called that model only, grouped by tenant, profile, UTC
    day and model: a values query of ``{tenant_id, profile_id, day, model, answers, prompt_tokens,
    completion_tokens}``, unordered.

    Read in the database on the covering index ``message_usage_window`` (such answers by time, with tenant,
    profile, model and tokens); answers no model wrote (a blocked message) are left out. ``tenant_id`` ``None``:
    every tenant (the caller decides who may).
    """
    return (
        _answers_in(start=start, end=end, tenant_id=tenant_id, profile_id=profile_id)
        .filter(other_models=False)
        .annotate(day=TruncDate("created_at", tzinfo=dt.UTC))
        .values("tenant_id", "profile_id", "day", model=F("llm_model"))
        .annotate(answers=Count("*"), prompt_tokens=Sum("prompt_tokens"), completion_tokens=Sum("completion_tokens"))
        .order_by()
    )


def usage_by_day(
    *, start: dt.datetime, end: dt.datetime, tenant_id: TenantScope, profile_id: int | None = None
) -> list[dict[str, Any]]:
    """Tokens per tenant, profile, UTC day, model and purpose, each call's under the model that made it
    (``{tenant_id, profile_id, day, model, purpose, answers, prompt_tokens, completion_tokens}``, unordered;
    ``answers``: the answers that model wrote, 0 for a model that only routed or judged that day).

    The customers' turns (purpose :data:`PURPOSE_CONVERSATION`): the rows of :func:`answers_usage_by_day`, and the
    answers whose turn also called another model (a routing model of its own: ``Message.other_models``) read apart,
    on their partial index, and split by the model of each call in their metadata. Then the model calls made outside
    a turn (:class:`agents.models.ModelCallUsage`: a publish's routing tests, a preview, a debug call), under their
    purpose: the operators' (no tenant) only when every tenant is read, a tenant's debug calls with its own.
    """
    rows = {
        (row["tenant_id"], row["profile_id"], row["day"], row["model"], PURPOSE_CONVERSATION): {
            **row,
            "purpose": PURPOSE_CONVERSATION,
        }
        for row in answers_usage_by_day(start=start, end=end, tenant_id=tenant_id, profile_id=profile_id)
    }

    def row(
        tenant: int | None, profile: int | None, day: dt.date, model: str, purpose: str = PURPOSE_CONVERSATION
    ) -> dict[str, Any]:
        fresh = {"tenant_id": tenant, "profile_id": profile, "day": day, "model": model, "purpose": purpose}
        return rows.setdefault(
            (tenant, profile, day, model, purpose), fresh | {"answers": 0, "prompt_tokens": 0, "completion_tokens": 0}
        )

    mixed = (
        _answers_in(start=start, end=end, tenant_id=tenant_id, profile_id=profile_id)
        .filter(other_models=True)
        .annotate(day=TruncDate("created_at", tzinfo=dt.UTC))
        .values_list("tenant_id", "profile_id", "day", "llm_model", "metadata__usage__calls")
    )
    for tenant, profile, day, answering, calls in mixed:
        row(tenant, profile, day, answering)["answers"] += 1
        for call in calls:
            counted = row(tenant, profile, day, call["model"])
            counted["prompt_tokens"] += call["prompt_tokens"]
            counted["completion_tokens"] += call["completion_tokens"]
    outside = ModelCallUsage.objects.filter(created_at__gte=start, created_at__lt=end)
    outside = outside.filter(**tenant_scope_where("tenant_id", tenant_id))
    if profile_id is not None:
        outside = outside.filter(profile_id=profile_id)
    grouped = (
        outside.annotate(day=TruncDate("created_at", tzinfo=dt.UTC))
        .values("tenant_id", "profile_id", "day", "model", "purpose")
        .annotate(prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"))
        .order_by()
    )
    for made in grouped:
        counted = row(made["tenant_id"], made["profile_id"], made["day"], made["model"], made["purpose"])
        counted["prompt_tokens"] += made["prompt"]
        counted["completion_tokens"] += made["completion"]
    return list(rows.values())


def _answers_in(
    *, start: dt.datetime, end: dt.datetime, tenant_id: TenantScope, profile_id: int | None
) -> QuerySet[Message, Message]:
    """Answers a model wrote in ``[start, end)``, of one tenant and profile when given."""
    rows = Message.objects.filter(role=MessageRole.ASSISTANT, created_at__gte=start, created_at__lt=end).exclude(
        llm_model=""
    )
    rows = rows.filter(**tenant_scope_where("tenant_id", tenant_id))
    if profile_id is not None:
        rows = rows.filter(profile_id=profile_id)
    return rows


def usage_report(
    *, start: dt.datetime, end: dt.datetime, tenant_id: TenantScope, profile_id: int | None = None
) -> dict[str, Any]:
    """Tokens and their cost per tenant, profile, day, model and purpose (:func:`usage_by_day`: each call's tokens
    under the model that made it; the customers' turns and the work outside them), with the totals.

    Cost = tokens × the model's price per million (``agents.ModelPrice``) / 1,000,000, computed now: a price
    edited today re-prices the past. A model without a price has ``cost`` null and is listed in
    ``unpriced_models``; ``totals.cost`` adds up the priced rows, when their prices share one currency (else null,
    and ``totals.cost_by_currency`` has each). Rows: newest day first, then tenant, profile, model and purpose.
    """
    grouped = usage_by_day(start=start, end=end, tenant_id=tenant_id, profile_id=profile_id)
    models = {row["model"] for row in grouped}
    prices = {price.model: price for price in ModelPrice.objects.filter(model__in=models)}
    tenants = dict(Tenant.objects.filter(pk__in={row["tenant_id"] for row in grouped}).values_list("pk", "slug"))
    profiles = dict(
        AgentProfile.objects.filter(pk__in={row["profile_id"] for row in grouped}).values_list("pk", "agent_id")
    )
    rows: list[dict[str, Any]] = []
    by_currency: dict[str, Decimal] = {}
    for row in grouped:
        price = prices.get(row["model"])
        cost = None
        if price is not None:
            cost = (
                row["prompt_tokens"] * price.prompt_per_million
                + row["completion_tokens"] * price.completion_per_million
            ) / MILLION
            by_currency[price.currency] = by_currency.get(price.currency, Decimal(0)) + cost
        rows.append(
            {
                "tenant": tenants.get(row["tenant_id"], ""),
                "profile": profiles.get(row["profile_id"], ""),
                "day": row["day"],
                "model": row["model"],
                "purpose": row["purpose"],
                "answers": row["answers"],
                "prompt_tokens": row["prompt_tokens"],
                "completion_tokens": row["completion_tokens"],
                "total_tokens": row["prompt_tokens"] + row["completion_tokens"],
                "cost": _money(cost),
                "currency": price.currency if price is not None else "",
            }
        )
    rows.sort(key=lambda row: (-row["day"].toordinal(), row["tenant"], row["profile"], row["model"], row["purpose"]))
    prompt, completion = sum(row["prompt_tokens"] for row in rows), sum(row["completion_tokens"] for row in rows)
    currency, total_cost = next(iter(by_currency.items())) if len(by_currency) == 1 else ("", None)
    return {
        "totals": {
            "answers": sum(row["answers"] for row in rows),
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "cost": _money(total_cost),
            "currency": currency,
            "cost_by_currency": {name: _money(amount) for name, amount in sorted(by_currency.items())},
        },
        "rows": rows,
        "unpriced_models": sorted(models - set(prices)),
    }


def _money(amount: Decimal | None) -> float | None:
    """A cost as JSON shows it: a number to six decimals (a millionth of the currency), or null."""
    return None if amount is None else float(round(amount, 6))


def conversation_get_by_pk(*, tenant_id: int, conversation_pk: int) -> Conversation | None:
    """The conversation numbered ``conversation_pk`` if it belongs to the tenant (its profile read with it); ``None``
    otherwise (callers answer 404: another tenant's looks unknown)."""
    return Conversation.objects.select_related("profile").filter(pk=conversation_pk, tenant_id=tenant_id).first()


def question_of_answer(answer: Message) -> Message | None:
    """The customer's message ``answer`` answers: its turn's user message, stored just before it (the turn's rows
    are written in reading order, conversations.records)."""
    return (
        Message.objects.filter(conversation_id=answer.conversation_id, role=MessageRole.USER, pk__lt=answer.pk)
        .order_by("-id")
        .first()
    )


def answer_of_turn(*, conversation_pk: int, turn: int) -> Message | None:
    """The answer stored for the conversation's ``turn``-th message (``metadata.turn``), ``None`` when the turn stored
    none (it is still running, or a person holds the conversation). One conversation's messages are read, by the
    (conversation, time) index."""
    return (
        Message.objects.filter(conversation_id=conversation_pk, role=MessageRole.ASSISTANT, metadata__turn=turn)
        .order_by("-id")
        .first()
    )
