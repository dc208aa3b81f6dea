"""A conversation's running summary of the messages its specialists no longer read.

The specialists read the conversation's last ``CONVERSATION_HISTORY_LIMIT`` messages (the window,
:mod:`conversations.history`). Once a conversation has more, the messages that left the window are folded into a
summary the specialists get before the recent ones. It is brought up to date incrementally and not on every message:
when :data:`SUMMARY_EVERY` messages have been stored since it was last written (:func:`summary_due`, a comparison of
two counts the turn read anyway), one read fetches the messages between what it covers and the window — at most
:data:`SUMMARY_READ_MAX` — and the summary is rewritten from the old one and those:

- by the profile's model where one is configured (:func:`summary_by_model`; its tokens are counted in the turn's
  usage as kind ``memory``);
- offline, by :func:`summary_extracted`: deterministic and extractive — one line per message, the speaker and the
  first sentence of what they wrote (at most :data:`LINE_MAX_CHARS`), appended to the old lines; the oldest lines go
  when the whole passes :data:`SUMMARY_MAX_CHARS`.

So the summary lags the window by fewer than :data:`SUMMARY_EVERY` messages, and a conversation of n messages pays for
about n / :data:`SUMMARY_EVERY` summaries, each over a bounded text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.db import connection

from agents.llm import OpenAICompatibleModel, llm_configured
from agents.usage import KIND_MEMORY, usage_record
from common.infra import tracing
from conversations.history import HISTORY_ROLES, HistoryEntry
from conversations.models import Message

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
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


@dataclass(frozen=True)
class SummaryWritten:
    """A summary as the turn writes it to the conversation: its text, the last message it covers and the
    conversation's message count when it was written."""

    text: str
    through: int
    at_count: int


def summary_due(*, message_count: int, at_count: int, window: int, history: tuple[HistoryEntry, ...]) -> bool:
    """Whether the turn rewrites the summary: the window is full and :data:`SUMMARY_EVERY` messages were stored since
    the summary was last written. No query."""
    return len(history) >= window and message_count - at_count >= SUMMARY_EVERY and history[0].message_id is not None


def messages_left_window(
    *, conversation_pk: int, after: int, before: int, ended_at: Any = None
) -> tuple[HistoryEntry, ...]:
    """The conversation's history messages with ids between ``after`` and ``before`` (the window's first), since the
    session last ended: at most the newest :data:`SUMMARY_READ_MAX`, oldest first."""
    rows = Message.objects.filter(
        conversation_id=conversation_pk, role__in=HISTORY_ROLES, id__gt=after, id__lt=before
    ).order_by("-id")
    if ended_at is not None:
        rows = rows.filter(created_at__gt=ended_at)
    try:
        read = list(rows.values_list("role", "content", "id")[:SUMMARY_READ_MAX])
    finally:
        if not connection.in_atomic_block:
            connection.close()
    return tuple(HistoryEntry(role, content, pk) for role, content, pk in reversed(read))


def _first_sentence(text: str) -> str:
    line = " ".join(text.split())
    line = _SENTENCE_END.split(line, maxsplit=1)[0]
    return line if len(line) <= LINE_MAX_CHARS else line[: LINE_MAX_CHARS - 1].rstrip() + "…"


def summary_extracted(summary: str, messages: tuple[HistoryEntry, ...]) -> str:
    """The offline summary: ``summary``'s lines, then one line per message — ``Customer: <first sentence>`` — the
    oldest lines dropped while the whole passes :data:`SUMMARY_MAX_CHARS`. Deterministic."""
    lines = [line for line in summary.splitlines() if line.strip()]
    lines += [f"{SPEAKERS.get(m.role, m.role)}: {_first_sentence(m.content)}" for m in messages if m.content.strip()]
    while lines and sum(len(line) + 1 for line in lines) > SUMMARY_MAX_CHARS:
        lines.pop(0)
    return "\n".join(lines)


def _transcript(messages: tuple[HistoryEntry, ...]) -> str:
    return "\n".join(f"{SPEAKERS.get(m.role, m.role)}: {m.content}" for m in messages)


async def summary_by_model(profile: Any, summary: str, messages: tuple[HistoryEntry, ...]) -> str:
    """The summary rewritten by ``profile``'s model (counted in the turn's usage as ``memory``); the offline one when
    the profile has no model. A model's failure raises (the caller keeps the summary it had)."""
    if not llm_configured(profile):
        return summary_extracted(summary, messages)
    model = OpenAICompatibleModel(profile)
    prompt = SUMMARY_PROMPT.format(
        words=SUMMARY_MAX_CHARS // 8, summary=summary or "(none yet)", messages=_transcript(messages)
    )
    with tracing.llm_span(model.model_name, purpose="memory") as current:
        reply = await model.client().ainvoke([("human", prompt)])
        tracing.usage_record(current, reply)
    usage_record(KIND_MEMORY, model.model_name, reply)
    text = reply.content if isinstance(reply.content, str) else str(reply.content)
    return text.strip()[:SUMMARY_MAX_CHARS]
