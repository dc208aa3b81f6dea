"""Supervisor mode: run a plan's specialists concurrently and consolidate their answers.

Each specialist of a plan runs under its own time limit; one that fails or
times out leaves a marked gap in the consolidated answer (and in
``metadata.supervisor``), never a failed request.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext_lazy
from pydantic import BaseModel, Field

from agents.public import KIND_REVIEW, KIND_SYNTHESIS, Generation, OpenAICompatibleModel, llm_configured, usage_record
from common.i18n import say
from common.infra import tracing
from common.language import LANGUAGES
from conversations.history import HistoryEntry
from conversations.runtime import SpecialistOutcome, SpecialistRequest, specialist_run
from routing.public import PlanStep, ProfileSpec, structured_answer

logger = logging.getLogger(__name__)

STATUS_OK = "ok"
STATUS_TIMEOUT = "timeout"
STATUS_ERROR = "error"

# The joined answer's first line and a failed part's place in it, in the conversation's language (common.i18n.say).
CONSOLIDATION_HEADER = gettext_lazy("[Supervisor] The answers of the specialists your message called for.")
GAP_TEXT = gettext_lazy("[no answer: {reason}]")


def gap_text(reason: str, language: str | None = None) -> str:
    """A failed part's place in ``language`` (the platform's default when none)."""
    return say(language, GAP_TEXT, reason=reason)


@dataclass
class Partial:
    """One specialist's part of a supervisor turn."""

    agent: str
    intent: str
    status: str
    outcome: SpecialistOutcome | None = None
    error: str = ""
    latency_ms: float = 0.0
    round: int = 0

    @property
    def answer(self) -> str:
        return self.outcome.answer if self.outcome and self.status == STATUS_OK else ""

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "agent": self.agent,
            "intent": self.intent,
            "status": self.status,
            "round": self.round,
            "latency_ms": round(self.latency_ms, 1),
        }
        if self.error:
            info["error"] = self.error
        if self.outcome:
            info["tools"] = [result.tool for result in self.outcome.tool_results]
            info["started_at"] = self.outcome.started_at
            info["finished_at"] = self.outcome.finished_at
        return info


@dataclass
class PlanResult:
    """Every part of a supervisor turn, in the order they were made (review rounds included)."""

    partials: list[Partial] = field(default_factory=list)
    rounds: list[dict[str, Any]] = field(default_factory=list)

    def tool_results(self) -> list[Any]:
        return [result for partial in self.partials if partial.outcome for result in partial.outcome.tool_results]

    def latest(self) -> list[Partial]:
        """Each specialist's last part, in the order they were first asked."""
        latest: dict[str, Partial] = {}
        for partial in self.partials:
            latest[partial.agent] = partial
        return list(latest.values())


@dataclass
class TurnSupervision:
    """The supervisor's and the judges' part of one turn (``turn.supervisor``): a plan's parts, those the review of
    a single-specialist turn sent on (``reviewed``), their consolidation, the judges' scores and the review's
    decision on the answer."""

    plan_result: PlanResult | None = None
    reviewed: PlanResult | None = None
    consolidation: dict[str, Any] | None = None
    judges: dict[str, Any] = field(default_factory=dict)
    review: dict[str, Any] = field(default_factory=dict)

    def parts(self) -> list[Partial]:
        """The parts a supervisor asked for: a plan's, or those the review of a single-specialist turn sent on."""
        return [part for result in (self.plan_result, self.reviewed) if result for part in result.partials]


MAX_REVIEW_ROUNDS = 3

Runner = Callable[[list[PlanStep], int], Awaitable[PlanResult]]
# Told of each step of a plan the moment it finishes (streaming clients see the parts arrive one by one).
PartialReport = Callable[[Partial], Awaitable[None]]
CoverageCheck = Callable[[PlanResult], Awaitable[list[PlanStep]]]


async def review_loop(result: PlanResult, *, run: Runner, uncovered: CoverageCheck, max_rounds: int) -> PlanResult:
    """Send every uncovered part of the request on to its specialist, at most ``max_rounds`` times.

    ``uncovered`` says which steps still need an answer (the plan's failed
    steps, and what a model finds missing when one is configured); ``run``
    asks them. Each round is recorded in ``result.rounds``.
    """
    for number in range(1, max_rounds + 1):
        steps = await uncovered(result)
        if not steps:
            break
        more = await run(steps, number)
        result.partials.extend(more.partials)
        result.rounds.append(
            {
                "round": number,
                "uncovered": [step.intent for step in steps],
                "sent_to": [step.agent for step in steps],
                "covered": [p.agent for p in more.partials if p.status == STATUS_OK],
            }
        )
    return result


COVERAGE_PROMPT = (
    "You review a customer-service team's work. Given the customer's request, the answers given so far and the "
    "intents the team handles, name the intents of the request that no answer covers yet (none when all are "
    "covered). Intents:\n{catalogue}"
)


class Coverage(BaseModel):
    """Structured output of the model's coverage check."""

    uncovered_intents: list[str] = Field(default_factory=list, description="Intent names not covered yet.")


HISTORY_HEADER = "Earlier in the conversation (oldest first):"


async def llm_uncovered(
    *, profile: ProfileSpec, question: str, result: PlanResult, history: Sequence[HistoryEntry] = ()
) -> list[PlanStep]:
    """Steps for the intents the model finds uncovered, the conversation's earlier messages in the prompt (seed
    004: the supervisor remembers what the customer asked before); ``[]`` on any model failure."""
    # A remote backend's entry is the gateway's, never a part a supervisor sends on: only local intents are offered.
    local = [intent for intent in profile.intents if intent.agent in profile.specialists]
    catalogue = "\n".join(f"- {intent.name}: {intent.description}" for intent in local)
    answers = "\n".join(f"[{p.agent}] {p.answer or gap_text(p.status, 'en')}" for p in result.latest())
    earlier = "\n".join(f"{entry.role}: {entry.content}" for entry in history)
    request = (f"{HISTORY_HEADER}\n{earlier}\n\n" if earlier else "") + f"Request:\n{question}\n\nAnswers:\n{answers}"
    try:
        coverage = await structured_answer(
            profile,
            Coverage,
            [("system", COVERAGE_PROMPT.format(catalogue=catalogue)), ("human", request)],
            for_routing=False,
            kind=KIND_REVIEW,
        )
    except Exception as exc:  # noqa: BLE001 — no review beats a failed request
        logger.warning("Coverage check failed: %s", exc)
        return []
    by_name = {intent.name: intent for intent in local}
    names = coverage.uncovered_intents if coverage is not None else []
    return [
        PlanStep(agent=by_name[name].agent, intent=name, mcp_tools=by_name[name].mcp_tools)
        for name in dict.fromkeys(names)
        if name in by_name
    ]


def keyword_uncovered(
    *,
    profile: ProfileSpec,
    question: str,
    result: PlanResult,
    history: Sequence[HistoryEntry] = (),
    also_answered: str = "",
) -> list[PlanStep]:
    """The keyword coverage rule (no model): every intent the request hits whose specialist has not answered it.

    The request is the message; a message that hits no intent (a follow-up: "e o outro?") is read with the
    customer's previous message, whose parts ``also_answered`` (the specialist that answered it) covered, and
    every specialist its answer joined, when it was a supervisor's (:func:`joined_agents`).
    """
    router = profile.router
    hits = router.match(question)
    answered = {partial.agent for partial in result.latest() if partial.status == STATUS_OK}
    if not hits:
        last = max((index for index, entry in enumerate(history) if entry.role == "user"), default=-1)
        hits = router.match(history[last].content) if last >= 0 else []
        answered.add(also_answered)
        answered.update(agent for entry in history[last + 1 :] for agent in joined_agents(entry.content))
    steps: dict[str, PlanStep] = {}
    for hit in hits:
        agent = hit.intent.agent
        if agent not in answered and agent not in steps and agent in profile.specialists:
            steps[agent] = PlanStep(
                agent=agent,
                intent=hit.intent.name,
                mcp_tools=hit.intent.mcp_tools,
                keywords=hit.keywords,
                next_state=hit.intent.next_state,
            )
    return list(steps.values())


def coverage_check(steps: list[PlanStep], more: CoverageCheck) -> CoverageCheck:
    """The review's check: ``steps`` (what was asked so far, grown as the review sends work on) whose specialist
    has no answer yet, then what ``more`` finds open that no one has answered or been asked."""

    async def uncovered(result: PlanResult) -> list[PlanStep]:
        missing = failed_steps(result, steps)
        answered = {partial.agent for partial in result.latest() if partial.status == STATUS_OK}
        known = {step.agent for step in missing}
        for step in await more(result):
            if step.agent not in answered and step.agent not in known:
                steps.append(step)
                missing.append(step)
                known.add(step.agent)
        return missing

    return uncovered


def failed_steps(result: PlanResult, steps: list[PlanStep]) -> list[PlanStep]:
    """The plan's steps whose specialist has no successful answer yet."""
    answered = {partial.agent for partial in result.latest() if partial.status == STATUS_OK}
    return [step for step in steps if step.agent not in answered]


async def plan_run(
    steps: list[PlanStep],
    build_request: Callable[[PlanStep], SpecialistRequest | None],
    *,
    timeout: float,
    round_number: int = 0,
    on_partial: PartialReport | None = None,
) -> PlanResult:
    """Run every step's specialist concurrently in this process, each under ``timeout`` seconds;
    ``on_partial`` hears of each step as it finishes."""

    async def one(step: PlanStep) -> Partial:
        partial = await attempt(step)
        partial.round = round_number
        if on_partial is not None:
            await on_partial(partial)
        return partial

    async def attempt(step: PlanStep) -> Partial:
        started = time.perf_counter()
        try:
            request = build_request(step)
            if request is None:
                return Partial(step.agent, step.intent, STATUS_ERROR, error="unknown or disabled specialist")
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


async def consolidate(
    result: PlanResult,
    *,
    profile: ProfileSpec,
    question: str,
    generation: Generation | None = None,
    language: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """The consolidated answer and how it was made.

    With a model configured, the profile's synthesis prompt merges the partial
    answers (``question`` and the answers are already masked), written as the client asked (``generation``);
    without one, or when the model fails, they are joined per specialist in plan order, the platform's words in
    the conversation's ``language``.
    """

    if not llm_configured(profile):
        return consolidate_join(result, language), {"method": "join"}
    parts = "\n\n".join(
        f"[{partial.agent}] {partial.answer or gap_text(partial.status, 'en')}" for partial in result.latest()
    )
    model = OpenAICompatibleModel(profile)
    try:
        with tracing.llm_span(model.model_name, purpose="synthesis") as current:
            client = model.client()
            if generation is not None:
                client = client.bind(**model.call_options(generation))
            reply = await client.ainvoke(
                [
                    ("system", profile.synthesis_prompt),
                    ("human", SYNTHESIS_REQUEST.format(question=question, parts=parts)),
                ]
            )
            tracing.usage_record(current, reply)
        usage_record(KIND_SYNTHESIS, model.model_name, reply)
    except Exception as exc:  # noqa: BLE001 — fall back to the join, record why
        logger.warning("Synthesis failed: %s", exc)
        return consolidate_join(result, language), {"method": "join", "error": f"{type(exc).__name__}: {exc}"}
    text = reply.content if isinstance(reply.content, str) else str(reply.content)
    return text, {"method": "llm"}


def joined_agents(answer: str) -> set[str]:
    """The specialists whose part a joined answer (:func:`consolidate_join`, in any language) holds, gaps left
    out."""
    if not any(answer.startswith(say(language, CONSOLIDATION_HEADER)) for language in LANGUAGES):
        return set()
    gaps = "|".join(re.escape(gap_text("", language).partition(":")[0]) for language in LANGUAGES)
    return set(re.findall(rf"^(\w+): (?!{gaps})", answer, flags=re.MULTILINE))


def consolidate_join(result: PlanResult, language: str | None = None) -> str:
    """The partial answers joined per specialist in plan order; a failed one is a marked gap. The platform's words
    in ``language``."""
    parts = [say(language, CONSOLIDATION_HEADER)]
    for partial in result.latest():
        body = partial.answer or gap_text(partial.status, language)
        parts.append(f"{partial.agent}: {body}")
    return "\n\n".join(parts)
