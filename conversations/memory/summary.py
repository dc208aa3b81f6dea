"""A conversation's running summary of the messages its specialists no longer read.

The specialists read the conversation's last ``CONVERSATION_HISTORY_LIMIT`` messages (the window,
:mod:`conversations.history`). Once a conversation has more, the messages that left the window are folded into a
summary the specialists get before the recent ones. It is brought up to date incrementally and not on every message:
when :data:`SUMMARY_EVERY` messages have been stored since it was last written (:func:`summary_due`, a comparison of
two counts the turn read anyway), the turn's load brings the messages between what it covers and the window — at most
:data:`SUMMARY_READ_MAX` — with no trip of its own (:func:`summary_left`: on PostgreSQL in the ticket's statement,
:func:`summary_left_read`; elsewhere in the load's own crossing to the request's thread), and the summary is rewritten
from the old one and those:

- by the profile's model where one is configured (:func:`summary_rewritten`; its tokens are counted in the turn's
  usage as kind ``memory``);
- offline, by :func:`summary_extracted`: deterministic and extractive — one line per message, the speaker and the
  first sentence of what they wrote (at most :data:`LINE_MAX_CHARS`), appended to the old lines; the oldest lines go
  when the whole passes :data:`SUMMARY_MAX_CHARS`.

So the summary lags the window by fewer than :data:`SUMMARY_EVERY` messages, and a conversation of n messages pays for
about n / :data:`SUMMARY_EVERY` summaries, each over a bounded text.

Where the profile allows it (``extract_customer_facts``) and the conversation names its customer, the same rewrite
also reads lasting facts about the customer from those messages (:func:`summary_rewritten`): the model is asked for
the summary and the facts in one JSON reply (:data:`SUMMARY_FACTS_PROMPT`; one call, not two), read defensively — a
reply that is plain text is the summary and gives no fact, one that is JSON of another shape keeps the old summary —
and offline the customer's stated preferences are read (:func:`agents.remember_tool.preference_stated`).

A profile that does not summarise its conversations (``summarise_conversations`` off) reads, rewrites and gives none;
where it reads the customer's facts from them all the same, what left the window is read as for a summary and the
model asked for the facts alone (:data:`FACTS_PROMPT`), the summary kept as it was.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection

from agents.public import (
    FACT_MAX_CHARS,
    KIND_MEMORY,
    OpenAICompatibleModel,
    llm_configured,
    preference_stated,
    usage_record,
)
from common.infra import tracing
from common.text import normalize
from conversations.history import HistoryEntry, conversation_history, history_parse, history_rows

SUMMARY_EVERY = 10  # messages stored between two summaries
SUMMARY_READ_MAX = 60  # messages read for one summary (the newest of those that left the window)
SUMMARY_MAX_CHARS = 2000
LINE_MAX_CHARS = 160
SPEAKERS = {"user": "Customer", "assistant": "Assistant", "human": "Agent"}
SUMMARY_PROMPT = (
    "You keep a running summary of a customer conversation for the assistants who continue it. Rewrite the summary "
    "below so that it also covers the new messages: the customer's requests, facts they gave, what was done or "
    "promised, and what is still open. Keep placeholders such as [PHONE_1] as they are. At most {words} words; write "
    "only the summary.\n\nSummary so far:\n{summary}\n\nNew messages (oldest first):\n{messages}"
)
FACTS_PER_SUMMARY = 5  # what one rewrite may read of lasting facts
FACTS_ASKED = (
    "the lasting facts about the customer that these new messages tell and that will still hold in their next "
    "conversations (their preferences, their situation), at most {facts}, each one short sentence; none when there is "
    "none."
)
SUMMARY_FACTS_PROMPT = (
    SUMMARY_PROMPT.replace("; write only the summary.", ".")
    + "\n\nAlso write down "
    + FACTS_ASKED
    + ' Answer with one JSON object and nothing else: {{"summary": "…", "facts": ["…"]}}'
)
# A profile that keeps no summary but reads the customer's facts from its conversations: the facts alone.
FACTS_PROMPT = (
    "You read a customer conversation for the assistants who will serve this customer again. Write down "
    + FACTS_ASKED
    + " Keep placeholders such as [PHONE_1] as they are. Answer with one JSON object and nothing else: "
    '{{"facts": ["…"]}}\n\nNew messages (oldest first):\n{messages}'
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_FENCED = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.DOTALL)


@dataclass(frozen=True)
class SummaryWritten:
    """A summary as the turn writes it to the conversation: its text, the last message it covers and the
    conversation's message count when it was written."""

    text: str
    through: int
    at_count: int
    # Lasting facts about the customer read from the messages it covers (kept with source extracted): (text, the
    # customer's message it came from, None when no message can be told).
    facts: tuple[tuple[str, int | None], ...] = ()


@dataclass(frozen=True)
class SummaryRead:
    """What one rewrite gives: the summary's text and the facts read with it."""

    text: str
    facts: tuple[tuple[str, int | None], ...] = ()


def summary_due(*, message_count: int, at_count: int, window: int, history: tuple[HistoryEntry, ...]) -> bool:
    """Whether the turn rewrites the summary: the window is full and :data:`SUMMARY_EVERY` messages were stored since
    the summary was last written. No query."""
    return len(history) >= window and message_count - at_count >= SUMMARY_EVERY and history[0].message_id is not None


def summary_left_read(*, conversation: str, window: int) -> tuple[str, list[Any]] | None:
    """``(sql, params)`` of the messages that left the window since the summary was written, as one JSON array (oldest
    first; ``null`` when the conversation's counts say no summary is due), for a statement over the conversation's
    row (``conversation``: its table, quoted): how the ticket's statement brings them along
    (:mod:`conversations.turn_store`). The same messages :func:`summary_left` reads on its own: the history's, since
    the session's last end, with ids between what the summary covers and the window's first (the ``window``-th
    newest), the newest :data:`SUMMARY_READ_MAX`. ``None`` where the database has no JSON aggregate of the kind."""
    if connection.vendor != "postgresql":
        return None
    # The platform's own constants, written into the statement: it is the ticket's, sent on every message, and each
    # parameter is encoded at every send where the statement itself is prepared once per connection.
    history = history_rows(conversation)
    newest = "ORDER BY created_at DESC, id DESC"
    sql = (
        f"CASE WHEN {conversation}.message_count - {conversation}.memory_summary_at_count >= {SUMMARY_EVERY:d} THEN"  # noqa: S608  # the model's names and the module's constants
        " (SELECT coalesce(json_agg(json_build_array(l.role, l.content, l.id) ORDER BY l.created_at, l.id), '[]'::json)"
        f" FROM (SELECT role, content, id, created_at {history} AND id > {conversation}.memory_summary_through"
        f" AND id < (SELECT id {history} {newest} OFFSET {window - 1:d} LIMIT 1)"
        f" {newest} LIMIT {SUMMARY_READ_MAX:d}) l) END"
    )
    return sql, []


def summary_left(
    *, conversation_pk: int, state: dict[str, Any], history: tuple[HistoryEntry, ...], brought: list[Any] | None
) -> tuple[HistoryEntry, ...] | None:
    """When the summary is due (:func:`summary_due`), the messages that left the window since it was written, oldest
    first: those the ticket's statement brought (:func:`summary_left_read`, decoded), else read here, in the
    database thread the turn's load runs in — no trip of its own; ``None`` when it is not due. ``state``: the
    conversation's columns as the turn read them (:data:`conversations.ordering.STATE_COLUMNS`)."""
    if not summary_due(
        message_count=state.get("message_count") or 0,
        at_count=state.get("memory_summary_at_count") or 0,
        window=settings.CONVERSATION_HISTORY_LIMIT,
        history=history,
    ):
        return None
    if brought is not None:
        return history_parse(brought)
    between = (state.get("memory_summary_through") or 0, history[0].message_id or 0)
    return conversation_history(
        conversation_pk, ended_at=state.get("ended_at"), limit=SUMMARY_READ_MAX, between=between
    )


def _first_sentence(text: str) -> str:
    """``text``'s first sentence, its whitespace runs one space, at most :data:`LINE_MAX_CHARS`: the text is cut at
    the first end of a sentence before its whitespace is read (a whitespace run is one space on either side of the
    cut), not the whole message normalised to keep its first sentence."""
    end = _SENTENCE_END.search(text)
    line = " ".join((text if end is None else text[: end.start()]).split())
    return line if len(line) <= LINE_MAX_CHARS else line[: LINE_MAX_CHARS - 1].rstrip() + "…"


def summary_extracted(summary: str, messages: tuple[HistoryEntry, ...]) -> str:
    """The offline summary: ``summary``'s lines, then one line per message — ``Customer: <first sentence>`` — the
    oldest lines dropped while the whole passes :data:`SUMMARY_MAX_CHARS`. Deterministic."""
    lines = [line for line in summary.splitlines() if line.strip()]
    lines += [f"{SPEAKERS.get(m.role, m.role)}: {_first_sentence(m.content)}" for m in messages if m.content.strip()]
    size = sum(len(line) + 1 for line in lines)
    first = 0
    while first < len(lines) and size > SUMMARY_MAX_CHARS:  # the oldest dropped, the rest summed once
        size -= len(lines[first]) + 1
        first += 1
    return "\n".join(lines[first:])


def _transcript(messages: tuple[HistoryEntry, ...]) -> str:
    return "\n".join(f"{SPEAKERS.get(m.role, m.role)}: {m.content}" for m in messages)


async def summary_rewritten(
    profile: Any, summary: str, messages: tuple[HistoryEntry, ...], *, extract: bool, summarise: bool = True
) -> SummaryRead:
    """The summary rewritten by ``profile``'s model (counted in the turn's usage as ``memory``), the offline one when
    the profile has no model; and with ``extract`` the lasting facts about the customer that ``messages`` tell: the
    model's, in the same reply (:func:`_read_reply`), offline the preferences the customer stated. A model's failure,
    or a reply that is JSON but no summary, raises (the caller keeps the summary it had). With ``summarise`` off
    (the profile keeps no summary) only the facts are read — the model asked for them alone, a reply of another shape
    giving none — and ``summary`` is given back as it was."""
    if not llm_configured(profile):
        facts = _preferences(messages) if extract else ()
        return SummaryRead(summary_extracted(summary, messages) if summarise else summary, facts)
    model = OpenAICompatibleModel(profile)
    asked = SUMMARY_PROMPT if not extract else SUMMARY_FACTS_PROMPT if summarise else FACTS_PROMPT
    prompt = asked.format(
        words=SUMMARY_MAX_CHARS // 8,
        summary=summary or "(none yet)",
        messages=_transcript(messages),
        facts=FACTS_PER_SUMMARY,
    )
    with tracing.llm_span(model.model_name, purpose="memory") as current:
        reply = await model.client().ainvoke([("human", prompt)])
        tracing.usage_record(current, reply)
    usage_record(KIND_MEMORY, model.model_name, reply)
    text = (reply.content if isinstance(reply.content, str) else str(reply.content)).strip()
    if not extract:
        return SummaryRead(text[:SUMMARY_MAX_CHARS])
    if not summarise:
        data = _json_read(text)
        read = _facts_listed(data) if isinstance(data, dict) else []
        return SummaryRead(summary, tuple((fact, _source(fact, messages)) for fact in read))
    written, read = _read_reply(text)
    return SummaryRead(written[:SUMMARY_MAX_CHARS], tuple((fact, _source(fact, messages)) for fact in read))


def _json_read(text: str) -> Any:
    """A reply asked for as JSON, decoded (a fenced block's too); ``None`` when it is no JSON."""
    fenced = _FENCED.fullmatch(text)
    try:
        return json.loads(fenced.group(1) if fenced else text)
    except ValueError:
        return None


def _read_reply(text: str) -> tuple[str, list[str]]:
    """The summary and the facts of a reply asked for as JSON: plain text is the summary and gives no fact; JSON
    without a summary raises; a fact that is no text is skipped."""
    data = _json_read(text)
    if data is None:
        return text, []
    if not isinstance(data, dict) or not isinstance(data.get("summary"), str) or not data["summary"].strip():
        raise ValueError("the model's reply holds no summary")
    return data["summary"].strip(), _facts_listed(data)


def _facts_listed(data: dict[str, Any]) -> list[str]:
    """The facts of a JSON reply: its ``facts`` list's texts, spaces closed up and cut at the bound."""
    listed = data.get("facts")
    if not isinstance(listed, list):
        return []
    facts = [" ".join(fact.split())[:FACT_MAX_CHARS] for fact in listed if isinstance(fact, str) and fact.strip()]
    return facts[:FACTS_PER_SUMMARY]


def _preferences(messages: tuple[HistoryEntry, ...]) -> tuple[tuple[str, int | None], ...]:
    found = ((preference_stated(m.content), m.message_id) for m in messages if m.role == "user")
    return tuple((fact, source) for fact, source in found if fact)[:FACTS_PER_SUMMARY]


def _source(fact: str, messages: tuple[HistoryEntry, ...]) -> int | None:
    """The customer's message ``fact`` shares most words with (the newest of equals); ``None`` when it shares none."""
    words = set(normalize(fact).split())
    best, shared = None, 0
    for message in messages:
        if message.role == "user":
            count = len(words & set(normalize(message.content).split()))
            if count and count >= shared:
                best, shared = message.message_id, count
    return best
