"""The graph's steps over memory (:class:`.part.TurnMemory`): read the message as a memory command and start the
summary's rewrite when it is due (:func:`memory_begin`, at the start of the routing), give each specialist its notes
(:func:`memory_notes`), wait for the summary before the turn is stored (:func:`memory_settle`), and keep or forget
facts once the customer's message is stored (:func:`memory_persist`).
"""

from __future__ import annotations

import asyncio
import logging

from common.i18n import say
from common.text import normalize
from conversations.history import HistoryEntry
from conversations.memory.commands import FORGET, RECALL, REMEMBER, command_read
from conversations.memory.facts import fact_remember, facts_forget, facts_matching
from conversations.memory.part import (
    FORGOTTEN,
    NOT_IDENTIFIED,
    NOTHING_REMEMBERED,
    RECALLED,
    REMEMBERED,
)
from conversations.memory.summary import SummaryWritten, summary_rewritten
from conversations.memory.tool import facts_saved
from conversations.models import FactSource
from conversations.turn import Turn
from routing.public import RouteDecision

logger = logging.getLogger(__name__)


def _answer(turn: Turn) -> str | None:
    """The platform's answer to the message as a memory command (and what it will keep or forget), or ``None`` when
    it is none. A bare "forget that" is the last fact's only while no flow or question is open (else it cancels
    it, conversations.stack_turn); a "forget …" that matches no fact is no command (it may be a request)."""
    memory, language = turn.memory, turn.language.code
    command = memory.command = command_read(turn.guardrails.sanitized_text)
    if command is None:
        return None
    if command.kind == FORGET:
        if command.forgets_the_last and (turn.stack.frames or turn.stack.found_waiting):
            return None
        forgotten = facts_matching(memory.facts, command.words)
        if not forgotten:
            return None
        memory.forget = [fact.id for fact in forgotten]
        return say(language, FORGOTTEN, facts="; ".join(fact.text for fact in forgotten))
    if not memory.user_id:
        return say(language, NOT_IDENTIFIED)
    if command.kind == REMEMBER:
        memory.remember = command.words
        return say(language, REMEMBERED, fact=command.words)
    assert command.kind == RECALL
    if not memory.facts:
        return say(language, NOTHING_REMEMBERED)
    return "\n".join([say(language, RECALLED), *(f"- {fact.text}" for fact in memory.facts)])


async def memory_begin(turn: Turn) -> RouteDecision | None:
    """At the start of the routing (memory's claim, :mod:`conversations.stages`): start rewriting the summary when it
    is due (it runs beside the turn), and read the message as a memory command — then the platform answers it (the
    decision returned, method ``memory``: the conversation's state, specialist and flows stay as they were)."""
    memory = turn.memory
    if memory.left is not None:  # the summary is due: its read came with the turn's load
        memory.refresh = asyncio.ensure_future(_summary_rewrite(turn, memory.left))
    answer = _answer(turn)
    if answer is None:
        memory.command = None
        return None
    memory.answer = answer
    agent = turn.route.active_agent or turn.input.profile.fallback_agent
    assert memory.command is not None
    return RouteDecision(
        route=agent,
        agent=agent,
        intent=turn.route.active_intent,
        confidence=1.0,
        reason=f"The customer's memory: {memory.command.kind}.",
        method="memory",
        keeps_conversation=True,
    )


async def _summary_rewrite(turn: Turn, left: tuple[HistoryEntry, ...]) -> SummaryWritten | None:
    memory = turn.memory
    if not left:  # nothing left the window since: wait another round
        return SummaryWritten(memory.summary, memory.summary_through, memory.message_count)
    extract = turn.input.profile.extract_customer_facts and bool(memory.user_id)
    read = await summary_rewritten(
        turn.input.profile, memory.summary, left, extract=extract, summarise=memory.summarising
    )
    facts = tuple((turn.guardrails.vault.mask(fact), source) for fact, source in read.facts)
    return SummaryWritten(read.text, left[-1].message_id or memory.summary_through, memory.message_count, facts)


def memory_notes(turn: Turn, agent: str) -> tuple[str, ...]:
    """``agent``'s notes of memory for this turn (:meth:`.part.TurnMemory.notes_for`)."""
    return turn.memory.notes_for(agent, shared=turn.input.profile.share_customer_memory)


async def memory_settle(turn: Turn) -> None:
    """Before the turn is stored: the summary's rewrite, if one runs, is waited for; one that failed leaves the
    summary as it was (logged)."""
    refresh = turn.memory.refresh
    if refresh is None:
        return
    try:
        turn.memory.written = await refresh
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 — the summary waits for its next round; the turn is stored
        logger.warning("The conversation's summary could not be rewritten: %s", exc)


def facts_saved_by(turn: Turn) -> list[tuple[str, str]]:
    """(specialist, fact) for every fact the turn's runs saved with the remember tool (:mod:`.tool`), a plan's parts
    included, in order."""
    runs = [*turn.chain.runs, *((part.agent, part.outcome) for part in turn.supervisor.parts() if part.outcome)]
    seen: set[int] = set()
    saved = []
    for agent, outcome in runs:
        if id(outcome) not in seen:
            seen.add(id(outcome))
            saved += [(agent, fact) for fact in facts_saved(outcome.tool_results)]
    return saved


def memory_persist(turn: Turn) -> None:
    """Once the customer's message is stored (its id the fact's source): keep or forget what the command said, keep
    what the specialists saved and what the summary's rewrite read (a fact the customer has already is not kept
    twice), in the database thread."""
    memory, data = turn.memory, turn.input
    if memory.remember:
        fact_remember(
            tenant_id=data.tenant_pk,
            user_id=memory.user_id,
            text=memory.remember,
            source_message_id=turn.store.user_message_id,
        )
    if memory.forget:
        facts_forget(tenant_id=data.tenant_pk, user_id=memory.user_id, ids=memory.forget)
    extracted = memory.written.facts if memory.written is not None else ()
    kept = [
        *((FactSource.SAVED, agent, fact, turn.store.user_message_id) for agent, fact in facts_saved_by(turn)),
        *((FactSource.EXTRACTED, "", fact, source) for fact, source in extracted),
    ]
    if not kept or not memory.user_id:  # a saved fact needs a user id (the tool said so); most turns keep none
        return
    known = {normalize(fact.text) for fact in memory.facts}
    for source, agent, text, message_id in kept:
        if normalize(text) in known:
            continue
        known.add(normalize(text))
        fact_remember(
            tenant_id=data.tenant_pk,
            user_id=memory.user_id,
            text=text,
            source=source,
            agent=agent,
            source_message_id=message_id,
        )
