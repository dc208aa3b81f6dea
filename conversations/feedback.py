"""Users' feedback on answers: giving it (:func:`feedback_give`) and counting it per cohort and routing version
(:func:`feedback_rates`, what the feedback analytics show and what a rollout guard compares).

A rating down hands the conversation to a person when its profile says so (``escalation.on_thumbs_down``): the
escalation is opened with the rating (:func:`conversations.desk.escalations.escalation_open`).

The negative-feedback rate is ``down / (up + down)``: the share of rated answers rated down. Answers nobody rated
count in ``answers`` only, so how many answers get a rating at all is visible beside the rate.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from django.db import transaction
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery

from agents.public import EscalationSettings
from common.errors import DomainError
from common.language import detect_language
from conversations.desk.escalations import EscalationConflict, escalation_open, queue_position
from conversations.escalation import language_of, summary_for_person, thumbs_down_asked
from conversations.history import conversation_history
from conversations.models import (
    Conversation,
    Escalation,
    FeedbackRating,
    Message,
    MessageFeedback,
    MessageRole,
    RouteDecisionRecord,
)
from conversations.ratings import outcome_ratings_count
from conversations.signals import ratings_changed
from routing.public import snapshot_current
from tenants.public import TenantScope, tenant_scope_where

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

ERROR_NOT_AN_ANSWER = "No answer with this id in this conversation: message_id must name one of its assistant messages."
ERROR_INVALID_MESSAGE = "Invalid input: message_id."

Grouping = Literal["cohort", "routing_version"]
GROUPINGS: tuple[Grouping, ...] = ("cohort", "routing_version")


class NotAnAnswer(DomainError):
    """``message_id`` names no assistant message of the conversation (a 400 naming ``message_id``)."""

    code = "validation_error"  # as DRF's validation errors (common.errors)


@dataclass(frozen=True)
class FeedbackGiven:
    feedback: MessageFeedback
    created: bool  # False: an earlier rating of the same answer was replaced
    escalation: Escalation | None = None  # the rating handed the conversation to a person (on_thumbs_down)
    position: int | None = None  # its place in the queue


@transaction.atomic
def feedback_give(
    *,
    conversation: Conversation,
    message_id: int,
    rating: FeedbackRating | str,
    comment: str = "",
    user_id: str = "",
    staff_user_id: int | None = None,
) -> FeedbackGiven:
    """Rate the answer ``message_id`` of ``conversation``: one rating per answer, a new one replaces the last
    (rating, comment and who; ``created_at`` stays the first rating's).

    The row copies the answer's cohort, routing version, time and agent, its turn's route decision (agent and
    intent, :func:`answer_turn`), and the conversation's tenant and profile.
    Raises :class:`NotAnAnswer` when ``message_id`` is not an assistant message of ``conversation``. Two ratings of
    the same answer at once leave one row: the answer's row is locked while its feedback is written.

    A rating down of a conversation no person holds hands it to one when the profile's ``on_thumbs_down`` is set
    (:func:`thumbs_down_escalate`); a decided conversation's outcome row counts the ratings anew. A rating given or
    changed sends ``ratings_changed`` with the hour its answer was given in (the analytics' totals of that hour or day
    go stale); a comment alone changes no count and sends nothing.
    """
    answer = (
        answer_turn(Message.objects.select_for_update(of=("self",)), answer="pk")
        .filter(pk=message_id, conversation=conversation, role=MessageRole.ASSISTANT)
        .only("pk", "cohort", "routing_version", "created_at", "agent")
        .first()
    )
    if answer is None:
        raise NotAnAnswer(ERROR_INVALID_MESSAGE, fields={"message_id": [ERROR_NOT_AN_ANSWER]})
    given = {"rating": rating, "comment": comment, "user_id": user_id, "staff_user_id": staff_user_id}
    before = MessageFeedback.objects.filter(message=answer).values_list("rating", flat=True).first()
    feedback, created = MessageFeedback.objects.update_or_create(
        message=answer,
        defaults=given,
        create_defaults={
            **given,
            "conversation": conversation,
            "tenant_id": conversation.tenant_id,
            "profile_id": conversation.profile_id,
            "cohort": answer.cohort,
            "routing_version": answer.routing_version,
            "answered_at": answer.created_at,
            "agent": answer.agent,
            "route_agent": answer.decision_agent or "",
            "route_intent": answer.decision_intent or "",
        },
    )
    if before != feedback.rating:  # a comment alone changes no count
        ratings_changed.send(sender=MessageFeedback, hours={_hour(feedback.answered_at)})
    escalation = thumbs_down_escalate(conversation=conversation, comment=comment) if rating == "down" else None
    outcome_ratings_count(conversation_id=conversation.pk)
    position = queue_position(escalation) if escalation is not None else None
    return FeedbackGiven(feedback=feedback, created=created, escalation=escalation, position=position)


def _hour(moment: dt.datetime) -> dt.datetime:
    return moment.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)


def _escalation_settings(conversation: Conversation) -> EscalationSettings:
    """The profile's people in the loop, as its released version says (a profile not served: its saved ones)."""
    spec = snapshot_current().profiles.get(conversation.profile.agent_id)
    return spec.escalation if spec is not None else EscalationSettings.from_json(conversation.profile.escalation)


RATED_DOWN_WORDS = "The customer rated an answer down"
HISTORY_READ = 6  # the last messages the person's summary quotes from


def thumbs_down_escalate(*, conversation: Conversation, comment: str = "") -> Escalation | None:
    """A customer rated an answer of ``conversation`` down: hand it to a person when its profile says so
    (``escalation.on_thumbs_down``) and nobody holds it yet — with a summary of where it stood, its last messages
    and the customer's comment, in the language of their last message. ``None`` when it was not handed over.
    Runs in the caller's transaction."""
    ask = thumbs_down_asked(_escalation_settings(conversation))
    if ask is None or conversation.escalation_id is not None:
        return None
    entries = conversation_history(conversation.pk, ended_at=conversation.ended_at, limit=HISTORY_READ)
    asked = max((index for index, entry in enumerate(entries) if entry.role == MessageRole.USER), default=None)
    text = entries[asked].content if asked is not None else ""
    answered = [entry.content for entry in entries[(asked or 0) + 1 :] if entry.role == MessageRole.ASSISTANT]
    if comment.strip():
        ask = replace(ask, summary=f"{RATED_DOWN_WORDS}: {comment.strip()[:500]}")
    summary = summary_for_person(
        ask,
        intent=conversation.active_intent,
        agent=conversation.active_specialist,
        state=conversation.state,
        history=[(entry.role, entry.content) for entry in entries[:asked]] if asked is not None else [],
        text=text,
        answer=answered[0] if answered else "",
    )
    try:
        return escalation_open(
            conversation=conversation, ask=ask, summary=summary, language=language_of(detect_language(text))
        )
    except EscalationConflict:  # a person took it meanwhile (a turn's escalation)
        return None


@dataclass(frozen=True)
class FeedbackRate:
    """Answers given in a window and their ratings, for one cohort and/or routing version (``None`` where the
    figures are not split by it; a ``routing_version`` of ``None`` in a split by version: a draft or a
    never-published profile)."""

    answers: int
    up: int
    down: int
    cohort: str | None = None
    routing_version: int | None = None

    @property
    def rated(self) -> int:
        return self.up + self.down

    @property
    def negative_rate(self) -> float | None:
        """``down / rated``, from 0 to 1; ``None`` when no answer was rated."""
        return self.down / self.rated if self.rated else None

    def as_dict(self) -> dict[str, Any]:
        rate = self.negative_rate
        return {
            "cohort": self.cohort,
            "routing_version": self.routing_version,
            "answers": self.answers,
            "rated": self.rated,
            "up": self.up,
            "down": self.down,
            "negative_rate_percentage": None if rate is None else round(100 * rate, 2),
        }


def _in(field: str, values: Collection[Any] | None) -> Q:
    """``field`` is one of ``values`` (``None`` among them matches NULL); no condition when ``values`` is None."""
    if values is None:
        return Q()
    condition = Q(**{f"{field}__in": [value for value in values if value is not None]})
    return condition | Q(**{f"{field}__isnull": True}) if None in values else condition


def _grouped(rows: QuerySet[Any], fields: list[str], **counts: Count) -> list[dict[str, Any]]:
    """``counts`` per value of ``fields``; one row for everything (zeros included) without fields."""
    if not fields:
        return [rows.aggregate(**counts)]
    return list(rows.order_by().values(*fields).annotate(**counts))


def feedback_rates(
    *,
    start: dt.datetime,
    end: dt.datetime,
    profile_id: int | None = None,
    tenant_id: TenantScope = None,
    cohorts: Collection[str] | None = None,
    routing_versions: Collection[int | None] | None = None,
    by: Sequence[Grouping] = GROUPINGS,
    answers: bool = True,
) -> list[FeedbackRate]:
    """Answers given in ``[start, end)`` and their feedback, one :class:`FeedbackRate` per value of ``by``
    (cohort, routing version, both — the default — or neither: one row for everything), sorted by those values.

    Feedback counts by when its answer was given, not when it was rated, so a window's figures are its answers'.
    ``tenant_id``: one tenant, some (a set of ids) or all (``None``); ``profile_id``: one profile (``None``: all).
    ``cohorts`` / ``routing_versions``: only those (``None`` in ``routing_versions`` is a draft's or a
    never-published profile's answers).
    ``answers=False`` skips counting the answers (``answers`` is then 0): the ratings alone read the feedback
    table's own index, which is what a guard evaluated every minute wants. Two queries at most.
    """
    if any(name not in GROUPINGS for name in by):
        raise ValueError(f"by takes {', '.join(GROUPINGS)}")
    fields: list[str] = list(dict.fromkeys(by))
    rated = MessageFeedback.objects.filter(
        _in("cohort", cohorts), _in("routing_version", routing_versions), answered_at__gte=start, answered_at__lt=end
    )
    rated = rated.filter(**tenant_scope_where("tenant_id", tenant_id))
    if profile_id is not None:
        rated = rated.filter(profile_id=profile_id)
    up, down = Q(rating=FeedbackRating.UP), Q(rating=FeedbackRating.DOWN)
    counts: dict[tuple[Any, ...], dict[str, int]] = {}
    for row in _grouped(rated, fields, up=Count("pk", filter=up), down=Count("pk", filter=down)):
        counts[tuple(row[name] for name in fields)] = {"up": row["up"], "down": row["down"]}
    if answers:
        given = Message.objects.filter(
            _in("cohort", cohorts),
            _in("routing_version", routing_versions),
            role=MessageRole.ASSISTANT,
            created_at__gte=start,
            created_at__lt=end,
        )
        given = given.filter(**tenant_scope_where("conversation__tenant_id", tenant_id))
        if profile_id is not None:
            given = given.filter(conversation__profile_id=profile_id)
        for row in _grouped(given, fields, answers=Count("pk")):
            counts.setdefault(tuple(row[name] for name in fields), {}).update(answers=row["answers"])
    rates = [
        FeedbackRate(
            answers=figures.get("answers", 0),
            up=figures.get("up", 0),
            down=figures.get("down", 0),
            **dict(zip(fields, key, strict=True)),
        )
        for key, figures in counts.items()
    ]
    # Cohorts by name, versions by number with None (a draft) last.
    return sorted(rates, key=lambda rate: (rate.cohort or "", rate.routing_version is None, rate.routing_version or 0))


class FeedbackTurn(TypedDict):
    """What :func:`feedback_with_turn` adds to each rating."""

    question_id: int | None
    question_text: str | None
    decision_intent: str | None
    decision_agent: str | None
    decision_method: str | None


def feedback_with_turn(
    rows: QuerySet[MessageFeedback],
) -> QuerySet[WithAnnotations[MessageFeedback, FeedbackTurn]]:
    """``rows`` with the turn of each rated answer: ``question_id`` and ``question_text`` (the customer's message
    the answer replied to: the conversation's last user message before it, as :mod:`conversations.records` writes a
    turn), and that message's route decision — ``decision_intent``, ``decision_agent``, ``decision_method`` —
    ``None`` where the turn stored none. Correlated subqueries: for a page of rows or a grouped count."""
    return answer_turn(rows, answer="message_id").annotate(
        question_text=Subquery(Message.objects.filter(pk=OuterRef("question_id")).values("content")[:1]),
    )


def answer_turn(rows: QuerySet[Any], *, answer: str) -> QuerySet[Any]:
    """``rows`` (each naming an answer by its field ``answer`` and its ``conversation_id``) with the answer's turn:
    ``question_id``, the conversation's last user message before the answer, and that message's first route
    decision's ``decision_intent``, ``decision_agent`` and ``decision_method`` (``None`` where the turn stored none).
    Correlated subqueries."""
    question = Message.objects.filter(
        conversation_id=OuterRef("conversation_id"), role=MessageRole.USER, pk__lt=OuterRef(answer)
    ).order_by("-pk")
    decision = RouteDecisionRecord.objects.filter(message_id=OuterRef("question_id")).order_by("pk")
    return rows.annotate(question_id=Subquery(question.values("pk")[:1])).annotate(
        decision_intent=Subquery(decision.values("intent")[:1]),
        decision_agent=Subquery(decision.values("agent")[:1]),
        decision_method=Subquery(decision.values("method")[:1]),
    )
