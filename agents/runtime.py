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
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from agents.llm import ERROR_ANSWER, provider_for
from agents.mcp import STATUS_OK, Endpoint, ToolResult, arguments_from_context, tool_call
from routing.snapshot import ProfileSpec, ServerSpec, SpecialistSpec, ToolSpec

logger = logging.getLogger(__name__)

STATUS_NOT_OFFERED = "not_offered"

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
    intent_description: str = ""
    history: tuple[tuple[str, str], ...] = ()
    context: dict[str, Any] = field(default_factory=dict)
    model_context: dict[str, Any] = field(default_factory=dict)
    tools: tuple[ToolSpec, ...] = ()
    servers: dict[str, ServerSpec] = field(default_factory=dict)
    unmask: Callable[[Any], Any] = _identity
    mask: Callable[[Any], Any] = _identity


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
    """The winning intent's tools ∩ the specialist's allowed tools ∩ enabled tools, in the intent's order."""
    return tuple(
        all_tools[name]
        for name in intent_tools
        if name in specialist.allowed_tools and name in all_tools and all_tools[name].enabled
    )


def _tool_definition(tool: ToolSpec) -> dict[str, Any]:
    parameters = tool.args_schema or {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": parameters},
    }


def _system_prompt(request: SpecialistRequest) -> str:
    parts = [request.profile.policy, request.specialist.prompt or f"You are {request.specialist.display_name}."]
    if request.tools and request.model_context:
        parts.append(f"{CONTEXT_NOTE}\n{json.dumps(request.model_context, ensure_ascii=False, sort_keys=True)}")
    return "\n\n".join(part for part in parts if part)


def _text(message: AIMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in message.content)


async def _run_tool(request: SpecialistRequest, offered: dict[str, ToolSpec], call: dict[str, Any]) -> ToolResult:
    name = call.get("name", "")
    spec = offered.get(name)
    if spec is None:
        return ToolResult(name, "", request.mask(call.get("args") or {}), STATUS_NOT_OFFERED, 0.0, None, "not offered")
    server = request.servers.get(spec.server)
    arguments = arguments_from_context(spec.args_schema, request.context, request.unmask(call.get("args") or {}))
    if server is None or not server.enabled:
        return ToolResult(name, spec.server, arguments, "unavailable", 0.0, None, "server disabled")
    return await tool_call(
        endpoint=Endpoint(server.name, server.endpoint, server.timeout),
        tool=name,
        arguments=arguments,
        schema=spec.args_schema,
    )


def _tool_message(call: dict[str, Any], result: ToolResult, mask: Callable[[Any], Any]) -> ToolMessage:
    if result.status == STATUS_OK:
        content = json.dumps(mask(result.result), ensure_ascii=False, default=str)
        return ToolMessage(content=content, tool_call_id=call.get("id") or result.tool, name=result.tool)
    content = json.dumps({"error": f"{result.status}: {mask(result.error)}"}, ensure_ascii=False)
    return ToolMessage(content=content, tool_call_id=call.get("id") or result.tool, name=result.tool, status="error")


async def specialist_run(request: SpecialistRequest) -> SpecialistOutcome:
    """Answer one turn as ``request.specialist``; bounded by its step limit, never raises."""
    started = time.perf_counter()
    started_at = time.time()
    provider = provider_for(request.profile)
    topic = (request.intent_description or "").strip().rstrip(".")
    model = provider.chat_model(
        context=request.model_context, display_name=request.specialist.display_name, topic=topic
    )
    offered = {tool.name: tool for tool in request.tools}
    definitions = [_tool_definition(tool) for tool in request.tools]
    runnable = model.bind_tools(definitions) if definitions else model

    messages: list[BaseMessage] = [SystemMessage(_system_prompt(request))]
    for role, content in request.history:
        messages.append(HumanMessage(content) if role == "user" else AIMessage(content))
    messages.append(HumanMessage(request.text))

    outcome = SpecialistOutcome(answer="", llm=provider.name, model=provider.model_name, started_at=started_at)
    try:
        for _ in range(request.specialist.step_limit):
            outcome.steps += 1
            reply = await runnable.ainvoke(messages)
            messages.append(reply)
            if not reply.tool_calls:
                outcome.answer = _text(reply)
                break
            results = await asyncio.gather(*(_run_tool(request, offered, call) for call in reply.tool_calls))
            for call, result in zip(reply.tool_calls, results, strict=True):
                outcome.tool_results.append(result)
                messages.append(_tool_message(call, result, request.mask))
        else:
            outcome.stopped = "step_limit"
            messages.append(SystemMessage(STEP_LIMIT_NOTE))
            final = model.bind_tools(definitions, tool_choice="none") if definitions else model
            outcome.steps += 1
            outcome.answer = _text(await final.ainvoke(messages))
    except Exception as exc:  # noqa: BLE001 — the user gets a graceful answer, the error is recorded
        logger.warning("Specialist %s failed: %s", request.specialist.name, exc)
        outcome.answer = ERROR_ANSWER
        outcome.error = f"{type(exc).__name__}: {exc}"
    outcome.latency_ms = (time.perf_counter() - started) * 1000
    outcome.finished_at = time.time()
    return outcome
