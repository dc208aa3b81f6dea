"""How conversations end (docs/analytics.md, "Outcomes"): resolved, escalated or abandoned.

A conversation handed to a person is ``escalated`` at once, for good (the graph and
:mod:`conversations.desk.escalations` write it). Any other conversation is decided when it closes — idle past its
profile's ``abandon_after_minutes`` (Celery beat's ``conversations.outcomes_close``, every ``OUTCOMES_CLOSE_SECONDS``),
or its session ended through the API — by :func:`outcome_decided`, in this order:

1. **resolved, ``closing_words``** — the customer's last message was a goodbye or thanks (small talk's ``goodbye``
   and ``thanks``: "obrigado, tchau", "thanks, bye") or holds one of the profile's closing words ("era só isso");
2. **resolved, ``rated_up``** — the conversation's latest rating is up;
3. **abandoned** — anything else (reason ``timeout``, or ``session_ended``).

Each decided conversation gets its :class:`~conversations.models.ConversationOutcome` row (what the outcome
analytics and the rollout guards count) and its ``outcome`` column. A customer message to a closed conversation
opens it again (the graph's rule); an escalated one stays escalated.

:func:`outcomes_close` works in bounded batches, one transaction each, whatever the batch's size: one read (the
conversations with their last message, version and ratings as subqueries, locked, skipping those a turn holds), one
update of the outcome column, one read of the outcome rows it replaces (their days' totals go stale), one insert of
the outcome rows. The update re-checks that the conversation is still
open and idle (a batch where one is not is rolled back and tried again next time), so a customer who writes
meanwhile is never closed under their own turn; a turn that starts after the close sees the closed conversation and
opens it again. A conversation waiting in a queue (``queued``) past its profile's timeout is
closed there too (:func:`conversations.desk.escalations.escalation_close`), so the desk's queues keep no ghosts.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Case, F, OuterRef, Q, QuerySet, Subquery, Value, When
from django.utils import timezone

from agents.models import AgentProfile
from agents.public import EscalationSettings
from common.text import phrase_found
from conversations.desk.escalations import escalation_close
from conversations.models import (
    OPEN,
    Conversation,
    ConversationOutcome,
    Escalation,
    EscalationStatus,
    FeedbackRating,
    Message,
    MessageFeedback,
    MessageRole,
    Outcome,
)
from conversations.ratings import outcomes_changing, ratings_counted
from routing.public import small_talk_read, snapshot_current

logger = logging.getLogger(__name__)

CLOSING_WORDS = "closing_words"
RATED_UP = "rated_up"
TIMEOUT = "timeout"
SESSION_ENDED = "session_ended"
# Small talk that ends a conversation well (routing.small_talk's kinds).
CLOSING_KINDS = ("goodbye", "thanks")
BATCH_SIZE = 500


@dataclass(frozen=True)
class Ending:
    """How a conversation that closes ends: its :class:`~conversations.models.Outcome` and why."""

    outcome: str
    reason: str


def outcome_decided(
    *, last_text: str, closing_words: Iterable[str], last_rating: str | None, otherwise: str = TIMEOUT
) -> Ending:
    """The outcome of a conversation that closes, from the customer's last message (``last_text``), the profile's
    closing words and the conversation's latest rating (``up``, ``down`` or ``None``): resolved by closing words or
    an up rating, else abandoned for ``otherwise`` (``timeout`` or ``session_ended``). Pure."""
    text = last_text or ""
    talk = small_talk_read(text) if text.strip() else None
    if (talk is not None and talk.kind in CLOSING_KINDS) or phrase_found(text, closing_words):
        return Ending(Outcome.RESOLVED, CLOSING_WORDS)
    if last_rating == FeedbackRating.UP:
        return Ending(Outcome.RESOLVED, RATED_UP)
    return Ending(Outcome.ABANDONED, otherwise)


@dataclass(frozen=True)
class ProfileRules:
    """What closes a profile's conversations: its timeout and closing words, as its released version says (a
    profile not served — disabled — by its saved settings)."""

    pk: int
    agent_id: str
    abandon_after: dt.timedelta
    closing_words: tuple[str, ...]


def profile_rules() -> list[ProfileRules]:
    """Every profile's rules (one query, plus the compiled snapshot)."""
    served = snapshot_current().profiles
    rules = []
    for pk, agent_id, escalation, closing_words in AgentProfile.objects.order_by("pk").values_list(
        "pk", "agent_id", "escalation", "closing_words"
    ):
        spec = served.get(agent_id)
        settings = spec.escalation if spec is not None else EscalationSettings.from_json(escalation)
        words = spec.closing_words if spec is not None else tuple(closing_words or ())
        rules.append(ProfileRules(pk, agent_id, dt.timedelta(minutes=settings.abandon_after_minutes), tuple(words)))
    return rules


def _idle(cutoff: dt.datetime) -> Q:
    """No customer message since ``cutoff``, and no turn running now (a turn in progress holds a ticket)."""
    quiet = Q(turn_started_at__lt=cutoff) | Q(turn_started_at__isnull=True, created_at__lt=cutoff)
    return quiet & Q(turn_tickets_done__gte=F("turn_tickets_issued"))


# What deciding a conversation reads of it.
DECIDING = (
    "pk",
    "tenant_id",
    "profile_id",
    "cohort",
    "active_intent",
    "active_specialist",
    "goal_state",
    "created_at",
    "last_text",
    "last_version",
    "last_rating",
    "rated_up",
    "rated_down",
)


def _deciding(conversations: QuerySet[Conversation]) -> QuerySet[Any]:
    """``conversations`` with what deciding their outcome reads, each a correlated subquery (no query per
    conversation): the customer's last message and the version that served it, the latest rating, the counts."""
    asked = Message.objects.filter(conversation_id=OuterRef("pk"), role=MessageRole.USER).order_by("-created_at", "-id")
    ratings = MessageFeedback.objects.filter(conversation_id=OuterRef("pk"))
    return conversations.annotate(
        last_text=Subquery(asked.values("content")[:1]),
        last_version=Subquery(asked.values("routing_version")[:1]),
        last_rating=Subquery(ratings.order_by("-updated_at", "-id").values("rating")[:1]),
        rated_up=ratings_counted(OuterRef("pk"), FeedbackRating.UP),
        rated_down=ratings_counted(OuterRef("pk"), FeedbackRating.DOWN),
    ).values(*DECIDING)


def goal_served(goal_state: Any) -> str:
    """Goal mode: the last goal the conversation served, as ``domain.goal`` ("" when none)."""
    last = goal_state.get("last") if isinstance(goal_state, Mapping) else None
    if isinstance(last, Mapping) and last.get("goal"):
        return f"{last.get('domain', '')}.{last['goal']}".strip(".")
    return ""


def outcome_row(read: Mapping[str, Any], ending: Ending, now: dt.datetime) -> ConversationOutcome:
    """The outcome row, unsaved, of a conversation decided ``now`` as ``ending``: ``read`` holds what the close reads
    of it (:data:`DECIDING`: its ids, cohort, where it stood, when it started, the version of its last turn and its
    ratings counted)."""
    return ConversationOutcome(
        conversation_id=read["pk"],
        tenant_id=read["tenant_id"],
        profile_id=read["profile_id"],
        outcome=ending.outcome,
        reason=ending.reason,
        cohort=read["cohort"],
        routing_version=read["last_version"],
        intent=read["active_intent"],
        goal=goal_served(read["goal_state"])[:100],
        agent=read["active_specialist"],
        rated_up=read["rated_up"],
        rated_down=read["rated_down"],
        started_at=read["created_at"],
        decided_at=now,
    )


UPDATED = ["outcome", "reason", "cohort", "routing_version", "intent", "goal", "agent", "rated_up", "rated_down"]


def _decide(
    reads: Sequence[Mapping[str, Any]], *, closing_words: Iterable[str], otherwise: str, now: dt.datetime, still: Q
) -> dict[str, int]:
    """Decide ``reads`` (rows of :func:`_deciding`), in the caller's transaction: their outcome column where ``still``
    holds (open, and idle for the periodic close), then their outcome rows. Returns the counts per outcome; ``{}``
    and the transaction marked for rollback when one of them was no longer open or idle."""
    words = tuple(closing_words)
    endings = {
        read["pk"]: outcome_decided(
            last_text=read["last_text"] or "", closing_words=words, last_rating=read["last_rating"], otherwise=otherwise
        )
        for read in reads
    }
    if not endings:
        return {}
    resolved = [pk for pk, ending in endings.items() if ending.outcome == Outcome.RESOLVED]
    updated = Conversation.objects.filter(still, pk__in=list(endings), outcome=OPEN).update(
        outcome=Case(When(pk__in=resolved, then=Value(Outcome.RESOLVED)), default=Value(Outcome.ABANDONED))
    )
    if updated != len(endings):
        # A conversation changed under the batch (rows are locked on PostgreSQL; not on SQLite): nothing of the batch
        # is kept, and the next run decides them again.
        transaction.set_rollback(True)
        return {}
    outcomes_changing(list(endings))  # a row left by a conversation that reopened is replaced
    ConversationOutcome.objects.bulk_create(
        [outcome_row(read, endings[read["pk"]], now) for read in reads],
        update_conflicts=True,  # a row left by a conversation that reopened meanwhile is replaced
        unique_fields=["conversation"],
        update_fields=[*UPDATED, "tenant", "profile", "started_at", "decided_at"],
    )
    counts: dict[str, int] = {}
    for ending in endings.values():
        counts[ending.outcome] = counts.get(ending.outcome, 0) + 1
    return counts


@dataclass
class Closed:
    """What one run of :func:`outcomes_close` did: conversations decided per outcome, queued escalations closed."""

    resolved: int = 0
    abandoned: int = 0
    escalations: int = 0

    @property
    def conversations(self) -> int:
        return self.resolved + self.abandoned

    def add(self, counts: Mapping[str, int]) -> None:
        self.resolved += counts.get(Outcome.RESOLVED, 0)
        self.abandoned += counts.get(Outcome.ABANDONED, 0)


def _close_batch(rules: ProfileRules, cutoff: dt.datetime, now: dt.datetime, batch_size: int) -> tuple[int, dict]:
    """One batch of the profile's idle open conversations, decided in one transaction: ``(read, counts)``."""
    idle = _idle(cutoff)
    with transaction.atomic():
        # The conversation_open partial index: the profile's open conversations, oldest first. Rows a turn is
        # writing are skipped (the next run gets them, if they are still idle then).
        candidates = Conversation.objects.filter(idle, profile_id=rules.pk, outcome=OPEN).order_by("created_at", "pk")
        candidates = candidates.select_for_update(skip_locked=True, of=("self",))
        reads = list(_deciding(candidates)[:batch_size])
        counts = _decide(reads, closing_words=rules.closing_words, otherwise=TIMEOUT, now=now, still=idle)
    return len(reads), counts


def _close_queued(rules: ProfileRules, cutoff: dt.datetime, batch_size: int) -> int:
    """Close the profile's escalations still waiting in a queue whose conversation is idle past the timeout."""
    closed = 0
    while True:
        with transaction.atomic():
            ghosts = list(
                Escalation.objects.filter(
                    Q(conversation__turn_started_at__lt=cutoff)
                    | Q(conversation__turn_started_at__isnull=True, conversation__created_at__lt=cutoff),
                    profile_id=rules.pk,
                    status=EscalationStatus.QUEUED,
                    conversation__escalation_id=F("pk"),  # what escalation_close closes: the one holding it
                )
                .select_related("conversation")
                .order_by("created_at", "pk")[:batch_size]
            )
            for ghost in ghosts:
                escalation_close(conversation=ghost.conversation)
        closed += len(ghosts)
        if len(ghosts) < batch_size:
            return closed


def outcomes_close(*, now: dt.datetime | None = None, batch_size: int = BATCH_SIZE) -> Closed:
    """Decide every open conversation idle past its profile's ``abandon_after_minutes`` (no customer message since),
    in batches of ``batch_size`` (one transaction and three statements each), and close the queued escalations of
    conversations idle as long. What Celery beat runs every ``OUTCOMES_CLOSE_SECONDS``; safe to run twice at once
    (locked rows are skipped, decided ones are not read again)."""
    now = now or timezone.now()
    closed = Closed()
    for rules in profile_rules():
        cutoff = now - rules.abandon_after
        while True:
            read, counts = _close_batch(rules, cutoff, now, batch_size)
            closed.add(counts)
            if read < batch_size or not counts:  # the last batch, or one that could close nothing (no loop on it)
                break
        closed.escalations += _close_queued(rules, cutoff, batch_size)
    if closed.conversations or closed.escalations:
        logger.info(
            "outcomes closed: %s resolved, %s abandoned, %s queued escalations",
            closed.resolved,
            closed.abandoned,
            closed.escalations,
        )
    return closed


def outcome_on_end(*, conversation: Conversation, now: dt.datetime | None = None) -> str:
    """The session of ``conversation`` ended (``DELETE /api/sessions/{key}``): an open conversation is decided at
    once by the same rules (abandoned for ``session_ended``), and a person who held it lets it go (its escalation is
    ``closed``). Expects the conversation's row locked by the caller's transaction. Returns its outcome now."""
    escalation_close(conversation=conversation)
    if conversation.outcome != OPEN:
        return conversation.outcome
    spec = snapshot_current().profiles.get(conversation.profile.agent_id)
    words = spec.closing_words if spec is not None else tuple(conversation.profile.closing_words or ())
    reads = list(_deciding(Conversation.objects.filter(pk=conversation.pk)))
    counts = _decide(reads, closing_words=words, otherwise=SESSION_ENDED, now=now or timezone.now(), still=Q())
    return next(iter(counts), OPEN)
