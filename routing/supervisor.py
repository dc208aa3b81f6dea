"""Supervisor mode: run a plan's specialists concurrently and consolidate their answers.

Each specialist of a plan runs under its own time limit; one that fails or
times out leaves a marked gap in the consolidated answer (and in
``metadata.supervisor``), never a failed request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agents.runtime import SpecialistOutcome, SpecialistRequest, specialist_run
from routing.router import PlanStep
from routing.snapshot import ProfileSpec

logger = logging.getLogger(__name__)

STATUS_OK = "ok"
STATUS_TIMEOUT = "timeout"
STATUS_ERROR = "error"

CONSOLIDATION_HEADER = "[Supervisor] Consolidação de múltiplos agentes acionados."
GAP_TEXT = "[sem resposta: {reason} — no answer: {reason}]"


@dataclass
class Partial:
    """One specialist's part of a supervisor turn."""

    agent: str
    intent: str
    status: str
    outcome: SpecialistOutcome | None = None
    error: str = ""
    latency_ms: float = 0.0

    @property
    def answer(self) -> str:
        return self.outcome.answer if self.outcome and self.status == STATUS_OK else ""

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "agent": self.agent,
            "intent": self.intent,
            "status": self.status,
            "latency_ms": round(self.latency_ms, 1),
        }
        if self.error:
            info["error"] = self.error
        if self.outcome:
            info["tools"] = [result.tool for result in self.outcome.tool_results]
        return info


@dataclass
class PlanResult:
    partials: list[Partial] = field(default_factory=list)

    def tool_results(self) -> list[Any]:
        return [result for partial in self.partials if partial.outcome for result in partial.outcome.tool_results]


async def plan_run(
    steps: list[PlanStep],
    build_request: Callable[[PlanStep], SpecialistRequest | None],
    *,
    timeout: float,
) -> PlanResult:
    """Run every step's specialist concurrently in this process, each under ``timeout`` seconds."""

    async def one(step: PlanStep) -> Partial:
        started = time.perf_counter()
        request = build_request(step)
        if request is None:
            return Partial(step.agent, step.intent, STATUS_ERROR, error="unknown or disabled specialist")
        try:
            outcome = await asyncio.wait_for(specialist_run(request), timeout)
        except TimeoutError:
            return Partial(
                step.agent,
                step.intent,
                STATUS_TIMEOUT,
                error=f"no answer within {timeout:g}s",
                latency_ms=(time.perf_counter() - started) * 1000,
            )
        except Exception as exc:  # noqa: BLE001 — a failed specialist is a gap, not a failed request
            logger.warning("Supervisor step %s failed: %s", step.agent, exc)
            return Partial(
                step.agent,
                step.intent,
                STATUS_ERROR,
                error=f"{type(exc).__name__}: {exc}",
                latency_ms=(time.perf_counter() - started) * 1000,
            )
        status = STATUS_ERROR if outcome.error else STATUS_OK
        return Partial(
            step.agent,
            step.intent,
            status,
            outcome=outcome,
            error=outcome.error or "",
            latency_ms=(time.perf_counter() - started) * 1000,
        )

    return PlanResult(partials=list(await asyncio.gather(*(one(step) for step in steps))))


SYNTHESIS_REQUEST = (
    "Pergunta do cliente (customer's question):\n{question}\n\nRespostas parciais (partial answers):\n{parts}"
)


async def consolidate(result: PlanResult, *, profile: ProfileSpec, question: str) -> tuple[str, dict[str, Any]]:
    """The consolidated answer and how it was made.

    With a model configured, the profile's synthesis prompt merges the partial
    answers (``question`` and the answers are already masked); without one, or
    when the model fails, they are joined per specialist in plan order.
    """
    from agents.llm import OpenAICompatibleModel, llm_configured

    if not llm_configured():
        return consolidate_join(result), {"method": "join"}
    parts = "\n\n".join(
        f"[{partial.agent}] {partial.answer or GAP_TEXT.format(reason=partial.status)}" for partial in result.partials
    )
    client = OpenAICompatibleModel(profile).client()
    try:
        reply = await client.ainvoke(
            [
                ("system", profile.synthesis_prompt),
                ("human", SYNTHESIS_REQUEST.format(question=question, parts=parts)),
            ]
        )
    except Exception as exc:  # noqa: BLE001 — fall back to the join, record why
        logger.warning("Synthesis failed: %s", exc)
        return consolidate_join(result), {"method": "join", "error": f"{type(exc).__name__}: {exc}"}
    text = reply.content if isinstance(reply.content, str) else str(reply.content)
    return text, {"method": "llm"}


def consolidate_join(result: PlanResult) -> str:
    """The partial answers joined per specialist in plan order; a failed one is a marked gap."""
    parts = [CONSOLIDATION_HEADER]
    for partial in result.partials:
        body = partial.answer or GAP_TEXT.format(reason=partial.status)
        parts.append(f"{partial.agent}: {body}")
    return "\n\n".join(parts)
