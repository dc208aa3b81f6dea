"""Goal plans run (seed 002's execution engine): a plan's steps as a DAG over real MCP calls, then one answer.

* :func:`plan_execute` — checks the plan (a :class:`~routing.goals.PlanError` is a failure before any call), then
  starts each step as soon as the steps it depends on are done, at most ``plan.max_concurrency`` at once. A step's
  params are resolved from earlier outputs (``${1.explanation}``, ``${primary.result.price}``); its capability's
  tool is called on the tool's server under the capability's ``timeout_seconds`` (else the server's timeout). A
  failed required step ends the plan with what completed (steps not yet started are skipped); a failed optional
  step is marked and the plan goes on, skipping only what depends on it. A ``resolve`` pre-step (``flow.pre``)
  reads the search result by its metadata: one candidate is the value, several stop the plan with a
  clarification that lists them, none is a failure naming the query.
* :func:`outputs_combine` — the outputs by the plan's ``combine_mode``: ``last``, ``report`` or ``merge``.
* :func:`answer_write` — the answer from the combined output: the profile's model, or the offline one.

Where the calls run: in this event loop, or — with ``REDIS_URL`` (``SUPERVISOR_EXECUTOR`` auto/celery, the switch
of :mod:`conversations.fanout`) — each call as a ``conversations.goal_step`` Celery task while the scheduling stays
here; a broker that cannot take a call means it runs here, as the fan-out does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from asgiref.sync import sync_to_async

from agents.mcp import STATUS_ERROR, STATUS_OK, STATUS_TIMEOUT, Endpoint, ToolResult, tool_call
from agents.usage import KIND_ANSWER, usage_record
from common import tracing
from conversations.fanout import (
    HARD_LIMIT_SLACK_SECONDS,
    broker_send,
    executor_name,
    redis_circuit,
    results_collect,
)
from routing.goals import (
    CLARIFICATION,
    FAILURE,
    LAST,
    MERGE,
    RESOLVE,
    SUCCESS,
    DomainOutput,
    ExecutionPlan,
    ExecutionStep,
    GoalCatalogue,
    PlanError,
    plan_check,
    refs_resolve,
)
from routing.snapshot import ProfileSpec, Snapshot

logger = logging.getLogger(__name__)

STEP_EVENT = "plan_step"  # on_event's name; data: {id, capability, domain, status, [explanation, latency_ms]}
STARTED = "started"  # an event's status when the step starts; when it ends, its output's status
SKIPPED = "skipped"  # the status of a step that never ran (the plan ended first, or a step it needs failed)
NOT_FOUND = "not_found"  # a resolve's metadata status when the search found nothing

AMBIGUOUS_QUESTION = "Encontrei mais de uma opção para '{query}': {choices} Qual delas? (Which one?)"
NOT_FOUND_SENTENCE = "Não encontrei nada para '{query}' (not found)."
ANSWER_PROMPT = (
    "Você responde ao cliente a partir dos resultados abaixo, na língua dele, em poucas frases, sem inventar "
    "dados e sem mencionar passos, ferramentas ou sistemas. Se um resultado faltou, diga com franqueza o que não "
    "foi possível obter agora."
)
ANSWER_REQUEST = "Pergunta do cliente (customer's question):\n{question}\n\nResultados (results):\n{results}"

EventSink = Callable[[str, dict[str, Any]], Awaitable[None]]


@dataclass
class PlanRun:
    """What running a plan gave: ``status`` success, failure or clarification; every step's output by id (a
    step that never ran has status ``skipped``); the MCP calls made, in the order they ended."""

    status: str
    outputs: dict[int, DomainOutput]
    clarification: dict[str, Any] | None = None
    latency_ms: float = 0.0
    error: str = ""  # why a plan that could not run was refused (plan_check), before any call
    tool_results: list[ToolResult] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "outputs": {str(step_id): output.as_dict() for step_id, output in sorted(self.outputs.items())},
            "clarification": self.clarification,
            "latency_ms": round(self.latency_ms, 1),
            "error": self.error,
        }


@dataclass(frozen=True)
class _Target:
    """Where a step's call goes: the tool, its server (with the step's time limit) and its arguments schema."""

    endpoint: Endpoint
    tool: str
    schema: Mapping[str, Any]


Caller = Callable[[_Target, dict[str, Any]], Awaitable[ToolResult]]


def _targets(plan: ExecutionPlan, catalogue: GoalCatalogue, snapshot: Snapshot) -> dict[int, _Target]:
    """Each step's target; raises :class:`PlanError` for a capability whose tool or server cannot be called."""
    targets = {}
    for step in plan.steps:
        capability = catalogue.capabilities[step.capability]
        tool = snapshot.tools.get(capability.tool_name)
        if tool is None or not tool.enabled:
            state = "not registered" if tool is None else "disabled"
            raise PlanError(f"Step {step.id}: the tool {capability.tool_name!r} of {step.capability!r} is {state}.")
        server = snapshot.servers.get(tool.server)
        if server is None or not server.enabled:
            raise PlanError(f"Step {step.id}: the MCP server {tool.server!r} of {step.capability!r} is disabled.")
        timeout = float(capability.metadata.get("timeout_seconds") or server.timeout)
        targets[step.id] = _Target(Endpoint(server.name, server.endpoint, timeout), tool.name, tool.args_schema)
    return targets


# -- where the calls run -----------------------------------------------------------------------------------------


async def _call_here(target: _Target, arguments: dict[str, Any]) -> ToolResult:
    return await tool_call(endpoint=target.endpoint, tool=target.tool, arguments=arguments, schema=dict(target.schema))


async def _call_on_worker(target: _Target, arguments: dict[str, Any]) -> ToolResult:
    """The call as a Celery task, its result read by the step's deadline; in-process when the broker is down."""
    from conversations.tasks import goal_step

    if not redis_circuit.allows():
        return await _call_here(target, arguments)
    endpoint = target.endpoint
    payload = {
        "server": endpoint.name,
        "endpoint": endpoint.url,
        "timeout": endpoint.timeout,
        "tool": target.tool,
        "arguments": arguments,
        "schema": dict(target.schema),
    }
    started = time.perf_counter()
    headers = tracing.headers_out() or {}  # the worker's mcp.tool_call span joins this trace
    sent = await broker_send(
        lambda: goal_step.apply_async(
            args=(payload,),
            soft_time_limit=endpoint.timeout,  # type: ignore[arg-type]  # Celery takes float seconds
            time_limit=endpoint.timeout + HARD_LIMIT_SLACK_SECONDS,  # type: ignore[arg-type]  # float seconds
            expires=endpoint.timeout,
            headers=headers,
        )
    )
    if sent is None:
        return await _call_here(target, arguments)
    (answer,) = await sync_to_async(results_collect, thread_sensitive=False)([sent], started + endpoint.timeout)
    if answer is None:  # Redis went away after the call was sent: make it here with the time that is left
        left = max(started + endpoint.timeout - time.perf_counter(), 0.001)
        return await _call_here(replace(target, endpoint=replace(endpoint, timeout=left)), arguments)
    latency = (time.perf_counter() - started) * 1000
    if "tool" in answer:  # the worker's ToolResult
        return ToolResult(**{**answer, "latency_ms": latency})
    status = answer.get("status", STATUS_ERROR)
    error = (
        f"no answer from {endpoint.name} within {endpoint.timeout:g}s"
        if status == STATUS_TIMEOUT
        else str(answer.get("error") or "failed")
    )
    return ToolResult(target.tool, endpoint.name, arguments, status, latency, None, error)


CALLERS: dict[str, Caller] = {"inprocess": _call_here, "celery": _call_on_worker}


# -- one step ----------------------------------------------------------------------------------------------------


def _arguments(params: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """The params the tool declares (all of them when its schema lists none); a reference to nothing is dropped."""
    properties = schema.get("properties") or {}
    return {key: value for key, value in params.items() if value is not None and (not properties or key in properties)}


def _label(candidate: Mapping[str, Any], fields: list[str], value: Any) -> str:
    shown = [str(candidate[name]) for name in fields if candidate.get(name) not in (None, "")]
    return ", ".join(shown) or str(value)


def _resolved(step: ExecutionStep, result: Any, metadata: dict[str, Any]) -> DomainOutput:
    """A ``resolve`` pre-step's output from its search result, read by the step's ``flow.pre`` entry."""
    pre = step.pre
    query = step.params.get(pre["query_param"])
    found = result.get(pre["candidates"]) if isinstance(result, Mapping) else None
    candidates = [item for item in found if isinstance(item, Mapping)] if isinstance(found, list) else []
    if not candidates:
        sentence = str(pre.get("not_found") or NOT_FOUND_SENTENCE).replace("{query}", str(query))
        return DomainOutput(FAILURE, result, sentence, 1.0, {**metadata, "status": NOT_FOUND, "error": sentence})
    listed = [
        {**item, "value": item.get(pre["value"]), "label": _label(item, pre["label"], item.get(pre["value"]))}
        for item in candidates
    ]
    if len(listed) == 1:
        (only,) = listed
        explanation = f"'{query}' → {only['value']} ({only['label']})"
        return DomainOutput(SUCCESS, {**result, "resolved": only["value"]}, explanation, 1.0, metadata)
    choices = " ".join(f"{number}) {item['label']} ({item['value']})" for number, item in enumerate(listed, 1))
    question = (
        str(pre.get("question") or AMBIGUOUS_QUESTION).replace("{query}", str(query)).replace("{choices}", choices)
    )
    clarification = {
        "reason": "ambiguous",
        "step": step.id,
        "param": pre["param"],
        "from_param": pre["from_param"],
        "query": query,
        "candidates": listed,
        "label_fields": list(pre["label"]),
        "value_field": "value",
        "question": question,
    }
    return DomainOutput(
        CLARIFICATION, {"candidates": listed}, question, 1.0, {**metadata, "clarification": clarification}
    )


def _structured(payload: Any) -> Any:
    """A tool's result as data: a server without structured output sends its JSON object as text."""
    if isinstance(payload, str) and payload.lstrip().startswith("{"):
        try:
            return json.loads(payload)
        except ValueError:
            return payload
    return payload


def _failure_sentence(step: ExecutionStep, result: ToolResult, timeout: float) -> str:
    if result.status == STATUS_TIMEOUT:
        return f"{step.capability} não respondeu em {timeout:g} s (no answer in time)."
    return f"{step.capability} falhou: {result.reason or result.status} (failed)."


async def _step_run(
    step: ExecutionStep, params: Mapping[str, Any], target: _Target, call: Caller
) -> tuple[DomainOutput, ToolResult | None]:
    """One step's output and its MCP call; never raises (a crash is a failure that says so)."""
    metadata: dict[str, Any] = {
        "step": step.id,
        "capability": step.capability,
        "domain": step.domain,
        "tool": target.tool,
        "required": step.required,
    }
    if step.kind:
        metadata["kind"] = step.kind
    started = time.perf_counter()
    try:
        result = await call(target, _arguments(params, target.schema))
    except Exception as exc:  # a step that crashes is a failed step, not a failed turn
        logger.exception("Goal plan step %s (%s) crashed", step.id, step.capability)
        metadata.update(latency_ms=round((time.perf_counter() - started) * 1000, 1), status=STATUS_ERROR)
        metadata["error"] = f"{type(exc).__name__}: {exc}"
        return DomainOutput(FAILURE, None, f"{step.capability} falhou (failed).", 1.0, metadata), None
    return _output(step, result, target, metadata), result


def _output(step: ExecutionStep, result: ToolResult, target: _Target, metadata: dict[str, Any]) -> DomainOutput:
    metadata["latency_ms"] = round(result.latency_ms, 1)
    if result.status != STATUS_OK:
        metadata.update(status=result.status, error=result.error)
        return DomainOutput(FAILURE, None, _failure_sentence(step, result, target.endpoint.timeout), 1.0, metadata)
    payload = _structured(result.result)
    if step.kind == RESOLVE:
        return _resolved(step, payload, metadata)
    explanation = payload.get("explanation") if isinstance(payload, Mapping) else None
    if not isinstance(explanation, str) or not explanation.strip():
        from agents.llm import result_summary

        explanation = result_summary(payload)
    return DomainOutput(SUCCESS, payload, explanation, 1.0, metadata)


def _skipped(step: ExecutionStep, why: str) -> DomainOutput:
    metadata = {"step": step.id, "capability": step.capability, "domain": step.domain, "required": step.required}
    return DomainOutput(SKIPPED, None, why, 1.0, {**metadata, "latency_ms": 0.0})


# -- the plan ----------------------------------------------------------------------------------------------------


async def plan_execute(
    plan: ExecutionPlan,
    catalogue: GoalCatalogue,
    snapshot: Snapshot,
    *,
    on_event: EventSink | None = None,
    executor: str | None = None,
) -> PlanRun:
    """Run ``plan`` (see the module's docstring); never raises.

    ``executor`` (``inprocess`` | ``celery``) overrides the ``SUPERVISOR_EXECUTOR`` switch (benchmarks).
    """
    started = time.perf_counter()
    try:
        plan_check(plan, catalogue.capabilities)
        targets = _targets(plan, catalogue, snapshot)
    except PlanError as exc:
        return PlanRun(FAILURE, {}, None, (time.perf_counter() - started) * 1000, error=str(exc))
    call = CALLERS[executor or executor_name()]

    async def tell(data: dict[str, Any]) -> None:
        if on_event is None:
            return
        try:
            await on_event(STEP_EVENT, data)
        except Exception:  # a listener that fails does not stop the plan
            logger.warning("A plan_step listener failed", exc_info=True)

    async def finished(step: ExecutionStep, output: DomainOutput) -> None:
        outputs[step.id] = output
        refs[str(step.id)] = output.as_dict()
        if step.output_key:
            refs[step.output_key] = refs[str(step.id)]
        await tell(
            {
                "id": step.id,
                "capability": step.capability,
                "domain": step.domain,
                "status": output.status,
                "explanation": output.explanation,
                "latency_ms": output.metadata.get("latency_ms", 0.0),
            }
        )

    outputs: dict[int, DomainOutput] = {}
    refs: dict[str, Any] = {}
    pending = {step.id: step for step in plan.steps}
    running: dict[asyncio.Task[tuple[DomainOutput, ToolResult | None]], ExecutionStep] = {}
    calls: list[ToolResult] = []
    stop: DomainOutput | None = None  # the output that ended the plan: a required failure or a clarification
    limit = max(1, plan.max_concurrency)
    while pending or running:
        changed = True
        while stop is None and changed:  # skipping a step may settle the ones after it: go round again
            changed = False
            for step in sorted(pending.values(), key=lambda one: one.id):
                if any(dependency not in outputs for dependency in step.depends_on):
                    continue
                failed = [dependency for dependency in step.depends_on if outputs[dependency].status != SUCCESS]
                if failed:
                    del pending[step.id]
                    await finished(step, _skipped(step, f"Não executado: o passo {failed[0]} não deu resultado."))
                    changed = True
                    continue
                if len(running) >= limit:
                    continue
                del pending[step.id]
                params = refs_resolve(step.params, refs)
                await tell({"id": step.id, "capability": step.capability, "domain": step.domain, "status": STARTED})
                running[asyncio.create_task(_step_run(step, params, targets[step.id], call))] = step
        if not running:
            break
        done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
        for task in sorted(done, key=lambda one: running[one].id):
            step = running.pop(task)
            output, called = task.result()
            if called is not None:
                calls.append(called)
            await finished(step, output)
            if stop is None and (output.status == CLARIFICATION or (output.status == FAILURE and step.required)):
                stop = output
    for step in sorted(pending.values(), key=lambda one: one.id):  # what the plan's end left unstarted
        await finished(step, _skipped(step, "Não executado: o plano parou antes (the plan stopped)."))
    latency = (time.perf_counter() - started) * 1000
    if stop is not None and stop.status == CLARIFICATION:
        return PlanRun(CLARIFICATION, outputs, dict(stop.metadata["clarification"]), latency, tool_results=calls)
    required_ok = all(outputs[step.id].status == SUCCESS for step in plan.steps if step.required)
    return PlanRun(SUCCESS if required_ok else FAILURE, outputs, None, latency, tool_results=calls)


# -- combining and the answer ------------------------------------------------------------------------------------


def _part(step: ExecutionStep, output: DomainOutput | None) -> dict[str, Any]:
    status = output.status if output is not None else SKIPPED
    return {
        "step": step.id,
        "capability": step.capability,
        "output_key": step.output_key,
        "status": status,
        "explanation": output.explanation if output is not None else "",
    }


def _line(part: dict[str, Any]) -> str:
    if part["status"] == SUCCESS:
        return part["explanation"]
    if part["status"] == SKIPPED:
        return f"[{part['capability']}: não executado (skipped)]"
    return f"[{part['capability']}: {part['explanation'] or part['status']}]"


def outputs_combine(plan: ExecutionPlan, outputs: Mapping[int, DomainOutput]) -> dict[str, Any]:
    """The plan's outputs combined by its ``combine_mode``: ``{mode, explanation, result, parts}``.

    ``last``: the last step that is not a pre-step; ``report``: each step's explanation in step order, a failed or
    skipped one marked (a pre-step only when it did not succeed); ``merge``: the successful steps' results in one
    dict by ``output_key``, and their explanations in order.
    """
    primaries = [step for step in plan.steps if not step.kind] or list(plan.steps)
    if plan.combine_mode == LAST and primaries:
        last = primaries[-1]
        output = outputs.get(last.id)
        part = _part(last, output)
        return {
            "mode": LAST,
            "explanation": _line(part),
            "result": output.result if output is not None else None,
            "parts": [part],
        }
    shown = [
        step
        for step in plan.steps
        if not step.kind or (outputs.get(step.id) is not None and outputs[step.id].status != SUCCESS)
    ]
    parts = [_part(step, outputs.get(step.id)) for step in shown]
    if plan.combine_mode == MERGE:
        merged = {
            step.output_key or str(step.id): outputs[step.id].result
            for step in primaries
            if step.id in outputs and outputs[step.id].status == SUCCESS
        }
        return {
            "mode": MERGE,
            "explanation": "\n".join(_line(part) for part in parts),
            "result": merged,
            "parts": parts,
        }
    return {
        "mode": plan.combine_mode,
        "explanation": "\n".join(_line(part) for part in parts),
        "result": None,
        "parts": parts,
    }


async def answer_write(profile: ProfileSpec, question: str, combined: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The answer to ``question`` from ``combined`` (:func:`outputs_combine`) and how it was written.

    With a model configured, the profile's model writes it (``{"method": "llm"}``); offline, it is the combined
    explanation marked as the offline model's (``"offline"``); a model that fails leaves the combined
    explanation as it is (``"fallback"``, with the error).
    """
    from agents.llm import OFFLINE_NOTICE, OpenAICompatibleModel, llm_configured

    explanation = str(combined.get("explanation") or "")
    if not llm_configured(profile):
        joint = "\n" if "\n" in explanation else " "
        return f"{profile.name} {OFFLINE_NOTICE}:{joint}{explanation}", {"method": "offline"}
    results = json.dumps(
        {"explanation": explanation, "result": combined.get("result")}, ensure_ascii=False, default=str
    )
    model = OpenAICompatibleModel(profile)
    try:
        reply = await model.client().ainvoke(
            [("system", ANSWER_PROMPT), ("human", ANSWER_REQUEST.format(question=question, results=results))]
        )
        usage_record(KIND_ANSWER, model.model_name, reply)
    except Exception as exc:  # noqa: BLE001 — the combined explanation still answers
        logger.warning("Writing the goal answer failed: %s", exc)
        return explanation, {"method": "fallback", "error": f"{type(exc).__name__}: {exc}"}
    text = reply.content if isinstance(reply.content, str) else str(reply.content)
    return text, {"method": "llm"}
