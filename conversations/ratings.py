"""A conversation's ratings counted for its outcome row (the CSAT of docs/analytics.md, "Outcomes"): one expression
over the feedback table, for one conversation or, correlated, for many in one query. Read by the feedback service,
the outcomes' close and the desk (a conversation handed to a person counts what it was rated before)."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, IntegerField, Subquery, Value
from django.db.models.functions import Coalesce

from conversations.models import ConversationOutcome, FeedbackRating, MessageFeedback


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


def outcome_ratings_count(*, conversation_id: int) -> None:
    """A decided conversation's outcome row counts its rated answers again (a rating after the outcome, or changed):
    one update, none when the conversation is still open."""
    ConversationOutcome.objects.filter(conversation_id=conversation_id).update(
        rated_up=ratings_counted(conversation_id, FeedbackRating.UP),
        rated_down=ratings_counted(conversation_id, FeedbackRating.DOWN),
    )
