"""The A2A face: every agent profile is an Agent2Agent (A2A) agent, served with the protocol's official SDK.

* ``GET /a2a/<agent_id>/.well-known/agent-card.json`` — the profile's agent card (:func:`profile_card`): its name
  and description, one skill per specialist and remote backend (tagged with the intents that reach it), streaming,
  and the security scheme every call needs: ``Authorization: Bearer <the tenant's API key>``. The card is public,
  as the protocol means cards to be found; it holds no secret and nothing of a tenant.
* ``POST /a2a/<agent_id>/`` — JSON-RPC 2.0, read and answered by the SDK's dispatcher and request handler: the
  protocol's methods (``SendMessage``, ``SendStreamingMessage`` as Server-Sent Events, ``GetTask``, ``ListTasks``,
  ``CancelTask``, ``SubscribeToTask``) and their 0.3 names (``message/send``, ``message/stream``, ``tasks/get``,
  ``tasks/cancel``, ``tasks/resubscribe``). Errors are the protocol's JSON-RPC errors.

The SDK's routes are a Starlette application, mounted beside Django (``platform/asgi.py``) behind the same request
gate: a body is refused by its size, and by a missing or wrong key, before it is read. Here every call is then
admitted as every face admits a request (:class:`KeyRequired`): the key's tenant, the key's request rate, the
profile. A message goes through the front door (:mod:`chat.intake`, in :class:`IntakeContextBuilder`, before any
task exists): what it must be, the key's message rate, the end user's rate, the profile's size limit and the
``multi_agent`` rollout flag's route, each refusal a JSON-RPC error naming the field (``InvalidParamsError`` with
``data.fields``) or an HTTP 429 with ``Retry-After``.

How the protocol's words map onto the platform's:

* ``contextId`` is the conversation's session id: the conversation is ``<tenant>:<agent_id>:<contextId>``. A
  context another tenant uses is another conversation; nothing is shared.
* A task is one turn (:class:`TurnExecutor`): its history is the user's message and the answer, its artifact
  ``answer`` the answer's text (streamed token by token over ``message/stream``), its status message's
  ``metadata`` who answered and how (agent, route, intent, method, cohort, conversation key, message id). Tasks
  are kept in the database (:class:`TaskRows`, ``conversations.A2ATask``), so ``tasks/get`` answers from any
  process, for the tenant and the profile that made them only.
* A conversation that went to a person (``metadata.escalation`` on the other faces) ends its task in
  ``input-required``: the platform waits for the caller's next message, which the person's side receives; the
  status message says so and carries ``metadata.escalation``. The person's replies are in
  ``GET /api/sessions/{conversation_key}/messages``.
* ``tasks/cancel`` of a running task marks it canceled at once; the turn itself finishes and is stored, as a turn
  whose client went away is on every face.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Mapping, MutableMapping
from dataclasses import replace
from typing import Any

from a2a.helpers import get_message_text, new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext, SimpleRequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.jsonrpc_models import JSONParseError
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict, build_error_response
from a2a.server.routes import DefaultServerCallContextBuilder
from a2a.server.tasks import TaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    ContentTypeNotSupportedError,
    HTTPAuthSecurityScheme,
    InvalidParamsError,
    ListTasksRequest,
    ListTasksResponse,
    Role,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
    Task,
    TaskState,
)
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0, TransportProtocol
from a2a.utils.errors import A2AError
from channels.db import database_sync_to_async
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from google.protobuf.json_format import MessageToDict, ParseDict
from rest_framework.exceptions import Throttled, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from chat.a2a_rpc import Dispatcher
from chat.intake import (
    MessageIn,
    TextTooLong,
    UnknownProfile,
    gateway_hops,
    identifier_stored,
    message_read,
    turn_input_build,
)
from chat.intake import (
    Route as TurnRoute,
)
from common.cursors import BIGINT_MAX, cursor_whole
from common.errors import (
    ERROR_INVALID_KEY,
    ERROR_NOT_AUTHENTICATED,
    ERROR_PATH_NOT_FOUND,
    ERROR_UNKNOWN_AGENT,
    error_body,
    error_fields,
)
from common.infra import tracing
from common.infra.metrics import http_request_observe
from common.parsers import JsonTooDeep, json_depth_check
from conversations.models import A2ATask
from conversations.public import TurnInput, TurnResult, language_asked, redact, run_turn, turn_detach
from routing.public import ProfileSpec, snapshot_current
from tenants.public import (
    API_SCOPE,
    MESSAGES_SCOPE,
    ApiClient,
    api_client_authenticate,
    client_address,
    principal_ident,
    request_throttle,
)

logger = logging.getLogger(__name__)

PREFIX = "/a2a/"
RPC_PATH = "/a2a/{agent_id}/"
CARD_NAME = "agent-card.json"
CARD_PATH = "/a2a/{agent_id}/.well-known/" + CARD_NAME
CHANNEL = "a2a"
ANSWER_ARTIFACT = "answer"
SECURITY_SCHEME = "tenant_api_key"
SKILL_EXAMPLES = 3
TASKS_PAGE_SIZE = 50
TASKS_PAGE_MAX = 100
# A task waiting for its caller's input (a person has the conversation) keeps its place in memory this long; a
# later message naming it finds it in the database all the same.
INTERRUPTED_TASK_SECONDS = 300.0
STREAMING_METHODS = frozenset({"SendStreamingMessage", "message/stream"})

# What a call carries in the SDK's call context (``ServerCallContext.state``), set by this module.
CLIENT = "platform.client"
AGENT_ID = "platform.agent_id"
HOPS = "platform.hops"
ORIGIN = "platform.origin"  # the scheme://host the caller reached: the answer's links point there
TURN_INPUT = "platform.turn_input"
THROTTLED = "platform.throttled"  # the Retry-After of a message a rate refused, for the response's status line

ERROR_TEXT_ONLY = "Only text parts are read: send the message as one or more parts with 'text'."
ERROR_NO_TEXT = "The message has no text: send a part with a non-empty 'text'."
ERROR_METADATA_TYPE = "message.metadata.{name} must be {kind}."
ERROR_PAGE_TOKEN = "pageToken is not one this server gave."  # noqa: S105 — a message, not a secret
ERROR_NOT_UTF8 = "The body is not UTF-8 text."
ERROR_ROLE = "message.role must be user: the caller speaks for the customer."
ERROR_HOST = "The Host header names no host this server answers for."
PERSON_NOTICE = (
    "A person has this conversation now: send your next message in the same context; their replies are in "
    "GET /api/sessions/{conversation_key}/messages."
)

# The front door's field names (the gateway body's), as an A2A message names them.
_FIELDS = {
    "payload.text": "message.parts",
    "payload.session_id": "message.contextId",
    "payload.user_id": "message.metadata.user_id",
    "payload.context": "message.metadata.context",
    "payload.language": "message.metadata.language",
    "agent_id": "agent_id",
}
_AGENT_PATH = re.compile(r"/a2a/(?P<agent_id>[^/]+)/")
# What the task store masks in a part (a text part's text, a data part's value, a part's metadata), and what it keeps
# of a message's metadata as the conversation store keeps it (the status message's routing: the conversation's key).
_MASKED_IN_PARTS = frozenset({"text", "data", "metadata"})
_KEPT_IN_METADATA = frozenset({"conversation_key"})


# --- the card ----------------------------------------------------------------------------------------------


def profile_card(profile: ProfileSpec, url: str, language: str = "") -> AgentCard:
    """The agent card of ``profile`` served at ``url`` (its JSON-RPC address): one skill per specialist, named and
    described in ``language`` (each text's translation, else the profile's language's), tagged with the names of the
    intents that reach it and showing a few of their examples, and one per remote backend."""
    intents: dict[str, list[Any]] = {}
    for intent in profile.intents:
        intents.setdefault(intent.agent, []).append(intent)
    skills = []
    for name, specialist in sorted(profile.specialists.items()):
        reached = sorted(intents.get(name, []), key=lambda intent: (intent.priority, intent.name))
        examples = [example for intent in reached for example in intent.examples][:SKILL_EXAMPLES]
        display_name = profile.display_name_in(specialist, language) or name
        skills.append(
            AgentSkill(
                id=name,
                name=display_name,
                description=profile.description_in(specialist, language) or display_name,
                tags=[profile.domain or profile.agent_id, *(intent.name for intent in reached)],
                examples=examples,
            )
        )
    for name, backend in sorted(profile.backends.items()):
        skills.append(
            AgentSkill(
                id=name,
                name=backend.display_name,
                description=backend.description or backend.display_name,
                tags=["remote", *backend.keywords[:SKILL_EXAMPLES]],
                examples=list(backend.examples[:SKILL_EXAMPLES]),
            )
        )
    return AgentCard(
        name=profile.name_in(language) or profile.agent_id,
        description=profile.own_description_in(language) or profile.name_in(language) or profile.agent_id,
        version=str(profile.version or "draft"),
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding=TransportProtocol.JSONRPC, protocol_version=PROTOCOL_VERSION_1_0),
            # The same address speaks 0.3 too: listed, the card also carries 0.3's url, preferredTransport and
            # protocolVersion, which is how a 0.3 client finds the agent.
            AgentInterface(url=url, protocol_binding=TransportProtocol.JSONRPC, protocol_version=PROTOCOL_VERSION_0_3),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        security_schemes={
            SECURITY_SCHEME: SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="bearer",
                    bearer_format="API key",
                    description="The tenant's API key (manage.py create_api_key --tenant <slug>), as on every "
                    "route of the platform's API.",
                )
            )
        },
        security_requirements=[SecurityRequirement(schemes={SECURITY_SCHEME: StringList()})],
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=skills,
    )


# The request handler's own card: what it checks a call against (streaming), the same for every profile.
_HANDLER_CARD = AgentCard(
    name="platform",
    description="Every profile's A2A agent.",
    version="1",
    capabilities=AgentCapabilities(streaming=True, push_notifications=False),
    default_input_modes=["text/plain"],
    default_output_modes=["text/plain"],
    skills=[AgentSkill(id="turn", name="turn", description="A message through the profile's routing.", tags=["turn"])],
    supported_interfaces=[
        AgentInterface(url=PREFIX, protocol_binding=TransportProtocol.JSONRPC, protocol_version=PROTOCOL_VERSION_1_0)
    ],
)


def _origin(request: Request) -> str:
    """``scheme://host`` of the request as a client reached it: the host checked against ``ALLOWED_HOSTS`` (as
    Django checks it), the scheme the trusted proxy's header names (``SECURE_PROXY_SSL_HEADER``). Raises
    ``HTTPException`` (400) for a host this server does not answer for."""
    host = request.headers.get("host", "")
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    domain, _port = split_domain_port(host)
    if not domain or not validate_host(domain, allowed):
        raise HTTPException(400, ERROR_HOST)
    scheme = request.url.scheme
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        header, value = proxy
        if request.headers.get(header.removeprefix("HTTP_").replace("_", "-").lower()) == value:
            scheme = "https"
    return f"{scheme}://{host}"


async def card(request: Request) -> Response:
    """The profile's agent card (404 for an unknown or disabled profile)."""
    agent_id = request.path_params["agent_id"]
    profile = await database_sync_to_async(_profile)(agent_id)
    if profile is None:
        return _refusal(404, "not_found", ERROR_UNKNOWN_AGENT.format(agent_id=agent_id), "agent_id")
    url = f"{_origin(request)}{PREFIX}{agent_id}/"
    # The client's language (Accept-Language), else the profile's; a cache keeps one card per language asked.
    language = language_asked(request.headers.get("accept-language")) or profile.language
    headers = {"Cache-Control": "no-cache", "Content-Language": language, "Vary": "Accept-Language"}
    return JSONResponse(agent_card_to_dict(profile_card(profile, url, language)), headers=headers)


def _profile(agent_id: str) -> ProfileSpec | None:
    return snapshot_current().profiles.get(agent_id)


# --- who calls: the key, its rate, the profile -------------------------------------------------------------


def _refusal(
    status: int, code: str, message: str, field: str | None = None, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """The API's error shape (``common.errors``), naming ``field`` when one is at fault."""
    return JSONResponse(error_body(code, message, {field: [message]} if field else None), status, dict(headers or {}))


def _retry_after(exc: Throttled) -> str:
    return str(getattr(exc, "wait", None) or 1)  # DRF's stubs omit .wait (tenants/throttles.py sets it)


def _admission(scope: dict[str, Any], agent_id: str) -> tuple[ApiClient | None, JSONResponse | None]:
    """The key's client for a call to ``agent_id``, its request counted at the key's rate; or the refusal: 401 (no
    key, a wrong one), 429 (the key's rate, or an address locked out after wrong keys), 404 (no such profile).
    Runs in a thread: the key's lookup and the counters are I/O."""
    headers = {name: value for name, value in scope["headers"] if name in (b"authorization", b"x-forwarded-for")}
    authorization = headers.get(b"authorization", b"").decode("latin-1")
    scheme, _, raw = authorization.partition(" ")
    if not authorization:
        return None, _refusal(401, "not_authenticated", ERROR_NOT_AUTHENTICATED, headers={"WWW-Authenticate": "Bearer"})
    client_host = scope.get("client")
    forwarded = headers.get(b"x-forwarded-for")
    address = client_address(
        client_host[0] if client_host else None, forwarded.decode("latin-1") if forwarded else None
    )
    try:
        client = (
            api_client_authenticate(raw_key=raw.strip(), address=address)
            if scheme.lower() == "bearer" and raw.strip()
            else None
        )
        if client is None:
            refusal = _refusal(401, "authentication_failed", ERROR_INVALID_KEY, headers={"WWW-Authenticate": "Bearer"})
            return None, refusal
        request_throttle(scope=API_SCOPE, ident=principal_ident(client) or "", tenant_pk=client.tenant.pk)
    except Throttled as exc:
        return None, _refusal(429, "throttled", str(exc.detail), headers={"Retry-After": _retry_after(exc)})
    if _profile(agent_id) is None:
        return None, _refusal(404, "not_found", ERROR_UNKNOWN_AGENT.format(agent_id=agent_id), "agent_id")
    return client, None


class KeyRequired:
    """The JSON-RPC route needs a tenant's API key, at the key's request rate, for a profile that exists
    (:func:`_admission`); the card does not. Every request is an ``a2a.request`` span (a child of the caller's,
    when it sent a ``traceparent``), with the A2A SDK's spans and the turn under it, and is counted in the HTTP
    metrics under its route."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status: list[int] = []

        async def counted(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        match = _AGENT_PATH.fullmatch(scope["path"])
        agent_id = match["agent_id"] if match else None
        with tracing.span("a2a.request", agent_id=agent_id, method=scope["method"]) as current:
            try:
                with tracing.library_spans_nested():  # the A2A SDK's own spans under this one
                    await self._admitted(scope, receive, counted, match)
            finally:
                route = RPC_PATH if match is not None else CARD_PATH if scope["path"].endswith(CARD_NAME) else PREFIX
                code = status[0] if status else 499
                tracing.annotate(current, http_status=code)
                http_request_observe(route, scope["method"], code, time.perf_counter() - started)

    async def _admitted(self, scope: dict[str, Any], receive: Any, send: Any, match: re.Match[str] | None) -> None:
        if match is None or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        client, refusal = await database_sync_to_async(_admission)(scope, match["agent_id"])
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        body = await _body_read(receive)
        unparsed = _unparsable(body) if body is not None else None
        if unparsed is not None:
            await JSONResponse(build_error_response(None, JSONParseError(message=unparsed)))(scope, receive, send)
            return
        throttled: dict[str, str] = {}

        async def status_kept(message: MutableMapping[str, Any]) -> None:
            # A message a rate refused is answered by the SDK as a JSON-RPC error; its status line says 429.
            if message["type"] == "http.response.start" and throttled:
                headers = [*message.get("headers", []), (b"retry-after", throttled["retry_after"].encode())]
                message = {**message, "status": 429, "headers": headers}
            await send(message)

        await self.app({**scope, CLIENT: client, THROTTLED: throttled}, _replayed(body, receive), status_kept)


async def _body_read(receive: Any) -> bytes | None:
    """The request's whole body (the request gate bounds its size), or ``None`` when the client left first."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replayed(body: bytes | None, receive: Any) -> Any:
    """A ``receive`` that gives the body read once, then what the client sends next (its disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}] if body is not None else []

    async def replay() -> dict[str, Any]:
        return pending.pop() if pending else await receive()

    return replay


def _unparsable(body: bytes) -> str | None:
    """Why the body is no JSON the SDK may decode, which would fail inside it as an internal error (``-32603``,
    Python's message): text that is not UTF-8, or JSON nested deeper than the API takes
    (:func:`common.parsers.json_depth_check`). Other malformed JSON is the SDK's own parse error."""
    try:
        json_depth_check(body.decode("utf-8"))
    except UnicodeDecodeError:
        return ERROR_NOT_UTF8
    except JsonTooDeep as exc:
        return str(exc.detail)
    return None


class CallContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's call context, with what this platform knows of the call: the key's client, the profile, how many
    deployments the message crossed (``X-Gateway-Hops``, loop safety across gateways) and the address the caller
    reached ("" for a host this server does not answer for: the answer's links are then paths)."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[CLIENT] = request.scope[CLIENT]
        context.state[AGENT_ID] = request.path_params["agent_id"]
        context.state[HOPS] = gateway_hops(request.headers)
        try:
            context.state[ORIGIN] = _origin(request)
        except HTTPException:
            context.state[ORIGIN] = ""
        context.state[THROTTLED] = request.scope[THROTTLED]
        return context


# --- a message: the front door, then the turn ----------------------------------------------------------------


def _metadata_value(metadata: Mapping[str, Any], name: str, kind: type, label: str) -> Any:
    value = metadata.get(name)
    if value is not None and not isinstance(value, kind):
        message = ERROR_METADATA_TYPE.format(name=name, kind=label)
        raise InvalidParamsError(message, data={"fields": {f"message.metadata.{name}": [message]}})
    return value


def _message_in(params: SendMessageRequest, agent_id: str, context_id: str) -> MessageIn:
    """The A2A message as the front door reads a message (:func:`chat.intake.message_read`): its text parts, its
    context as the session, ``metadata.user_id`` and ``metadata.context`` if sent. Raises the protocol's errors,
    naming the field as an A2A message spells it."""
    message = params.message
    if message.role == Role.ROLE_AGENT:
        raise InvalidParamsError(ERROR_ROLE, data={"fields": {"message.role": [ERROR_ROLE]}})
    if any(not part.HasField("text") for part in message.parts):
        raise ContentTypeNotSupportedError(ERROR_TEXT_ONLY, data={"fields": {"message.parts": [ERROR_TEXT_ONLY]}})
    text = get_message_text(message)
    if not text.strip():
        raise InvalidParamsError(ERROR_NO_TEXT, data={"fields": {"message.parts": [ERROR_NO_TEXT]}})
    metadata = MessageToDict(message.metadata) if message.HasField("metadata") else {}
    user_id = _metadata_value(metadata, "user_id", str, "a string")
    context = _metadata_value(metadata, "context", dict, "an object")
    language = _metadata_value(metadata, "language", str, "a string")
    payload: dict[str, Any] = {"text": text, "session_id": context_id}
    if language is not None:
        payload["language"] = language
    if user_id is not None:
        payload["user_id"] = user_id
    if context is not None:
        payload["context"] = context
    try:
        read = message_read({"channel": CHANNEL, "agent_id": agent_id, "payload": payload})
    except ValidationError as exc:
        fields = {_FIELDS.get(name, name): errors for name, errors in error_fields(exc.detail).items()}
        first = next(iter(fields.values()))[0]
        raise InvalidParamsError(first, data={"fields": fields}) from None
    return read


class RateLimited(A2AError):
    """A message over the key's or the end user's rate: a JSON-RPC error answered with HTTP 429 and ``Retry-After``
    (:class:`KeyRequired` sets the status line)."""

    message = "Too many messages"


def _anonymous_bucket(profile: ProfileSpec | None, *, context_id: str, ident: str) -> str:
    """What the rollout flag places a message that names no user by, as the profile's ``a2a_anonymous_bucket``
    says: its context, its API key, one bucket for all, or nothing (the flag's ``no_stickiness_value``: the
    single-agent path). A message with ``metadata.user_id`` is placed by it whatever this says."""
    how = profile.a2a_anonymous_bucket if profile is not None else "none"
    if how == "context" and context_id:
        return f"a2a-context:{context_id}"
    if how == "api_key" and ident:
        return f"a2a-{ident}"
    return "a2a" if how == "fixed" else ""


def _turn_input(state: Mapping[str, Any], params: SendMessageRequest, context_id: str) -> TurnInput:
    """The turn of a message: the key's message rate, then the front door (the end user's rate, the profile's size
    limit, the rollout route). Raises the protocol's errors naming the field, or :class:`RateLimited`."""
    client: ApiClient = state[CLIENT]
    agent_id = state[AGENT_ID]
    message = _message_in(params, agent_id, context_id)
    ident = principal_ident(client) or ""
    try:
        request_throttle(scope=MESSAGES_SCOPE, ident=ident, tenant_pk=client.tenant.pk)
        bucket = _anonymous_bucket(_profile(agent_id), context_id=context_id, ident=ident)
        return turn_input_build(
            tenant=client.tenant,
            message=message,
            route=TurnRoute.ROLLOUT,
            hops=state[HOPS],
            bucket=bucket,
            origin=state[ORIGIN],
        )
    except Throttled as exc:
        state[THROTTLED]["retry_after"] = _retry_after(exc)
        raise RateLimited(str(exc.detail), data={"code": "throttled", "retry_after": int(_retry_after(exc))}) from None
    except (TextTooLong, UnknownProfile) as exc:
        fields = {_FIELDS.get(name, name): errors for name, errors in exc.fields.items()}
        raise InvalidParamsError(exc.message, data={"fields": fields}) from None


class IntakeContextBuilder(SimpleRequestContextBuilder):
    """A message is admitted here, before the SDK creates its task: a refused one leaves no task behind, and its
    error reaches the caller as the protocol's error (or an HTTP 429), not as a failed task."""

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        request_context = await super().build(
            context=context, params=params, task_id=task_id, context_id=context_id, task=task
        )
        if params is not None:
            turn_input = await database_sync_to_async(_turn_input)(
                context.state, params, request_context.context_id or ""
            )
            context.state[TURN_INPUT] = turn_input
        return request_context


def _routing(result: TurnResult) -> dict[str, Any]:
    """Who answered and how, as the status message's ``metadata`` carries it."""
    metadata = result.metadata
    decision = metadata.get("route_decision") or {}
    return {
        "agent": result.agent,
        "route": metadata.get("route", ""),
        "intent": metadata.get("intent", ""),
        "method": decision.get("method", ""),
        "cohort": metadata.get("cohort", ""),
        "conversation_key": result.conversation_key,
        "message_id": result.message_id,
        "escalation": metadata.get("escalation"),
    }


class _AnswerArtifact:
    """The ``answer`` artifact as the turn writes it: each token appended; a discard (the text was handed on or
    revised) makes the next token replace what was sent; at the end, what is missing is appended, or the answer the
    platform stored replaces the streamed text when it differs."""

    def __init__(self, updater: TaskUpdater) -> None:
        self.updater = updater
        self.sent: list[str] = []
        self.replace = True
        self.closed = False

    async def token(self, text: str) -> None:
        if self.closed:
            return
        await self.updater.add_artifact(
            [new_text_part(text)], artifact_id=ANSWER_ARTIFACT, name=ANSWER_ARTIFACT, append=not self.replace
        )
        if self.replace:
            self.sent.clear()
        self.sent.append(text)
        self.replace = False

    def discard(self) -> None:
        self.replace = True

    async def finish(self, answer: str) -> None:
        streamed = "".join(self.sent)
        if not self.replace and streamed and answer.startswith(streamed):
            rest, append = answer[len(streamed) :], True
        else:
            rest, append = answer, False
        if rest or append:
            parts = [new_text_part(rest)] if rest else []
            await self.updater.add_artifact(
                parts, artifact_id=ANSWER_ARTIFACT, name=ANSWER_ARTIFACT, append=append, last_chunk=True
            )
        self.closed = True


class TurnExecutor(AgentExecutor):
    """A task is a turn of the conversation its context names (module docstring)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        state = context.call_context.state
        turn_input: TurnInput = state[TURN_INPUT]
        task_id, context_id = context.task_id or "", context.context_id or ""
        updater = TaskUpdater(event_queue, task_id, context_id)
        if context.current_task is None and context.message is not None:
            await event_queue.enqueue_event(
                new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED, history=[context.message])
            )
        await updater.start_work()
        artifact = _AnswerArtifact(updater)
        streaming = state.get("method") in STREAMING_METHODS

        async def emit(event: str, data: dict[str, Any]) -> None:
            if event == "token" and data.get("text"):
                await artifact.token(data["text"])
            elif event == "discard":
                artifact.discard()

        # The turn runs to its end and is stored whatever happens to the task (a cancel, a caller gone).
        work = turn_detach(run_turn(replace(turn_input, emit=emit if streaming else None)))
        try:
            result = await asyncio.shield(work)
        except asyncio.CancelledError:
            artifact.closed = True
            raise
        if result.answer:
            await artifact.finish(result.answer)
        escalation = result.metadata.get("escalation")
        text = result.answer or PERSON_NOTICE.format(conversation_key=result.conversation_key)
        message = updater.new_agent_message([new_text_part(text)], metadata=_routing(result))
        if escalation:
            await updater.requires_input(message)
        else:
            await updater.complete(message)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


# --- the tasks, in the database ---------------------------------------------------------------------------------


def _owner(context: ServerCallContext) -> tuple[int, str]:
    client: ApiClient = context.state[CLIENT]
    return client.tenant.pk, context.state[AGENT_ID]


def _part_stored(part: dict[str, Any]) -> dict[str, Any]:
    return {name: redact(value) if name in _MASKED_IN_PARTS else value for name, value in part.items()}


def _metadata_stored(metadata: dict[str, Any]) -> dict[str, Any]:
    return {
        name: (
            identifier_stored(value)
            if name == "user_id" and isinstance(value, str)
            else value
            if name in _KEPT_IN_METADATA
            else redact(value)
        )
        for name, value in metadata.items()
    }


def _message_stored(message: dict[str, Any], *, keep_input: bool) -> dict[str, Any]:
    kept = keep_input and message.get("role") == Role.Name(Role.ROLE_USER)
    stored = {**message, "parts": [part if kept else _part_stored(part) for part in message.get("parts", [])]}
    if "metadata" in message:
        stored["metadata"] = _metadata_stored(message["metadata"])
    return stored


def task_stored(task: Task, *, keep_input: bool) -> dict[str, Any]:
    """The task as :class:`TaskRows` keeps it (the protocol's JSON), masked as the conversation store keeps a turn
    (docs/security.md, Personal data): every text and data part of its messages (history, status) and artifacts and
    every metadata value redacted (:func:`conversations.guardrails.redact`: ``[CPF]``, ``[CARD ••••1111]``,
    ``[EMAIL]``, secrets hidden) — the customer's own text kept as sent only where the profile's
    ``guardrails.store_original_input`` keeps it in the conversation — and ``metadata.user_id`` as its keyed pseudonym
    (:func:`chat.intake.identifier_stored`). Ids, the context and the conversation's key stay as the conversation
    store keeps them."""
    document = MessageToDict(task)
    status = document.get("status", {})
    if "message" in status:
        document["status"] = {**status, "message": _message_stored(status["message"], keep_input=keep_input)}
    if "history" in document:
        document["history"] = [_message_stored(entry, keep_input=keep_input) for entry in document["history"]]
    if "artifacts" in document:
        document["artifacts"] = [
            {
                **artifact,
                "parts": [_part_stored(part) for part in artifact.get("parts", [])],
                **({"metadata": redact(artifact["metadata"])} if "metadata" in artifact else {}),
            }
            for artifact in document["artifacts"]
        ]
    if "metadata" in document:
        document["metadata"] = redact(document["metadata"])
    return document


class TaskRows(TaskStore):
    """The SDK's task store over ``conversations.A2ATask``: each task kept as the protocol's JSON with personal data
    masked (:func:`task_stored`), found only by the tenant and the profile that made it."""

    async def save(self, task: Task, context: ServerCallContext) -> None:
        tenant_pk, agent_id = _owner(context)
        state = TaskState.Name(task.status.state)

        def write() -> None:
            profile = _profile(agent_id)
            keep_input = bool(profile is not None and profile.guardrails.get("store_original_input", False))
            document = task_stored(task, keep_input=keep_input)
            A2ATask.objects.update_or_create(
                task_id=task.id,
                tenant_id=tenant_pk,
                agent_id=agent_id,
                defaults={"context_id": task.context_id, "state": state, "document": document},
            )

        await database_sync_to_async(write)()

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        tenant_pk, agent_id = _owner(context)

        def read() -> dict[str, Any] | None:
            row = A2ATask.objects.filter(task_id=task_id, tenant_id=tenant_pk, agent_id=agent_id).first()
            return row.document if row is not None else None

        document = await database_sync_to_async(read)()
        return ParseDict(document, Task()) if document is not None else None

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        tenant_pk, agent_id = _owner(context)
        size = min(params.page_size or TASKS_PAGE_SIZE, TASKS_PAGE_MAX)
        try:
            # The token is the offset of the page: one a 64-bit offset (and the page after it) can hold.
            start = cursor_whole(params.page_token, highest=BIGINT_MAX - TASKS_PAGE_MAX) if params.page_token else 0
        except ValueError:
            raise InvalidParamsError(ERROR_PAGE_TOKEN, data={"fields": {"pageToken": [ERROR_PAGE_TOKEN]}}) from None

        def read() -> tuple[list[dict[str, Any]], int]:
            rows = A2ATask.objects.filter(tenant_id=tenant_pk, agent_id=agent_id)
            if params.context_id:
                rows = rows.filter(context_id=params.context_id)
            if params.status:
                rows = rows.filter(state=TaskState.Name(params.status))
            total = rows.count()
            page = rows.order_by("-updated_at", "-id").values_list("document", flat=True)[start : start + size]
            return list(page), total

        documents, total = await database_sync_to_async(read)()
        following = str(start + size) if start + size < total else ""
        return ListTasksResponse(
            tasks=[ParseDict(document, Task()) for document in documents],
            next_page_token=following,
            page_size=size,
            total_size=total,
        )

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        tenant_pk, agent_id = _owner(context)
        await database_sync_to_async(
            lambda: A2ATask.objects.filter(task_id=task_id, tenant_id=tenant_pk, agent_id=agent_id).delete()
        )()


# --- the application -----------------------------------------------------------------------------------------


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's HTTP errors (an unknown path, a method a route does not take, a throttled message) in the
    API's error shape."""
    assert isinstance(exc, HTTPException)
    codes = {404: "not_found", 405: "method_not_allowed", 429: "throttled", 400: "bad_request"}
    message = ERROR_PATH_NOT_FOUND if exc.status_code == 404 else str(exc.detail)
    return _refusal(exc.status_code, codes.get(exc.status_code, "error"), message, headers=exc.headers)


def a2a_application() -> Any:
    """The ASGI application of every ``/a2a/`` path (``platform/asgi.py`` mounts it)."""
    handler = DefaultRequestHandler(
        agent_executor=TurnExecutor(),
        task_store=TaskRows(),
        agent_card=_HANDLER_CARD,
        request_context_builder=IntakeContextBuilder(),
        interrupted_task_timeout=INTERRUPTED_TASK_SECONDS,
    )
    dispatcher = Dispatcher(handler, context_builder=CallContextBuilder(), enable_v0_3_compat=True)
    routes = [
        Route(CARD_PATH, card, methods=["GET"]),
        Route(RPC_PATH, dispatcher.handle_requests, methods=["POST"]),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
    return KeyRequired(app)
