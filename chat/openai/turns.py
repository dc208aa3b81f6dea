"""What the OpenAI-compatible faces share about a turn: the conversation a request continues, the ids of its answer,
the routing details (headers and ``x_agent_routing``), and a streamed turn's events.

**Ids.** A turn is begun before it runs (its ticket taken, :func:`conversations.graph.turn_begin`), so its answer's
ids are known before the first byte of a stream: ``chatcmpl-<conversation>_<turn>`` for a chat completion,
``resp_<conversation>_<turn>`` for a response and ``msg_<conversation>_<turn>`` for its output message, where
``<conversation>`` is the conversation's number and ``<turn>`` the message's place in it (``metadata.turn``).
``POST /api/sessions/{key}/feedback`` takes any of them as ``message_id`` (:func:`turn_ref_read`), as the
``previous_response_id`` of a response and ``GET /v1/responses/{id}`` do.

**Headers.** Every answer carries ``X-Conversation-Key``, ``X-Agent-Route`` (the route the turn took: a specialist,
``supervisor``, …), ``X-Agent-Intent`` and, once the answer is stored, ``X-Message-Id`` (the stored message's
number, what the sessions API lists). A stream's response starts when the turn's route is decided, so its headers
carry the route and intent; its answer is stored after its last token, so the message id is in the last event
(``x_agent_routing.message_id``). Values are percent-encoded as in a URL path (the key's colons stay).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import deque
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote

from asgiref.sync import sync_to_async
from django.conf import settings

from agents.public import FINISH_LENGTH, FINISH_STOP, Generation, max_chars
from chat.openai.errors import ROUTE_HEADER, invalid
from common.infra import tracing
from conversations.public import (
    LIMIT_ANSWER,
    LIMIT_MAX_TOKENS,
    Turn,
    TurnInput,
    TurnResult,
    identifier_pseudonym,
    run_turn,
    stream_room,
    turn_abandon,
    turn_begin,
    turn_detach,
)

logger = logging.getLogger(__name__)

SESSION_HEADER = "X-Session-Id"
SESSION_MAX_CHARS = 200
HEADER_ROUTE = ROUTE_HEADER  # asked in a request (which graph), answered in a response (the route taken)
HEADER_INTENT = "X-Agent-Intent"
HEADER_CONVERSATION = "X-Conversation-Key"
HEADER_MESSAGE = "X-Message-Id"
ROUTING_HEADERS = (HEADER_CONVERSATION, HEADER_ROUTE, HEADER_INTENT, HEADER_MESSAGE)

COMPLETION_PREFIX = "chatcmpl-"
RESPONSE_PREFIX = "resp_"
OUTPUT_PREFIX = "msg_"
TURN_ID_PATTERN = r"^(chatcmpl-|resp_|msg_)[1-9][0-9]{0,18}_[1-9][0-9]{0,9}$"
MAX_PK = 2**63 - 1  # a database's largest id: a larger number names nothing
_TURN_ID = re.compile(r"(chatcmpl-|resp_|msg_)([1-9]\d{0,18})_([1-9]\d{0,9})\Z")


@dataclass(frozen=True)
class TurnRef:
    """A turn of a conversation: the conversation's number and the message's place in it (``metadata.turn``)."""

    conversation_pk: int
    turn: int

    def id(self, prefix: str) -> str:
        return f"{prefix}{self.conversation_pk}_{self.turn}"


def turn_ref(begun: Turn) -> TurnRef:
    return TurnRef(begun.store.conversation_pk, begun.store.ticket + 1)


def result_ref(result: TurnResult) -> TurnRef:
    """The ids of a stored turn's answer: its conversation and its place there (``metadata.turn``)."""
    return TurnRef(result.conversation_pk or 0, result.metadata["turn"])


def turn_ref_read(
    value: str, *, prefixes: tuple[str, ...] = (COMPLETION_PREFIX, RESPONSE_PREFIX, OUTPUT_PREFIX)
) -> TurnRef | None:
    """The turn an id of these faces names (one of ``prefixes``), ``None`` when it is no such id."""
    matched = _TURN_ID.match(value) if isinstance(value, str) else None
    if matched is None or matched.group(1) not in prefixes or int(matched.group(2)) > MAX_PK:
        return None
    return TurnRef(int(matched.group(2)), int(matched.group(3)))


# --- the conversation -----------------------------------------------------------------------------------------


def session_for(headers: Mapping[str, str], user: Any) -> tuple[str, str]:
    """``(session_id, user_id)``: the ``X-Session-Id`` header if sent, else the ``user`` field; ``""`` with neither (a
    new session, or the one a face finds otherwise: a response's ``previous_response_id``)."""
    if user is not None and not isinstance(user, str):
        raise invalid("user", "'user' must be a string.")
    user = (user or "").strip()
    header = (headers.get(SESSION_HEADER) or "").strip()
    session = header or user
    if len(session) > SESSION_MAX_CHARS:
        param = SESSION_HEADER if header else "user"
        raise invalid(param, f"The session identifier is longer than {SESSION_MAX_CHARS} characters.")
    if not header and user:
        # ``user`` names the conversation too: an e-mail or phone there becomes its keyed pseudonym in the key.
        session = identifier_pseudonym(user, key=settings.SECRET_KEY)
    return session, user[:SESSION_MAX_CHARS]


# --- running the turn ---------------------------------------------------------------------------------------


async def turn_started(data: TurnInput) -> Turn:
    """``data``'s turn begun (:func:`conversations.graph.turn_begin`: its ticket taken, so its ids are known), for
    :func:`conversations.graph.run_turn`. A request cancelled meanwhile hands the ticket on once it is taken."""
    start = asyncio.ensure_future(sync_to_async(turn_begin)(data))
    try:
        return await asyncio.shield(start)
    except asyncio.CancelledError:
        start.add_done_callback(_begun_abandon)
        raise


async def turn_answered(data: TurnInput) -> TurnResult:
    """``data``'s turn run to its stored answer (its ids: :func:`result_ref`)."""
    return await run_turn(data, begun=await turn_started(data))


def _begun_abandon(task: asyncio.Future[Turn]) -> None:
    if not task.cancelled() and task.exception() is None:
        turn_abandon(task.result())


class TurnEvents:
    """A turn run for a stream: its ``route``, ``token`` and ``discard`` events as they happen, then its result.

    :meth:`start` begins the turn, detaches it (a client that goes away never stops it: it finishes and persists)
    and waits for its route, so that the response's headers can say it; with ``until_end`` (a request of Django's
    WSGI handler, which reads a whole stream before sending it, in a loop of its own) it waits for the end.
    """

    def __init__(self, data: TurnInput) -> None:
        self.queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()
        self.data = replace(data, emit=self._emit)
        self.pending: deque[tuple[str, dict[str, Any]]] = deque()
        self.route: dict[str, Any] = {}
        self.result: TurnResult | None = None
        self.done = False

    async def _emit(self, event: str, payload: dict[str, Any]) -> None:
        if event in ("route", "token", "discard"):
            self.queue.put_nowait((event, payload))

    async def start(self, *, until_end: bool = False) -> TurnRef:
        begun = await turn_started(self.data)
        turn_detach(self._run(begun), context=tracing.detached_context())
        while (item := await self.queue.get()) is not None:
            self.pending.append(item)
            if item[0] == "route":
                self.route = item[1]
                if not until_end:
                    return turn_ref(begun)
        self.done = True
        return turn_ref(begun)

    async def _run(self, begun: Turn) -> None:
        try:
            self.result = await run_turn(self.data, begun=begun)
        except Exception:
            logger.exception("Streaming OpenAI-compatible turn failed")
        finally:
            self.queue.put_nowait(None)

    async def events(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """The events not yet read, as they come; :attr:`result` is the turn's when they end (``None``: it
        failed)."""
        while self.pending:
            yield self.pending.popleft()
        if self.done:
            return
        while (item := await self.queue.get()) is not None:
            yield item
        self.done = True


class StreamedText:
    """The text a stream has sent, within ``max_tokens`` (the same cut the stored answer gets,
    :func:`agents.generation.text_within`) and the answer's limit (:func:`conversations.answer_limit.stream_room`:
    in all, since a client of these faces cannot drop what an agent streamed before a ``discard``)."""

    def __init__(self, generation: Generation | None) -> None:
        self.limit = stream_room(settings.ANSWER_MAX_CHARS)
        if generation and generation.max_tokens:
            self.limit = min(self.limit, max_chars(generation.max_tokens))
        self.parts: list[str] = []
        self.length = 0

    def add(self, text: str) -> str:
        """``text`` as far as it may be sent (``""`` past the limit)."""
        text = text[: max(self.limit - self.length, 0)]
        if text:
            self.parts.append(text)
            self.length += len(text)
        return text

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def rest(self, answer: str) -> str | None:
        """What of ``answer`` is still to send when it continues what was sent; ``None`` when the turn changed the
        text after it was sent (the stream cannot take it back)."""
        sent = self.text
        return answer[len(sent) :] if answer.startswith(sent) else None


# --- what the answer says of the turn ----------------------------------------------------------------------------


def finish_reason(metadata: Mapping[str, Any]) -> str:
    """``"length"`` when the answer was cut (the client's max_tokens, or the platform's ANSWER_MAX_CHARS), else
    ``"stop"``."""
    cut = any(hit.get("limit") in (LIMIT_MAX_TOKENS, LIMIT_ANSWER) for hit in metadata.get("limits") or [])
    return FINISH_LENGTH if cut else FINISH_STOP


def usage_of(result: TurnResult) -> dict[str, int]:
    """The turn's tokens as its models reported them, every model call added up (``metadata.usage``)."""
    usage = result.metadata.get("usage") or {}
    return {key: usage.get(key, 0) for key in ("prompt_tokens", "completion_tokens", "total_tokens")}


def routing_extension(result: TurnResult) -> dict[str, Any]:
    """The documented ``x_agent_routing`` field: who answered and how the turn was routed, the stored answer's
    ``message_id``, and the escalation when the conversation is with people (``metadata.escalation``, else
    ``None``)."""
    metadata = result.metadata
    decision = metadata.get("route_decision") or {}
    return {
        "agent": result.agent,
        "route": metadata.get("route", ""),
        "intent": metadata.get("intent", ""),
        "method": decision.get("method", ""),
        "mode": metadata.get("mode", ""),
        "cohort": metadata.get("cohort", ""),
        "flags": metadata.get("flags", {}),
        "conversation_key": result.conversation_key,
        "message_id": result.message_id,
        "handoffs": [
            {key: move.get(key) for key in ("from_agent", "to_agent", "kind", "status", "reason") if key in move}
            for move in metadata.get("handoffs") or []
        ],
        # The conversation is with people (docs/desk.md): queued with its place in line, or a person answers (the
        # answer is then empty: the person's reply is in GET /api/sessions/{conversation_key}/messages).
        "escalation": metadata.get("escalation"),
    }


def routing_headers(
    *, conversation_key: str, route: str | None = None, intent: str | None = None, message_id: int | None = None
) -> dict[str, str]:
    """The routing details as response headers (the module's docstring): the ones known."""
    values = {
        HEADER_CONVERSATION: conversation_key,
        HEADER_ROUTE: route,
        HEADER_INTENT: intent,
        HEADER_MESSAGE: str(message_id) if message_id is not None else None,
    }
    return {name: quote(value, safe=":@-._~") for name, value in values.items() if value is not None}


def result_headers(result: TurnResult) -> dict[str, str]:
    return routing_headers(
        conversation_key=result.conversation_key,
        route=str(result.metadata.get("route", "")),
        intent=str(result.metadata.get("intent", "")),
        message_id=result.message_id,
    )


def stream_headers(events: TurnEvents) -> dict[str, str]:
    """A stream's headers: the route decided, the message id when the turn already ended (Django's WSGI handler)."""
    if events.result is not None:
        return result_headers(events.result)
    return routing_headers(
        conversation_key=events.data.conversation_key,
        route=str(events.route.get("route", "")) if events.route else None,
        intent=str(events.route.get("intent", "")) if events.route else None,
    )
