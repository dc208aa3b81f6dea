"""A scripted OpenAI-compatible HTTP server for tests.

It speaks the Chat Completions wire format over real HTTP so that the code
under test goes through langchain-openai and the openai client unchanged.
Tests queue replies (text, tool calls, structured output, HTTP errors,
delays) and read back what the server received.

It also answers ``POST /v1/embeddings`` in the OpenAI shape (floats, or
base64 as the openai client asks by default) with :func:`embed_text`: a
deterministic hashed bag of words and character trigrams, so texts that share
words are close. Tests can make the next calls fail and read back every
embeddings request (:attr:`ScriptedLLMServer.embedding_requests`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import struct
import threading
import time
import unicodedata
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.served import serve_in_thread

EMBEDDING_DIMENSIONS = 256
WORD_WEIGHT, TRIGRAM_WEIGHT = 1.0, 0.5
_WORD = re.compile(r"\w+")


def _bucket(feature: str, dimensions: int) -> int:
    # hashlib, not hash(): the same text must give the same vector in every process
    return int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big") % dimensions


def embed_text(text: str, dimensions: int = EMBEDDING_DIMENSIONS) -> list[float]:
    """The scripted embedding of ``text``: its words (lower case, accents dropped) and their character trigrams
    hashed into ``dimensions`` buckets, L2-normalised; all zeros for a text without a word."""
    plain = "".join(c for c in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(c))
    vector = [0.0] * dimensions
    for word in _WORD.findall(plain):
        vector[_bucket(f"w:{word}", dimensions)] += WORD_WEIGHT
        padded = f" {word} "
        for start in range(len(padded) - 2):
            vector[_bucket(f"c:{padded[start : start + 3]}", dimensions)] += TRIGRAM_WEIGHT
    norm = math.sqrt(sum(value * value for value in vector))
    return [value / norm for value in vector] if norm else vector


def _embedding_inputs(value: Any) -> list[str | list[int]]:
    """The API's ``input``: a string, a list of strings, one token array, or a list of token arrays."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(item, int) for item in value):
        return [value]
    if isinstance(value, list) and all(isinstance(item, str | list) for item in value):
        return list(value)
    raise ValueError("input must be a string, an array of strings or an array of token arrays")


@dataclass
class EmbeddingsRequest:
    """What one ``/v1/embeddings`` call carried."""

    inputs: list[str | list[int]]  # token arrays as sent (the scripted vectors hash their numbers as words)
    model: str
    authorization: str  # the Authorization header ("Bearer <key>")
    body: dict[str, Any]


@dataclass
class Reply:
    content: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    delay: float = 0.0
    chunks: list[str] | None = None  # how the text is split when the client asks for a stream (else one piece)
    usage: tuple[int, int] | None = None  # (prompt_tokens, completion_tokens) reported; None: words counted
    finish_reason: str | None = None  # reported; None: "tool_calls" for tool calls, else "stop"


def reply_usage(body: dict[str, Any], reply: Reply) -> dict[str, int]:
    """The ``usage`` a reply reports: its own, else the words of the request's messages (prompt) and of the reply's
    text and tool calls (completion)."""
    if reply.usage is None:
        prompt = sum(len(_WORD.findall(str(message.get("content") or ""))) for message in body.get("messages", []))
        written = [reply.content or "", *(call["name"] + call["arguments"] for call in reply.tool_calls)]
        usage = (prompt, sum(len(_WORD.findall(text)) for text in written))
    else:
        usage = reply.usage
    return {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}


def tool_call_reply(
    name: str,
    arguments: dict[str, Any],
    *,
    delay: float = 0.0,
    content: str | None = None,
    usage: tuple[int, int] | None = None,
) -> Reply:
    """A reply that calls the tool ``name`` with ``arguments`` (structured output is such a call)."""
    call = {"id": f"call_{uuid.uuid4().hex[:12]}", "name": name, "arguments": json.dumps(arguments)}
    return Reply(content=content, tool_calls=[call], delay=delay, usage=usage)


class ScriptedLLMServer:
    """Queue :class:`Reply` objects; each chat completion request takes the next one.

    With the queue empty the server answers ``default`` (a plain text reply).
    """

    def __init__(self, default: str = "scripted answer", *, embedding_dimensions: int = EMBEDDING_DIMENSIONS) -> None:
        self.default = default
        self.embedding_dimensions = embedding_dimensions  # when a request names none
        self.replies: deque[Reply] = deque()
        # With the queue empty, a function of the request body may answer it (None: the default answers).
        self.responder: Callable[[dict[str, Any]], Reply | None] | None = None
        self.requests: list[dict[str, Any]] = []  # chat completion bodies
        self.authorizations: list[str] = []  # their Authorization headers ("Bearer <key>"), in the same order
        self.embedding_requests: list[EmbeddingsRequest] = []
        self.embedding_replies: deque[Reply] = deque()  # scripted failures or delays of the next embeddings calls
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> ScriptedLLMServer:
        serve_in_thread(self._server)
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- scripting ------------------------------------------------------------

    # ``usage=(prompt_tokens, completion_tokens)``: what the reply reports (else words are counted, reply_usage).

    def reply(
        self,
        content: str,
        *,
        delay: float = 0.0,
        usage: tuple[int, int] | None = None,
        finish_reason: str | None = None,
    ) -> None:
        self.replies.append(Reply(content=content, delay=delay, usage=usage, finish_reason=finish_reason))

    def reply_tool_call(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        delay: float = 0.0,
        content: str | None = None,
        usage: tuple[int, int] | None = None,
    ) -> None:
        """A tool call; ``content`` is text the model writes alongside it (models do, though told not to)."""
        self.replies.append(tool_call_reply(name, arguments, delay=delay, content=content, usage=usage))

    def reply_streamed(self, chunks: list[str], *, usage: tuple[int, int] | None = None) -> None:
        """A text reply that a streaming client receives in exactly these pieces (a JSON client gets them joined);
        its usage comes in a last chunk when the client asks (``stream_options.include_usage``)."""
        self.replies.append(Reply(content="".join(chunks), chunks=list(chunks), usage=usage))

    def reply_error(self, status: int = 500, *, delay: float = 0.0) -> None:
        self.replies.append(Reply(status=status, delay=delay))

    def reply_slowly(self, content: str, delay: float) -> None:
        self.replies.append(Reply(content=content, delay=delay))

    def respond_with(self, responder: Callable[[dict[str, Any]], Reply | None] | None) -> None:
        """Answer each request the queue does not with ``responder(body)`` (a scripted model that reads the request,
        for benchmarks that send many); ``None`` from it, or no responder, answers ``default``."""
        self.responder = responder

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self.replies:
                return self.replies.popleft()
            responder = self.responder
        answered = responder(body) if responder is not None else None
        return answered if answered is not None else Reply(content=self.default)

    def embeddings_error(self, status: int = 500, *, times: int = 1, delay: float = 0.0) -> None:
        """The next ``times`` embeddings calls answer ``status`` (an OpenAI-shaped error body)."""
        self.embedding_replies.extend(Reply(status=status, delay=delay) for _ in range(times))

    def embeddings_slowly(self, delay: float) -> None:
        """The next embeddings call answers after ``delay`` seconds."""
        self.embedding_replies.append(Reply(delay=delay))

    @property
    def embedding_inputs(self) -> list[str | list[int]]:
        """Every text embedded so far, in the order received."""
        with self._lock:
            return [text for request in self.embedding_requests for text in request.inputs]

    def _next_embeddings(self) -> Reply:
        with self._lock:
            return self.embedding_replies.popleft() if self.embedding_replies else Reply()

    # -- HTTP -----------------------------------------------------------------

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format, *args):
                return

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test); nothing to answer

            def _stream(self, body: dict[str, Any], reply: Reply) -> None:
                """The reply as Server-Sent Events of ``chat.completion.chunk`` (sent at once, in order)."""
                base: dict[str, Any] = {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion.chunk"}
                base.update(created=int(time.time()), model=body.get("model", "scripted"))
                deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
                pieces = reply.chunks if reply.chunks is not None else [reply.content] if reply.content else []
                deltas += [{"content": piece} for piece in pieces]
                for index, call in enumerate(reply.tool_calls):
                    function = {"name": call["name"], "arguments": call["arguments"]}
                    deltas.append(
                        {"tool_calls": [{"index": index, "id": call["id"], "type": "function", "function": function}]}
                    )
                finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
                events = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
                events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
                if (body.get("stream_options") or {}).get("include_usage"):
                    events.append({**base, "choices": [], "usage": reply_usage(body, reply)})
                data = "".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n"
                payload = data.encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def _embeddings(self, body: dict[str, Any]) -> None:
                try:
                    inputs = _embedding_inputs(body.get("input"))
                except ValueError as error:
                    self._send(400, {"error": {"message": str(error), "type": "invalid_request_error"}})
                    return
                request = EmbeddingsRequest(
                    inputs=inputs,
                    model=str(body.get("model", "")),
                    authorization=self.headers.get("Authorization", ""),
                    body=body,
                )
                with server._lock:
                    server.embedding_requests.append(request)
                reply = server._next_embeddings()
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.status != 200:
                    self._send(reply.status, {"error": {"message": f"scripted {reply.status}", "type": "server_error"}})
                    return
                dimensions = int(body.get("dimensions") or server.embedding_dimensions)
                data: list[dict[str, Any]] = []
                tokens = 0
                for index, item in enumerate(inputs):
                    text = item if isinstance(item, str) else " ".join(f"t{token}" for token in item)
                    tokens += len(_WORD.findall(text))
                    vector = embed_text(text, dimensions)
                    embedding: list[float] | str = vector
                    if body.get("encoding_format") == "base64":  # little-endian float32, as OpenAI sends it
                        embedding = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
                    data.append({"object": "embedding", "index": index, "embedding": embedding})
                self._send(
                    200,
                    {
                        "object": "list",
                        "data": data,
                        "model": request.model,
                        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                    },
                )

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/").endswith("/embeddings"):
                    self._embeddings(body)
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": "not found"}})
                    return
                with server._lock:
                    server.requests.append(body)
                    server.authorizations.append(self.headers.get("Authorization", ""))
                reply = server._next(body)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.status != 200:
                    self._send(reply.status, {"error": {"message": f"scripted {reply.status}", "type": "server_error"}})
                    return
                if body.get("stream"):
                    self._stream(body, reply)
                    return
                message: dict[str, Any] = {"role": "assistant", "content": reply.content}
                finish = reply.finish_reason or "stop"
                if reply.tool_calls:
                    finish = "tool_calls"
                    message["tool_calls"] = [
                        {
                            "id": c["id"],
                            "type": "function",
                            "function": {"name": c["name"], "arguments": c["arguments"]},
                        }
                        for c in reply.tool_calls
                    ]
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "scripted"),
                        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                        "usage": reply_usage(body, reply),
                    },
                )

        return Handler
