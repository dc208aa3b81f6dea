"""A conversation's ratings counted for its outcome row (the CSAT of docs/analytics.md, "Outcomes"): one expression
over the feedback table, for one conversation or, correlated, for many in one query. Read by the feedback service,
the outcomes' close and the desk (a conversation handed to a person counts what it was rated before).

Outcome rows are summed per day once the day has closed (the analytics' daily totals): whoever changes or deletes
one calls :func:`outcomes_changing` first, which tells the hours the rows were decided in (``outcomes_changed``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from typing import Any

from django.db.models import Count, IntegerField, Subquery, Value
from django.db.models.functions import Coalesce, Trunc

from conversations.models import ConversationOutcome, FeedbackRating, MessageFeedback
from conversations.signals import outcomes_changed


def ratings_counted(conversation: Any, rating: str) -> Coalesce:
    """How many answers of a conversation are rated ``rating``, as an expression: ``conversation`` is its id, or an
    ``OuterRef`` to it (a correlated subquery, for many conversations in one query)."""
    found = (
        MessageFeedback.objects.filter(conversation_id=conversation, rating=rating)
        .order_by()
        .values("conversation_id")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(found, output_field=IntegerField()), Value(0))


def outcomes_changing(conversation_ids: Collection[int]) -> None:
    """The outcome rows of these conversations are about to change or go: send ``outcomes_changed`` with the UTC
    hours they were decided in (none without a row). One query, and what the receivers do (the analytics mark the
    days' or hours' totals stale); call in the transaction that changes the rows."""
    rows = ConversationOutcome.objects.filter(conversation_id__in=conversation_ids).order_by()
    hours = set(rows.annotate(hour=Trunc("decided_at", "hour", tzinfo=dt.UTC)).values_list("hour", flat=True))
    if hours:
        outcomes_changed.send(sender=ConversationOutcome, hours=hours)


def outcome_ratings_count(*, conversation_id: int, told: bool = False) -> None:
    """A decided conversation's outcome row counts its rated answers again (a rating after the outcome, or changed):
    one update while the conversation is still open, and :func:`outcomes_changing` once it is decided (``told``: the
    caller told the row's day already)."""
    counted = ConversationOutcome.objects.filter(conversation_id=conversation_id).update(
        rated_up=ratings_counted(conversation_id, FeedbackRating.UP),
        rated_down=ratings_counted(conversation_id, FeedbackRating.DOWN),
    )
    if counted and not told:
        outcomes_changing([conversation_id])
