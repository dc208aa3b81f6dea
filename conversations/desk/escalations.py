"""People in the loop: escalations opened, queued, taken, answered, transferred and handed back (docs/desk.md).

Services (writes) and selectors (reads) of :class:`~conversations.models.Escalation`, called by the graph (a turn
that hands its conversation over writes :func:`escalation_new`'s row with its own), by the feedback service (a
thumbs-down: :func:`escalation_open`), by the desk's faces (the desk page and socket, an external desk's API) and by
the session services. What a watcher should see is pushed once it is stored (:mod:`conversations.delivery`): the
customer's side gets the person's replies and the escalation's changes, the tenant's desks every change of its
queues. Every change is also sent as :data:`conversations.signals.escalation_changed` (the external desks listen).

Who may act is the faces' business (the *answer as a person* right over the tenant, or an API key that may answer):
these functions trust their caller and take the acting :class:`Person`.

Concurrency: taking is one conditional update, so of two people taking the same conversation one gets it and the
other :class:`EscalationConflict` naming who has it; replies, notes and transfers need it open (and replies, notes and
hand-backs held by their author — a reply to a conversation still in line takes it first). A hand-back clears the
conversation's escalation only if it is still this one.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from agents.public import EscalationSettings
from common.errors import DomainError, NotFound
from conversations.delivery import CONVERSATION_EVENT, DESK_EVENT, conversation_group, desk_group, push_on_commit
from conversations.escalation import EscalationAsk, notice
from conversations.models import (
    ESCALATION_OPEN,
    Conversation,
    ConversationOutcome,
    Escalation,
    EscalationPriority,
    EscalationStatus,
    Message,
    MessageRole,
    Outcome,
)
from conversations.ratings import outcome_ratings_count, outcomes_changing
from conversations.signals import escalation_changed
from handoffs.models import KIND_BITS, PERSON, Handoff, HandoffKind, HandoffStatus
from handoffs.public import Move
from routing.public import snapshot_current

ERROR_ESCALATION_NOT_FOUND = "No escalation with this id."
ERROR_TAKEN = "{person} has already taken this conversation."
ERROR_ENDED = "This escalation has ended: the conversation is back with the assistants."
ERROR_NOT_YOURS = "This conversation is with {person}: take it when they transfer it, or ask them."
ERROR_TEAM = "{team!r} is not one of the profile's teams ({teams})."
ERROR_TEXT_EMPTY = "Write something: the text must not be empty."
ERROR_TEXT_LONG = "The text is longer than the limit of {limit} characters."
ERROR_ALREADY_WITH_PERSON = "This conversation is already with a person."

# What a desk shows of a conversation's messages: the customer's, the assistants', the people's replies and notes.
DESK_ROLES = (MessageRole.USER, MessageRole.ASSISTANT, MessageRole.HUMAN, MessageRole.NOTE)


class EscalationConflict(DomainError):
    """The escalation is not in a state that allows this (taken by someone else, ended): a 409."""

    status_code = 409
    code = "conflict"


@dataclass(frozen=True)
class Person:
    """Who acts on an escalation: a staff user of the desk (``user_id``), or a person of an external desk (``ref``,
    that desk's id for them). ``name`` is what the customer reads."""

    name: str
    user_id: int | None = None
    ref: str = ""

    def author(self) -> dict[str, Any]:
        """A message's author as the APIs show it."""
        return {"kind": "human", "name": self.name, "id": self.ref or (str(self.user_id) if self.user_id else "")}

    def holds(self, escalation: Escalation) -> bool:
        if self.user_id is not None:
            return escalation.assigned_to_id == self.user_id
        return bool(self.ref) and escalation.person_ref == self.ref and escalation.assigned_to_id is None


def person_of_user(user: Any) -> Person:
    """A staff user as the customer reads them: the first name, else the username."""
    return Person(name=(user.first_name or user.get_username())[:150], user_id=user.pk)


# -- reads ---------------------------------------------------------------------------------------------------------


def escalation_get(*, escalation_id: Any) -> Escalation:
    """The escalation ``escalation_id`` (a UUID or its text); raises :class:`NotFound`."""
    try:
        key = escalation_id if isinstance(escalation_id, uuid.UUID) else uuid.UUID(str(escalation_id))
    except ValueError:
        key = None
    found = Escalation.objects.select_related("conversation", "profile").filter(pk=key).first() if key else None
    if found is None:
        raise NotFound(ERROR_ESCALATION_NOT_FOUND, fields={"escalation": [ERROR_ESCALATION_NOT_FOUND]})
    return found


def queue_ahead(*, tenant_id: int, profile_id: int, team: str, priority: int, created_at: Any = None) -> int:
    """How many conversations of the queue (tenant, profile, team) are served before one of ``priority`` queued at
    ``created_at`` (now, for one not queued yet): those of a higher priority, and those of its own queued earlier."""
    ahead = Q(priority__lt=priority) | Q(priority=priority)
    if created_at is not None:
        ahead = Q(priority__lt=priority) | Q(priority=priority, created_at__lt=created_at)
    return (
        Escalation.objects.filter(tenant_id=tenant_id, profile_id=profile_id, team=team, status=EscalationStatus.QUEUED)
        .filter(ahead)
        .count()
    )


def queue_position(escalation: Escalation) -> int | None:
    """The escalation's place in its queue (1: next), ``None`` when it is not waiting."""
    if escalation.status != EscalationStatus.QUEUED:
        return None
    return 1 + queue_ahead(
        tenant_id=escalation.tenant_id,
        profile_id=escalation.profile_id,
        team=escalation.team,
        priority=escalation.priority,
        created_at=escalation.created_at,
    )


def escalation_public(escalation: Escalation, *, position: int | None = None) -> dict[str, Any]:
    """The escalation as the customer's side reads it (``metadata.escalation``, the pushes, the sessions API)."""
    return {
        "id": str(escalation.pk),
        "status": escalation.status,
        "queue": escalation.team,
        "position": position,
        "reason": escalation.reason,
        "priority": EscalationPriority(escalation.priority).label.lower(),
        "desk": escalation.desk or "platform",
        "person": escalation.person or None,
    }


def message_public(message: Message) -> dict[str, Any]:
    """A stored message as the sessions API and the pushes show it, with its ``author``."""
    return {
        "id": message.pk,
        "role": message.role,
        "agent": message.agent,
        "content": message.content,
        "author": message_author(message.role, message.agent, message.metadata),
        "created_at": message.created_at.isoformat() if message.created_at else None,
    }


def message_author(role: str, agent: str, metadata: dict[str, Any] | None) -> dict[str, Any]:
    """Who wrote a message: ``{"kind": "customer"}``, ``{"kind": "assistant", "agent": …}``, or a person's
    ``{"kind": "human", "name", "id"}`` (the desk's replies and notes)."""
    if role == MessageRole.USER:
        return {"kind": "customer"}
    if role in (MessageRole.HUMAN, MessageRole.NOTE):
        author = (metadata or {}).get("author")
        return dict(author) if isinstance(author, dict) else {"kind": "human", "name": "", "id": ""}
    return {"kind": "assistant" if role == MessageRole.ASSISTANT else role, "agent": agent}


# -- opening -------------------------------------------------------------------------------------------------------


def escalation_new(
    *,
    conversation_id: int,
    tenant_id: int,
    profile_id: int,
    ask: EscalationAsk,
    language: str,
    summary: str,
    from_agent: str,
    intent: str,
    desk: str,
) -> Escalation:
    """An escalation row for ``ask``, not saved (its id is set: the turn names it in its answer before it stores)."""
    return Escalation(
        id=uuid.uuid4(),
        conversation_id=conversation_id,
        tenant_id=tenant_id,
        profile_id=profile_id,
        team=ask.team,
        priority=ask.priority,
        reason=ask.reason,
        reason_text=ask.why,
        summary=summary,
        language=language,
        from_agent=from_agent[:64],
        intent=intent[:100],
        desk=desk,
        created_at=timezone.now(),
    )


def person_move(escalation: Escalation) -> Move:
    """The move of a hand-over: from the assistant that answered to :data:`PERSON`, kind ``human``, with the reason
    and the person's summary; ``outcome`` is the reason's code."""
    return Move(
        escalation.from_agent,
        PERSON,
        HandoffKind.HUMAN,
        reason=f"{escalation.reason_text} Queue: {escalation.team}.".strip(),
        context_summary=escalation.summary,
        outcome=escalation.reason,
    )


def escalation_move(escalation: Escalation) -> Handoff:
    """The ``agent_handoffs`` row of a hand-over outside a turn (:func:`person_move`), unsaved."""
    return Handoff(
        conversation_id=escalation.conversation_id,
        tenant_id=escalation.tenant_id,
        profile_id=escalation.profile_id,
        **person_move(escalation).as_dict(),
    )


# What an escalation writes of the conversation's outcome row (the rest — its ratings — is counted apart).
ESCALATED_COLUMNS = (
    "tenant_id",
    "profile_id",
    "outcome",
    "reason",
    "cohort",
    "routing_version",
    "intent",
    "goal",
    "agent",
    "started_at",
    "decided_at",
)


def escalated_outcome(
    *,
    escalation: Escalation,
    cohort: str,
    routing_version: int | None,
    started_at: Any,
    goal: str = "",
) -> ConversationOutcome:
    """The conversation's outcome row once ``escalation`` hands it to a person, unsaved: ``escalated`` for the
    escalation's reason, decided when it was queued, under the intent and the assistant it came from; its ratings are
    not counted yet (:func:`conversations.ratings.outcome_ratings_count`)."""
    return ConversationOutcome(
        conversation_id=escalation.conversation_id,
        tenant_id=escalation.tenant_id,
        profile_id=escalation.profile_id,
        outcome=Outcome.ESCALATED,
        reason=escalation.reason,
        cohort=cohort,
        routing_version=routing_version,
        intent=escalation.intent,
        goal=goal,
        agent=escalation.from_agent,
        started_at=started_at,
        decided_at=escalation.created_at,
    )


def outcome_escalated(
    *,
    escalation: Escalation,
    cohort: str,
    routing_version: int | None,
    started_at: Any,
    goal: str = "",
) -> None:
    """The conversation's outcome row says ``escalated`` (final: a person was asked for), in the current transaction;
    the caller sets the conversation's ``outcome`` column with its own update."""
    row = escalated_outcome(
        escalation=escalation, cohort=cohort, routing_version=routing_version, started_at=started_at, goal=goal
    )
    outcomes_changing([row.conversation_id])  # an outcome decided before (on a day summed already) is replaced
    ConversationOutcome.objects.update_or_create(
        conversation_id=row.conversation_id, defaults={column: getattr(row, column) for column in ESCALATED_COLUMNS}
    )
    # What it was rated before it was handed over; the row is decided now, on a day not summed yet.
    outcome_ratings_count(conversation_id=escalation.conversation_id, told=True)


def escalation_opened(escalation: Escalation, *, conversation_key: str, position: int | None) -> None:
    """Tell the tenant's desks (and the external desks) that ``escalation`` joined its queue, once it is stored."""
    event = {"kind": "queued", "escalation": desk_row(escalation, conversation_key, position)}
    push_on_commit(desk_group(escalation.tenant_id), DESK_EVENT, event)
    _changed(escalation, "opened")


@transaction.atomic
def escalation_open(*, conversation: Conversation, ask: EscalationAsk, summary: str, language: str) -> Escalation:
    """Hand ``conversation`` to a person outside a turn (a thumbs-down): the escalation, its ``human`` handoff, the
    outcome ``escalated``, the conversation held. Raises :class:`EscalationConflict` when a person already holds it.
    The customer's side is told (position and notice) once it is stored."""
    locked = Conversation.objects.select_for_update().get(pk=conversation.pk)
    if locked.escalation_id is not None:
        raise EscalationConflict(ERROR_ALREADY_WITH_PERSON)
    profile = snapshot_current().profiles.get(locked.profile.agent_id)
    desk = profile.escalation.desk if profile is not None else ""
    escalation = escalation_new(
        conversation_id=locked.pk,
        tenant_id=locked.tenant_id,
        profile_id=locked.profile_id,
        ask=ask,
        language=language,
        summary=summary,
        from_agent=locked.active_specialist,
        intent=locked.active_intent,
        desk=desk,
    )
    position = 1 + queue_ahead(
        tenant_id=locked.tenant_id, profile_id=locked.profile_id, team=escalation.team, priority=escalation.priority
    )
    escalation.save(force_insert=True)
    move = escalation_move(escalation)
    move.cohort = locked.cohort
    move.routing_version = profile.version if profile is not None else None
    move.save()
    Conversation.objects.filter(pk=locked.pk).update(
        escalation=escalation,
        outcome=Outcome.ESCALATED,
        handoff_kinds=F("handoff_kinds").bitor(KIND_BITS[HandoffKind.HUMAN]),
    )
    outcome_escalated(
        escalation=escalation, cohort=locked.cohort, routing_version=move.routing_version, started_at=locked.created_at
    )
    escalation_opened(escalation, conversation_key=locked.conversation_key, position=position)
    _tell_customer(escalation, locked.conversation_key, notice("queued", language, position=position), position)
    return escalation


# -- the desk's actions --------------------------------------------------------------------------------------------


def _open(escalation: Escalation) -> None:
    if escalation.status not in ESCALATION_OPEN:
        raise EscalationConflict(ERROR_ENDED)


def _held_by(escalation: Escalation, person: Person) -> None:
    _open(escalation)
    if escalation.status == EscalationStatus.ASSIGNED and not person.holds(escalation):
        raise EscalationConflict(ERROR_NOT_YOURS.format(person=escalation.person or "someone else"))


@transaction.atomic
def escalation_take(*, escalation_id: Any, person: Person) -> Escalation:
    """``person`` takes the queued escalation: it leaves the queue and is theirs. Raises
    :class:`EscalationConflict` when someone took it first (their name in the message) or it ended; taking one's own
    again is no change."""
    escalation = escalation_get(escalation_id=escalation_id)
    taken = Escalation.objects.filter(pk=escalation.pk, status=EscalationStatus.QUEUED).update(
        status=EscalationStatus.ASSIGNED,
        assigned_to_id=person.user_id,
        person=person.name,
        person_ref=person.ref,
        assigned_at=timezone.now(),
    )
    escalation.refresh_from_db()
    if not taken:
        if escalation.status == EscalationStatus.ASSIGNED and person.holds(escalation):
            return escalation
        _open(escalation)
        raise EscalationConflict(ERROR_TAKEN.format(person=escalation.person or "Someone"))
    conversation = escalation.conversation
    _tell_customer(
        escalation,
        conversation.conversation_key,
        notice("assigned", escalation.language, person=person.name),
    )
    _tell_desks(escalation, "taken", conversation.conversation_key)
    _changed(escalation, "taken")
    return escalation


def _text(text: Any) -> str:
    value = text.strip() if isinstance(text, str) else ""
    if not value:
        raise DomainError(ERROR_TEXT_EMPTY, fields={"text": [ERROR_TEXT_EMPTY]})
    limit = settings.ANSWER_MAX_CHARS
    if len(value) > limit:
        message = ERROR_TEXT_LONG.format(limit=limit)
        raise DomainError(message, fields={"text": [message]})
    return value


@transaction.atomic
def desk_reply(*, escalation_id: Any, person: Person, text: Any) -> Message:
    """``person``'s reply to the customer (taking the conversation first if it is still in line): stored as a message
    of role ``human`` with its author, then pushed to the customer's side and the desks."""
    value = _text(text)
    escalation = escalation_get(escalation_id=escalation_id)
    _held_by(escalation, person)
    if escalation.status == EscalationStatus.QUEUED:
        escalation = escalation_take(escalation_id=escalation.pk, person=person)
    message = _desk_message(escalation, MessageRole.HUMAN, value, person)
    key = escalation.conversation.conversation_key
    public = message_public(message)
    push_on_commit(conversation_group(key), CONVERSATION_EVENT, {"kind": "message", "message": public})
    push_on_commit(
        desk_group(escalation.tenant_id),
        DESK_EVENT,
        {"kind": "message", "escalation": str(escalation.pk), "message": public},
    )
    _changed(escalation, "message", message=public)
    return message


@transaction.atomic
def desk_note(*, escalation_id: Any, person: Person, text: Any) -> Message:
    """An internal note on the conversation (role ``note``): the desks see it, the customer never does."""
    value = _text(text)
    escalation = escalation_get(escalation_id=escalation_id)
    _open(escalation)
    message = _desk_message(escalation, MessageRole.NOTE, value, person)
    push_on_commit(
        desk_group(escalation.tenant_id),
        DESK_EVENT,
        {"kind": "note", "escalation": str(escalation.pk), "message": message_public(message)},
    )
    return message


@transaction.atomic
def escalation_transfer(
    *, escalation_id: Any, person: Person, team: str, priority: int | None = None, note: str = ""
) -> Escalation:
    """Send the conversation to ``team``'s queue (one of the profile's teams), unassigned, keeping its place in time
    (it was waiting since it was first queued); ``priority`` and a note for the next person optional."""
    escalation = escalation_get(escalation_id=escalation_id)
    _held_by(escalation, person)
    teams = escalation_teams(escalation)
    if team not in teams:
        message = ERROR_TEAM.format(team=team, teams=", ".join(teams))
        raise DomainError(message, fields={"team": [message]})
    before = escalation.team
    escalation.team, escalation.status = team, EscalationStatus.QUEUED
    escalation.assigned_to_id, escalation.person, escalation.person_ref, escalation.assigned_at = None, "", "", None
    if priority is not None:
        escalation.priority = EscalationPriority(priority)
    escalation.save(update_fields=["team", "status", "assigned_to", "person", "person_ref", "assigned_at", "priority"])
    written = _desk_message(escalation, MessageRole.NOTE, transfer_words(before, team, person, note), person)
    key = escalation.conversation.conversation_key
    position = queue_position(escalation)
    _tell_customer(escalation, key, notice("waiting", escalation.language, position=position), position)
    _tell_desks(escalation, "transferred", key, position)
    _changed(escalation, "transferred", message=message_public(written))
    return escalation


@transaction.atomic
def escalation_hand_back(*, escalation_id: Any, person: Person, note: str = "") -> Escalation:
    """Hand the conversation back to the assistants: the escalation ends (``returned``), a ``human`` handoff from
    :data:`PERSON` to the assistant that answered before records it, and the next customer message is routed again.
    The customer is told in their language."""
    escalation = escalation_get(escalation_id=escalation_id)
    _held_by(escalation, person)
    _end(escalation, EscalationStatus.RETURNED)
    conversation = escalation.conversation
    profile = snapshot_current().profiles.get(escalation.profile.agent_id)
    to_agent = conversation.active_specialist or (profile.fallback_agent if profile is not None else "")
    hand_back_move(
        escalation=escalation,
        person=person,
        to_agent=to_agent,
        note=note,
        cohort=conversation.cohort,
        routing_version=profile.version if profile is not None else None,
    ).save(force_insert=True)
    written = (
        _desk_message(escalation, MessageRole.NOTE, HANDED_BACK.format(note=note.strip()), person)
        if note.strip()
        else None
    )
    key = conversation.conversation_key
    _tell_customer(escalation, key, notice("returned", escalation.language, person=escalation.person or person.name))
    _tell_desks(escalation, "returned", key)
    _changed(escalation, "returned", **({"message": message_public(written)} if written is not None else {}))
    return escalation


def escalation_close(*, conversation: Conversation) -> None:
    """The conversation ended (its session was ended, or it was closed idle) while a person held it: the escalation
    is ``closed`` and leaves the queue. No-op when no person holds it. Call inside the transaction that ends it."""
    if conversation.escalation_id is None:
        return
    escalation = Escalation.objects.filter(pk=conversation.escalation_id).select_related("conversation").first()
    if escalation is None or escalation.status not in ESCALATION_OPEN:
        return
    _end(escalation, EscalationStatus.CLOSED)
    _tell_desks(escalation, "closed", conversation.conversation_key)
    _changed(escalation, "closed")


def _end(escalation: Escalation, status: str) -> None:
    escalation.status, escalation.ended_at = status, timezone.now()
    escalation.save(update_fields=["status", "ended_at"])
    Conversation.objects.filter(pk=escalation.conversation_id, escalation_id=escalation.pk).update(escalation=None)


def escalation_teams(escalation: Escalation) -> tuple[str, ...]:
    """The teams of the escalation's profile (its published settings; the stored ones for a profile not published)."""
    profile = snapshot_current().profiles.get(escalation.profile.agent_id)
    if profile is not None:
        return profile.escalation.teams
    return EscalationSettings.from_json(escalation.profile.escalation).teams


TRANSFERRED = "Transferred from {before} to {team} by {person}."
HANDED_BACK = "Handed back: {note}"


def transfer_words(before: str, team: str, person: Person, note: str = "") -> str:
    """The note a transfer leaves on the conversation: from which team to which, by whom, and the person's note."""
    words = TRANSFERRED.format(before=before, team=team, person=person.name)
    return f"{words} {note.strip()}" if note.strip() else words


def desk_message(*, escalation: Escalation, cohort: str, role: str, text: str, person: Person) -> Message:
    """A person's message on the conversation, unsaved: a reply to the customer (role ``human``) or an internal note
    (role ``note``), with its author and the escalation it was written under; ``cohort`` is the conversation's."""
    return Message(
        conversation_id=escalation.conversation_id,
        profile_id=escalation.profile_id,
        tenant_id=escalation.tenant_id,
        language=escalation.language,  # the customer's, as the escalation was opened in it
        cohort=cohort,
        role=role,
        content=text,
        metadata={"author": person.author(), "escalation": str(escalation.pk)},
    )


def hand_back_move(
    *, escalation: Escalation, person: Person, to_agent: str, note: str, cohort: str, routing_version: int | None
) -> Handoff:
    """The ``agent_handoffs`` row of a hand-back, unsaved: a ``human`` move from :data:`PERSON` to ``to_agent`` (the
    assistant that answered before), with the person's note as its summary; ``outcome`` is ``returned``."""
    return Handoff(
        conversation_id=escalation.conversation_id,
        tenant_id=escalation.tenant_id,
        profile_id=escalation.profile_id,
        from_agent=PERSON,
        to_agent=to_agent,
        kind=HandoffKind.HUMAN,
        status=HandoffStatus.COMPLETED,
        reason=f"{person.name} handed the conversation back to the assistants.",
        context_summary=note.strip()[:2000],
        outcome="returned",
        cohort=cohort,
        routing_version=routing_version,
    )


def _desk_message(escalation: Escalation, role: str, text: str, person: Person) -> Message:
    message = desk_message(
        escalation=escalation, cohort=escalation.conversation.cohort, role=role, text=text, person=person
    )
    message.save(force_insert=True)
    return message


def _tell_customer(escalation: Escalation, conversation_key: str, words: str, position: int | None = None) -> None:
    event = {"kind": "escalation", "escalation": escalation_public(escalation, position=position), "notice": words}
    push_on_commit(conversation_group(conversation_key), CONVERSATION_EVENT, event)


def desk_row(escalation: Escalation, conversation_key: str, position: int | None = None) -> dict[str, Any]:
    """The escalation as the desks read it (their events, their queues): the customer's view of it, with the
    conversation, the profile, the tenant's id, the priority's number (1: urgent, served first), when it was queued and
    the staff user who holds it (``None``: nobody, or a person of an external desk)."""
    return {
        **escalation_public(escalation, position=position),
        "conversation_key": conversation_key,
        "profile": escalation.profile.agent_id if escalation.profile_id else "",
        "tenant_id": escalation.tenant_id,
        "priority_number": escalation.priority,
        "assigned_to": escalation.assigned_to_id,
        "created_at": escalation.created_at.isoformat(),
    }


def _tell_desks(escalation: Escalation, kind: str, conversation_key: str, position: int | None = None) -> None:
    event = {"kind": kind, "escalation": desk_row(escalation, conversation_key, position)}
    push_on_commit(desk_group(escalation.tenant_id), DESK_EVENT, event)


def _changed(escalation: Escalation, kind: str, **extra: Any) -> None:
    """Tell the listeners of :data:`escalation_changed` (the external desks) once the change is stored."""
    transaction.on_commit(lambda: escalation_changed.send(sender=Escalation, escalation=escalation, kind=kind, **extra))
