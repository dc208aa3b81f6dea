"""Where a supervisor plan's specialists run: in this process, or on Celery workers.

Both executors honour one contract (:class:`PlanExecutor`); the graph does not
know which one ran. With a broker (``REDIS_URL``) the plan's steps are Celery
tasks running in parallel on the workers (``celery -A platform worker``), each
with its own time limit, and the request collects what finishes in time. With
no broker (the embedded default) the same steps run concurrently here.
``SUPERVISOR_EXECUTOR`` (``auto`` | ``celery`` | ``inprocess``) forces one.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any, ClassVar

from asgiref.sync import sync_to_async
from django.conf import settings

from agents.mcp import ToolResult
from agents.runtime import SpecialistOutcome, SpecialistRequest, tools_for_turn
from routing.guardrails import MaskVault
from routing.router import PlanStep
from routing.snapshot import Snapshot
from routing.supervisor import STATUS_ERROR, STATUS_OK, STATUS_TIMEOUT, Partial, PlanResult, plan_run

# Extra seconds a worker gets beyond the step's limit before Celery kills the task outright.
HARD_LIMIT_SLACK_SECONDS = 5


class PlanExecutor:
    """Run a plan's steps concurrently, each under ``timeout`` seconds.

    Returns one :class:`~routing.supervisor.Partial` per step, in step order,
    tagged with ``round_number``; a step that fails or overruns is a partial
    with status ``error`` or ``timeout``. Never raises.
    """

    name: ClassVar[str]

    async def run(
        self,
        steps: list[PlanStep],
        requests: dict[str, SpecialistRequest | None],
        *,
        timeout: float,
        round_number: int,
        vault: MaskVault,
    ) -> PlanResult:
        raise NotImplementedError


class InProcessExecutor(PlanExecutor):
    name = "inprocess"

    async def run(self, steps, requests, *, timeout, round_number, vault) -> PlanResult:
        return await plan_run(steps, lambda step: requests[step.agent], timeout=timeout, round_number=round_number)


class CeleryExecutor(PlanExecutor):
    name = "celery"

    async def run(self, steps, requests, *, timeout, round_number, vault) -> PlanResult:
        started = time.perf_counter()
        payloads = [
            payload_from_request(requests[step.agent], vault) if requests[step.agent] else None for step in steps
        ]
        sent = await sync_to_async(_send, thread_sensitive=False)(payloads, timeout)
        answers = await sync_to_async(_collect, thread_sensitive=False)(sent, started + timeout)
        partials = []
        for step, answer in zip(steps, answers, strict=True):
            partial = _partial(step, answer, timeout)
            partial.round = round_number
            partial.latency_ms = answer.get("latency_ms", (time.perf_counter() - started) * 1000)
            partials.append(partial)
        return PlanResult(partials=partials)


def _send(payloads: list[dict[str, Any] | None], timeout: float) -> list[Any]:
    from routing.tasks import specialist_step

    return [
        specialist_step.apply_async(
            args=[payload],
            soft_time_limit=timeout,
            time_limit=timeout + HARD_LIMIT_SLACK_SECONDS,
            expires=timeout,
        )
        if payload is not None
        else None
        for payload in payloads
    ]


def _collect(results: list[Any], deadline: float) -> list[dict[str, Any]]:
    """Wait for every result until ``deadline`` (``time.perf_counter()``); missing ones are timeouts.

    ``AsyncResult.get`` on the Redis backend waits on the result's pub/sub
    channel, so an answer is taken as soon as it is published (no 0.5 s poll).
    Waiting in turn is enough: the steps run in parallel on the workers, and the
    wait ends with the slowest of them or at the deadline.
    """
    answers: list[dict[str, Any]] = []
    for result in results:
        if result is None:
            answers.append({"status": STATUS_ERROR, "error": "unknown or disabled specialist"})
            continue
        begun = time.perf_counter()
        remaining = deadline - begun
        try:
            value = result.get(timeout=max(remaining, 0.01), propagate=False, interval=0.05)
        except Exception:  # noqa: BLE001 — celery.exceptions.TimeoutError and broker errors alike: a gap
            answers.append({"status": STATUS_TIMEOUT})
            result.revoke()
            continue
        if not result.successful() or not isinstance(value, dict):
            answers.append({"status": STATUS_ERROR, "error": f"{type(value).__name__}: {value}"})
            continue
        answers.append(value)
    return answers


def _partial(step: PlanStep, answer: dict[str, Any], timeout: float) -> Partial:
    status = answer.get("status", STATUS_ERROR)
    if status == STATUS_TIMEOUT:
        return Partial(step.agent, step.intent, STATUS_TIMEOUT, error=f"no answer within {timeout:g}s")
    outcome = outcome_from_dict(answer["outcome"]) if answer.get("outcome") else None
    if status == STATUS_OK and outcome is not None:
        return Partial(step.agent, step.intent, STATUS_OK, outcome=outcome)
    error = answer.get("error") or (outcome.error if outcome else "") or "failed"
    return Partial(step.agent, step.intent, STATUS_ERROR, outcome=outcome, error=error)


EXECUTORS: dict[str, type[PlanExecutor]] = {
    InProcessExecutor.name: InProcessExecutor,
    CeleryExecutor.name: CeleryExecutor,
}


def executor_for() -> PlanExecutor:
    """Celery when a broker is configured (or forced), otherwise in-process."""
    choice = settings.SUPERVISOR_EXECUTOR
    if choice == "auto":
        choice = CeleryExecutor.name if settings.REDIS_URL else InProcessExecutor.name
    return EXECUTORS[choice]()


# --- plain data across the broker ------------------------------------------------------------


def payload_from_request(request: SpecialistRequest, vault: MaskVault) -> dict[str, Any]:
    return {
        "agent_id": request.profile.agent_id,
        "specialist": request.specialist.name,
        "intent": request.intent,
        "intent_description": request.intent_description,
        "text": request.text,
        "history": [list(item) for item in request.history],
        "context": request.context,
        "model_context": request.model_context,
        "tools": [tool.name for tool in request.tools],
        "vault": vault.entries(),
    }


def request_from_payload(payload: dict[str, Any], current: Snapshot) -> SpecialistRequest | None:
    """The specialist's request rebuilt on a worker from its own snapshot; ``None`` if it no longer exists."""
    profile = current.profiles.get(payload["agent_id"])
    specialist = profile.specialists.get(payload["specialist"]) if profile else None
    if profile is None or specialist is None:
        return None
    vault = MaskVault.from_entries(payload.get("vault", []))
    tools = tools_for_turn(
        profile=profile, specialist=specialist, intent_tools=payload.get("tools", []), all_tools=current.tools
    )
    return SpecialistRequest(
        profile=profile,
        specialist=specialist,
        text=payload["text"],
        intent=payload.get("intent", ""),
        intent_description=payload.get("intent_description", ""),
        history=tuple(tuple(item) for item in payload.get("history", [])),
        context=payload.get("context", {}),
        model_context=payload.get("model_context", {}),
        tools=tools,
        servers=current.servers,
        unmask=vault.unmask,
        mask=vault.mask_value,
    )


def outcome_as_dict(outcome: SpecialistOutcome) -> dict[str, Any]:
    data = asdict(outcome)
    data["tool_results"] = [result.as_dict() for result in outcome.tool_results]
    return data


def outcome_from_dict(data: dict[str, Any]) -> SpecialistOutcome:
    results = [ToolResult(**result) for result in data.get("tool_results", [])]
    return SpecialistOutcome(**{**data, "tool_results": results})
