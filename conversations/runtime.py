"""The specialist runtime: one bounded tool-calling loop for every model provider.

A specialist answers with its active prompt version plus the profile's policy,
the conversation's recent history and the tools it may use this turn — the
winning intent's tools ∩ the specialist's allowed tools ∩ enabled tools. The
loop asks the model, runs the tool calls it makes over MCP (concurrently
within one step), feeds the results back, and stops when the model answers
without tools or the specialist's step limit is reached (then the model is
asked once more, with tools switched off, to answer from what it has).

Personal data never reaches the model: the model sees the masked text and
context (placeholders such as ``[PHONE_1]``); the arguments it writes are
unmasked before the call and completed from the request context, and what is
recorded is masked again. Nothing here raises for a model or tool failure.

A specialist given the built-in ``remember`` tool (``Specialist.remember_tool``) is offered it beside its MCP tools;
its calls are answered here without I/O (:mod:`conversations.memory.tool`) and kept with the turn.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableBinding

from agents.public import (
    ANSWER_CHARS_ASKED,
    ERROR_ANSWER,
    REMEMBER_TOOL,
    SEARCH_KNOWLEDGE,
    SEARCH_KNOWLEDGE_DEFINITION,
    STATUS_OK,
    TOOL_DATA_NOTE,
    Endpoint,
    Generation,
    ModelProvider,
    ToolResult,
    arguments_from_context,
    declined_tool,
    provider_for,
    remember_definition,
    reply_tokens,
    tool_call,
    tool_data,
)
from common.events import Emit, emit_safely
from common.i18n import say
from common.infra import tracing
from common.text import phrase_found
from conversations.knowledge_turn import (
    KnowledgeTool,
    KnowledgeUse,
    asked_before,
    knowledge_prepared,
    knowledge_settle,
)
from conversations.memory.tool import facts_saved, remember_answer
from conversations.permissions import permission_question
from handoffs.public import REQUEST_HUMAN, UNTARGETED, ControlCall, ControlTool
from routing.public import (
    NO,
    CompiledRouter,
    ProfileSpec,
    ServerSpec,
    SpecialistSpec,
    ToolSpec,
    person_asked_in,
    small_talk_kind,
    small_talk_read,
)

logger = logging.getLogger(__name__)

STATUS_NOT_OFFERED = "not_offered"
STATUS_PERMISSION_REQUIRED = "permission_required"
PERMISSION_WAITING = "waiting for the user's agreement"  # the error of a tool call that waits for permission

STEP_LIMIT_NOTE = (
    "The step limit of this turn is reached: do not call tools again; answer the user now with what you have."
)
CONTEXT_NOTE = "Request context (values you may pass as tool arguments; placeholders stand for personal data):"


def _identity(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class SpecialistRequest:
    profile: ProfileSpec
    specialist: SpecialistSpec
    text: str
    intent: str = ""
    intent_description: str = ""  # the intent's subject line in ``language`` only ("" when it has none in it)
    # (role, content) or (role, content, stored message id): conversations.history.HistoryEntry, or a step's payload
    history: tuple[tuple[Any, ...], ...] = ()
    # What the specialist remembers beyond the history: the conversation's summary, the customer's facts
    # (conversations.memory), as system notes placed before the history.
    memory: tuple[str, ...] = ()
    context: dict[str, Any] = field(default_factory=dict)
    model_context: dict[str, Any] = field(default_factory=dict)
    tools: tuple[ToolSpec, ...] = ()
    servers: dict[str, ServerSpec] = field(default_factory=dict)
    unmask: Callable[[Any], Any] = _identity
    mask: Callable[[Any], Any] = _identity
    control: tuple[ControlTool, ...] = ()  # handoff / delegation tools offered in this run
    notes: tuple[str, ...] = ()  # system notes placed just before the user's message
    step_limit: int = 0  # steps left for this specialist in this turn; 0 → its own limit
    granted: frozenset[str] = frozenset()  # needs-permission tools the user agreed to
    emit: Emit | None = None  # streaming clients: tokens and tool calls as they happen (common.events)
    # The message is the yes or no to this specialist's own question (routing.replies): what follows the reply ("" when
    # it is all reply); None when the message is no such reply. See _moves_read_on.
    reply_rest: str | None = None
    generation: Generation | None = None  # how the client asked the answer written (agents.generation)
    language: str = ""  # the conversation's (conversations.language): the platform's own words are written in it
    # The conversation's tenant, and whether its profile holds knowledge (routing.snapshot): what retrieval reads.
    tenant_pk: int | None = None
    knowledge_held: bool = False
    # The conversation names its customer (a user id): what the remember tool needs to keep a fact.
    customer_identified: bool = False

    @property
    def steps_allowed(self) -> int:
        return self.step_limit or self.specialist.step_limit

    @property
    def remembers(self) -> bool:
        """Whether its model is offered the built-in remember tool (conversations.memory.tool)."""
        return self.specialist.remember_tool


@dataclass
class SpecialistOutcome:
    answer: str
    llm: str
    model: str
    latency_ms: float = 0.0
    steps: int = 0
    error: str | None = None
    stopped: str | None = None
    tool_results: list[ToolResult] = field(default_factory=list)
    started_at: float = 0.0  # wall-clock seconds (time.time()), comparable across processes
    finished_at: float = 0.0
    control: ControlCall | None = None  # the handoff / delegation call that ended the run
    refused: list[ControlCall] = field(default_factory=list)  # moves to agents this one may not reach
    permission_needed: ToolSpec | None = None  # a needs-permission tool the model called without a grant
    permission_args: dict[str, Any] = field(default_factory=dict)
    prompt_tokens: int = 0  # every model call of the run, as the model reported them (agents.usage)
    completion_tokens: int = 0
    finish_reason: str = ""  # why the model's last reply ended, as it reported ("length": cut by max_tokens)
    # The length the last reply's formatted answer would have had when the model cut its text to fit the answer's
    # limit, as the offline model reports it (agents.generation.ANSWER_CHARS_ASKED); 0: not cut.
    answer_chars_asked: int = 0
    knowledge: dict[str, Any] | None = None  # metadata.knowledge of this run (conversations.knowledge_turn)

    def counted(self, reply: AIMessage) -> AIMessage:
        prompt, completion = reply_tokens(reply)
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.finish_reason = str(reply.response_metadata.get("finish_reason") or "")
        self.answer_chars_asked = int(reply.response_metadata.get(ANSWER_CHARS_ASKED) or 0)
        return reply

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "llm": self.llm,
            "model": self.model,
            "latency_ms": round(self.latency_ms, 1),
            "steps": self.steps,
        }
        if self.error:
            info["error"] = self.error
        if self.stopped:
            info["stopped"] = self.stopped
        return info


def tools_for_turn(
    *, profile: ProfileSpec, specialist: SpecialistSpec, intent_tools: list[str], all_tools: dict[str, ToolSpec]
) -> tuple[ToolSpec, ...]:
    """The winning intent's tools ∩ the specialist's allowed tools ∩ enabled tools, in the intent's order; whether
    a tool is enabled and needs permission is what the profile's version says (:meth:`ProfileSpec.authorised`)."""
    named = (all_tools[name] for name in intent_tools if name in specialist.allowed_tools and name in all_tools)
    return tuple(tool for tool in map(profile.authorised, named) if tool.enabled)


def intent_named_tools(request: SpecialistRequest) -> tuple[str, ...]:
    """The offered tools the turn's winning intent lists itself; the rest came with another intent of the same turn
    (the flow's, beside a side question's; another request of the message for the same specialist). The offline
    model reads it (agents.llm)."""
    intent = request.profile.router.intents_by_name.get(request.intent)
    named = set(intent.mcp_tools) if intent is not None else set()
    return tuple(tool.name for tool in request.tools if tool.name in named)


# The model's objects of stored messages, by (id, role, content): a conversation's next turn in this process builds
# only the messages stored since its last (each turn built all of its history anew, twenty pydantic objects, about
# a twentieth of a turn's CPU). Never shared between conversations (the key is the stored row); the oldest go first.
HISTORY_MESSAGES_KEPT = 8192
_history_messages: dict[tuple[int, str, str], BaseMessage] = {}
_history_lock = threading.Lock()


def history_message(role: str, content: str, message_id: int | None = None) -> BaseMessage:
    if message_id is None:
        return HumanMessage(content) if role == "user" else AIMessage(content)
    key = (message_id, role, content)
    message = _history_messages.get(key)
    if message is None:
        message = HumanMessage(content) if role == "user" else AIMessage(content)
        with _history_lock:
            if len(_history_messages) >= HISTORY_MESSAGES_KEPT:
                over = len(_history_messages) - HISTORY_MESSAGES_KEPT + HISTORY_MESSAGES_KEPT // 4 + 1
                for oldest in list(itertools.islice(_history_messages, over)):
                    del _history_messages[oldest]
            _history_messages[key] = message
    return message


def _tool_definition(tool: ToolSpec) -> dict[str, Any]:
    parameters = tool.args_schema or {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": parameters},
    }


# A speaker's model with a run's tools bound, by (the model, the tools: the compiled profile's own objects, the
# control tools, knowledge's search, remember): a turn's specialist binds what its last turn bound, and building
# the definitions and the binding was about a twelfth of its call. An entry holds the objects its key names by id,
# so no other object takes their id while it lives; the turn's own options are handed to each call, never bound.
BOUND_KEPT = 1024
_bound_tools: dict[tuple[Any, ...], tuple[Any, tuple[ToolSpec, ...], tuple[Any, dict[str, Any]]]] = {}
_bound_lock = threading.Lock()


def _definitions(request: SpecialistRequest, searched: bool) -> list[dict[str, Any]]:
    """The run's tools as the model is given them: its MCP tools, its moves, knowledge's search, remember."""
    definitions = [_tool_definition(tool) for tool in request.tools] + [tool.definition() for tool in request.control]
    if searched:
        definitions.append(SEARCH_KNOWLEDGE_DEFINITION)
    if request.remembers:
        definitions.append(remember_definition())
    return definitions


def _tools_bound(model: Any, request: SpecialistRequest, searched: bool) -> tuple[Any, dict[str, Any]]:
    """What the run's model is called as (:data:`_bound_tools`): the runnable and the keyword arguments each call
    hands it. Where ``bind_tools`` gives langchain's ``RunnableBinding`` of the model with keyword arguments only (no
    config of its own), the model itself with those arguments: the binding's call merges two configs that are empty
    and hands the model the same arguments. The model itself and none when the run offers no tool."""
    key = (id(model), *map(id, request.tools), request.control, searched, request.remembers)
    kept = _bound_tools.get(key)
    if kept is not None:  # the entry holds the model and the tools: the same ids are the same objects
        return kept[2]
    definitions = _definitions(request, searched)
    bound = model.bind_tools(definitions) if definitions else model
    through = isinstance(bound, RunnableBinding) and bound.bound is model
    if through and not bound.config and not bound.config_factories:
        called: tuple[Any, dict[str, Any]] = (model, dict(bound.kwargs))
    else:
        called = (bound, {})
    with _bound_lock:
        if len(_bound_tools) >= BOUND_KEPT:
            _bound_tools.clear()
        _bound_tools[key] = (model, request.tools, called)
    return called


def _system_prompt(request: SpecialistRequest) -> str:
    name = request.profile.display_name_in(request.specialist, request.language)
    parts = [request.profile.policy, request.specialist.prompt or f"You are {name}."]
    if request.tools or request.remembers:
        parts.append(TOOL_DATA_NOTE)
    if request.tools and request.model_context:
        parts.append(f"{CONTEXT_NOTE}\n{json.dumps(request.model_context, ensure_ascii=False, sort_keys=True)}")
    return "\n\n".join(part for part in parts if part)


def _text(message: AIMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in message.content)


async def _run_tool(request: SpecialistRequest, offered: dict[str, ToolSpec], call: ToolCall) -> ToolResult:
    name = call.get("name", "")
    spec = offered.get(name)
    if spec is None:
        return ToolResult(name, "", request.mask(call.get("args") or {}), STATUS_NOT_OFFERED, 0.0, None, "not offered")
    server = request.servers.get(spec.server)
    arguments = arguments_from_context(spec.args_schema, request.context, request.unmask(call.get("args") or {}))
    if server is None or not server.enabled:
        return ToolResult(name, spec.server, arguments, "unavailable", 0.0, None, "server disabled")
    event = {"agent": request.specialist.name, "tool": name, "server": spec.server}
    await emit_safely(request.emit, "tool_call", {**event, "phase": "started"})

    async def progressed(progress: float, total: float | None, message: str) -> None:
        said = {"progress": progress, "total": total, "message": request.mask(message)}
        await emit_safely(request.emit, "tool_call", {**event, "phase": "progress", **said})

    result = await tool_call(
        endpoint=Endpoint(server.name, server.endpoint, server.timeout),
        tool=name,
        arguments=arguments,
        schema=spec.args_schema,
        called_as=spec.called_as,
        on_progress=progressed if request.emit is not None else None,
    )
    await emit_safely(
        request.emit,
        "tool_call",
        {**event, "phase": "finished", "status": result.status, "latency_ms": round(result.latency_ms, 1)},
    )
    return result


def _tool_message(call: ToolCall, result: ToolResult, mask: Callable[[Any], Any]) -> ToolMessage:
    """The tool's result as the model reads it: data between marks (:func:`agents.llm.tool_data`), which the system
    prompt says never to take as instructions; already cut to ``MCP_TOOL_OUTPUT_MAX_BYTES`` by the MCP client."""
    if result.status == STATUS_OK:
        content = tool_data(result.tool, mask(result.result))
        return ToolMessage(content=content, tool_call_id=call.get("id") or result.tool, name=result.tool)
    content = tool_data(result.tool, {"error": f"{result.status}: {mask(result.reason)}"})
    return ToolMessage(content=content, tool_call_id=call.get("id") or result.tool, name=result.tool, status="error")


def _hit_agents(router: CompiledRouter, text: str) -> tuple[str, ...]:
    """The specialists whose intents ``text`` hits, best first; with no keyword hit, the specialist of the intent the
    examples tier routes it to (its offline vectoriser: no endpoint call here), so a coordinator delegates
    paraphrases too. Small talk hits no one: it moves nothing."""
    if small_talk_read(text) is not None:
        return ()
    agents: list[str] = []
    for hit in router.checked_match(text):
        if hit.intent.agent not in agents:
            agents.append(hit.intent.agent)
    if not agents and text.strip():
        decided = router.examples_decide_here(text)
        if decided is not None:
            agents.append(decided.agent)
    return tuple(agents)


def _moves_read_on(request: SpecialistRequest, asked: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What the offline model decides its moves on: the specialists the message hits and the closing words it holds.

    On a reply to the specialist's own question (``request.reply_rest``) only what follows the reply counts: the
    reply's words answer the question and never hand the conversation on or end a sub-conversation ("sim, pode
    diagnosticar" is not billing's payment request, "não, obrigado" is no goodbye), while "Não, na verdade meu pedido
    atrasou" may still go to the orders specialist. The closing words passed are then those that follow the reply.
    ``asked`` is :func:`asked_text`: nothing when what follows the reply refuses too.
    """
    profile, rest = request.profile, request.reply_rest
    if rest is None:
        return _hit_agents(profile.router, request.text), profile.closing_words
    closing = tuple(word for word in profile.closing_words if phrase_found(rest, (word,)))
    return _hit_agents(profile.router, asked), closing


def asked_text(request: SpecialistRequest) -> str:
    """What the message asks of the specialist besides answering its question: the whole message; on a reply to its
    question, what follows the reply (``request.reply_rest``) — nothing when that refuses too ("não, não quero que
    mexa na minha linha", "no thanks, don't run anything on my line": the refusal said twice, which hands the
    conversation to no one and is searched for in no document)."""
    rest = request.reply_rest
    if rest is None:
        return request.text
    return "" if request.profile.reply_words.read(rest).reads_as == NO else rest


def declined_request(request: SpecialistRequest) -> str:
    """On the customer's refusal of the specialist's permission question, the request the question was asked for (their
    last message before it): what the specialist answers without the tool, and what is searched for in the help
    centre whatever follows the "no" ("não, deixa a linha como está" asks nothing new); ``""`` on any other message."""
    if declined_tool(request.notes) is None:
        return ""
    return next((entry[1] for entry in reversed(request.history) if entry[0] == "user"), "")


def _gated(request: SpecialistRequest, offered: dict[str, ToolSpec], call: ToolCall) -> bool:
    spec = offered.get(call.get("name", ""))
    return spec is not None and spec.needs_permission and spec.name not in request.granted


async def _tool_step(
    request: SpecialistRequest,
    outcome: SpecialistOutcome,
    offered: dict[str, ToolSpec],
    control: dict[str, ControlTool],
    reply: AIMessage,
    messages: list[BaseMessage],
    searches: KnowledgeTool | None = None,
) -> bool:
    """Run one reply's tool calls; ``True`` when the run ends here (a move, or a tool waiting for permission).

    MCP tools run concurrently. A needs-permission tool without a grant is not
    run: the run stops so the user can be asked. A control call to an agent this
    specialist may reach ends the run; one to any other agent is refused and
    the model is told whom it may reach. A call of ``search_knowledge``, where
    ``searches`` offers it, searches the profile's knowledge (its result is
    the passages, numbered).
    """
    searched = [call for call in reply.tool_calls if call.get("name") == SEARCH_KNOWLEDGE and searches is not None]
    calls = [call for call in reply.tool_calls if call.get("name") not in control and call not in searched]
    if request.remembers:  # answered here, kept with the turn
        for call in (call for call in calls if call.get("name") == REMEMBER_TOOL):
            saved = len(facts_saved(outcome.tool_results))
            result = remember_answer(
                call.get("args"), identified=request.customer_identified, mask=request.mask, saved_before=saved
            )
            outcome.tool_results.append(result)
            messages.append(_tool_message(call, result, request.mask))
        calls = [call for call in calls if call.get("name") != REMEMBER_TOOL]
    runnable = [call for call in calls if not _gated(request, offered, call)]
    results = await asyncio.gather(*(_run_tool(request, offered, call) for call in runnable))
    for call, result in zip(runnable, results, strict=True):
        outcome.tool_results.append(result)
        messages.append(_tool_message(call, result, request.mask))
    for call in searched:
        found = await searches.search(str((call.get("args") or {}).get("query") or "")) if searches else ""
        messages.append(ToolMessage(found, tool_call_id=call.get("id") or SEARCH_KNOWLEDGE, name=SEARCH_KNOWLEDGE))
    for call in calls:
        if _gated(request, offered, call) and outcome.permission_needed is None:
            spec = offered[call["name"]]
            outcome.permission_needed = spec
            outcome.permission_args = request.mask(call.get("args") or {})
            outcome.tool_results.append(
                ToolResult(
                    spec.name,
                    spec.server,
                    outcome.permission_args,
                    STATUS_PERMISSION_REQUIRED,
                    error=PERMISSION_WAITING,
                )
            )
    for call in reply.tool_calls:
        tool = control.get(call.get("name", ""))
        if tool is None:
            continue
        move = ControlCall(tool.name, dict(call.get("args") or {}))
        if outcome.control is None and (tool.name in UNTARGETED or move.target in tool.targets):
            outcome.control = move
            continue
        outcome.refused.append(move)
        allowed = ", ".join(tool.targets) or "none"
        messages.append(
            ToolMessage(
                content=json.dumps({"error": f"not allowed: {move.target or '(none)'}; you may reach: {allowed}"}),
                tool_call_id=call.get("id") or tool.name,
                name=tool.name,
                status="error",
            )
        )
    return outcome.control is not None or outcome.permission_needed is not None


async def _ask(
    runnable: Any, messages: list[BaseMessage], request: SpecialistRequest, model: str, turn: dict[str, Any]
) -> AIMessage:
    """One model step, traced as an ``llm.call`` span with the token usage the model reported; ``turn``: the
    call's options of the turn (:func:`_turn_options`)."""
    with tracing.llm_span(model, purpose="specialist", agent=request.specialist.name) as current:
        reply = await _reply(runnable, messages, request, turn)
        tracing.usage_record(current, reply)
    return reply


async def _reply(
    runnable: Any, messages: list[BaseMessage], request: SpecialistRequest, turn: dict[str, Any]
) -> AIMessage:
    """One model step (a chat model's reply, or the sum of its chunks); for a streaming client, the text goes
    out as the model writes it."""
    if request.emit is None:
        return await runnable.ainvoke(messages, **turn)
    reply = None
    async for chunk in runnable.astream(messages, **turn):
        reply = chunk if reply is None else reply + chunk
        text = chunk.content if isinstance(chunk.content, str) else ""
        if text:
            await emit_safely(request.emit, "token", {"agent": request.specialist.name, "text": text})
    return reply if reply is not None else AIMessage(content="")


async def specialist_run(request: SpecialistRequest) -> SpecialistOutcome:
    """Answer one turn as ``request.specialist``; bounded by its step limit, never raises. Traced as a
    ``specialist`` span (in a Celery worker too: :mod:`conversations.tasks` continues the request's trace)."""
    with tracing.span("specialist", agent=request.specialist.name, intent=request.intent or None) as current:
        outcome = await _specialist_run(request)
        tracing.annotate(current, steps=outcome.steps, stopped=outcome.stopped)
        tracing.failed(current, outcome.error)
    return outcome


def _turn_options(
    request: SpecialistRequest, provider: ModelProvider, asked: str, control: dict[str, ControlTool]
) -> dict[str, Any]:
    """What the model's calls are handed of the turn besides its messages (:meth:`ModelProvider.turn_options`): the
    offline model's rules read the specialists the message hits, its closing words, whether it asks for a person, the
    intent's tools and its small talk; a real model reads its prompt, and none of it is worked out for one."""
    if not provider.reads_turn:
        return {}
    hit_agents, closing_words = _moves_read_on(request, asked)
    return provider.turn_options(
        context=request.model_context,
        topic=(request.intent_description or "").strip().rstrip("."),
        hit_agents=hit_agents,
        closing_words=closing_words,
        person_asked=REQUEST_HUMAN in control and person_asked_in(request.text),
        language=request.language,
        intent_tools=intent_named_tools(request),
        small_talk=small_talk_kind(request.intent),
    )


async def _specialist_run(request: SpecialistRequest) -> SpecialistOutcome:
    started = time.perf_counter()
    started_at = time.time()
    provider = provider_for(request.profile)
    asked = asked_text(request)  # read once: the moves and the knowledge search both go on it
    control = {tool.name: tool for tool in request.control}
    model = provider.chat_model(
        agent=request.specialist.name,
        display_name=request.profile.display_name_in(request.specialist, request.language),
    )
    turn = _turn_options(request, provider, asked, control)
    offered = {tool.name: tool for tool in request.tools}
    knowledge, searches = await knowledge_prepared(
        profile=request.profile,
        specialist=request.specialist,
        held=request.knowledge_held,
        tenant_pk=request.tenant_pk,
        text=declined_request(request) or asked,
        language=request.language,
        tools_offered=bool(request.tools),
        earlier=asked_before(request.history),
    )
    runnable, tools = _tools_bound(model, request, searches is not None)
    options = provider.call_options(request.generation) if request.generation is not None else {}
    # What each call hands the model: the client's options (max_tokens, sampling, format) over the tools' arguments,
    # as a binding over the binding merged them, and the turn's.
    called = tools | options | turn

    messages: list[BaseMessage] = [SystemMessage(_system_prompt(request))]
    messages.extend(SystemMessage(note) for note in request.memory)
    messages.extend(history_message(*entry) for entry in request.history)
    messages.extend(SystemMessage(note) for note in request.notes)
    if knowledge is not None:
        messages.append(SystemMessage(knowledge.note()))
    messages.append(HumanMessage(request.text))
    # A run that will say it does not know writes nothing of its model's to the customer (conversations.knowledge_turn).
    speaking = replace(request, emit=None) if knowledge is not None and knowledge.unknown else request

    outcome = SpecialistOutcome(answer="", llm=provider.name, model=provider.model_name, started_at=started_at)
    try:
        for _ in range(request.steps_allowed):
            outcome.steps += 1
            reply = outcome.counted(await _ask(runnable, messages, speaking, provider.model_name, called))
            messages.append(reply)
            if not reply.tool_calls:
                outcome.answer = _text(reply)
                break
            if await _tool_step(request, outcome, offered, control, reply, messages, searches):
                outcome.answer = _text(reply)
                if outcome.permission_needed is not None:
                    outcome.answer = permission_question(request.profile, outcome.permission_needed, request.language)
                break
            if searches is not None and searches.found_nothing and not outcome.tool_results:
                speaking = replace(request, emit=None)  # it will say it does not know, unless a tool answers yet
        else:
            outcome.stopped = "step_limit"
            messages.append(SystemMessage(STEP_LIMIT_NOTE))
            definitions = _definitions(request, searches is not None)
            final, last = (runnable, called)
            if definitions:
                final, last = model.bind_tools(definitions, tool_choice="none"), options | turn
            outcome.steps += 1
            outcome.answer = _text(outcome.counted(await _ask(final, messages, speaking, provider.model_name, last)))
    except Exception as exc:  # noqa: BLE001 — the user gets a graceful answer, the error is recorded
        logger.warning("Specialist %s failed: %s", request.specialist.name, exc)
        outcome.answer = say(request.language, ERROR_ANSWER)
        outcome.error = f"{type(exc).__name__}: {exc}"
    if searches is not None:  # what was retrieved before the model, and what it searched itself
        knowledge = searches.use(tools_ran=bool(outcome.tool_results))
    if knowledge is not None:
        await _knowledge_settled(request, outcome, knowledge)
    outcome.latency_ms = (time.perf_counter() - started) * 1000
    outcome.finished_at = time.time()
    return outcome


async def _knowledge_settled(request: SpecialistRequest, outcome: SpecialistOutcome, knowledge: KnowledgeUse) -> None:
    """The answer with its sources, or "I don't know" (:func:`conversations.knowledge_turn.knowledge_settle`); what it
    adds to the text goes to a streaming client as one more token."""
    answered = outcome.control is None and outcome.permission_needed is None and outcome.error is None
    settled = knowledge_settle(knowledge, outcome.answer, answered=answered, language=request.language)
    outcome.answer, outcome.knowledge = settled.answer, settled.metadata
    if settled.streamed_tail:
        await emit_safely(request.emit, "token", {"agent": request.specialist.name, "text": settled.streamed_tail})
