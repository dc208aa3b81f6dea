"""The routing graph: one pass per user message.

``input_guardrails → routing_decision → <specialist> → output_guardrails → judge
→ supervisor_review → persist``

Each node is an async function over :class:`Turn` and is timed into
``turn.trace``. The graph reads configuration only from the compiled snapshot
and touches the database twice: once to read the conversation's state, once to
persist the whole turn in one transaction. No transaction or lock is held while
a model is called.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F

from agents.llm import ERROR_ANSWER, judge_asker, llm_configured
from agents.runtime import SpecialistOutcome, SpecialistRequest, specialist_run, tools_for_turn
from handoffs.models import HandoffKind
from handoffs.services import handoff_record
from routing import snapshot as snapshots
from routing.decide import route_decide
from routing.fanout import executor_for
from routing.guardrails import MaskVault, run_input_guardrails, run_output_guardrails
from routing.judges import REVIEW_FALLBACK_ANSWER, judge_answer, review_decision
from routing.models import Conversation, Message, MessageRole, RouteDecisionRecord, ToolCall
from routing.router import SUPERVISOR_ROUTE, PlanStep, RouteDecision
from routing.snapshot import ProfileSpec, Snapshot
from routing.supervisor import (
    GAP_TEXT,
    MAX_REVIEW_ROUNDS,
    PlanResult,
    consolidate,
    failed_steps,
    llm_uncovered,
    review_loop,
)

BLOCKED_ANSWER = (
    "Não posso ajudar com esta mensagem. Reformule, por favor. (I can't help with this message; please rephrase it.)"
)
NO_SPECIALIST_ANSWER = (
    "Nenhum especialista está disponível para este perfil agora. "
    "(No specialist is available for this profile right now.)"
)


@dataclass(frozen=True)
class TurnInput:
    """A validated user message. ``tenant_id`` is the key's tenant, never the body's."""

    tenant_pk: int
    tenant_slug: str
    profile: ProfileSpec
    text: str
    session_id: str = ""
    user_id: str = ""
    channel: str = "api"
    context: dict[str, Any] = field(default_factory=dict)
    snapshot: Snapshot | None = None

    @property
    def conversation_key(self) -> str:
        return f"{self.tenant_slug}:{self.profile.agent_id}:{self.session_id}"


@dataclass
class Turn:
    """Everything one pass through the graph knows and produces."""

    input: TurnInput
    mode: str
    state: str = ""
    active_agent: str = ""
    active_intent: str = ""
    history: tuple[tuple[str, str], ...] = ()
    vault: MaskVault = field(default_factory=MaskVault)
    sanitized_text: str = ""
    text_to_store: str = ""
    blocked: bool = False
    decision: RouteDecision | None = None
    agent: str = ""
    answer: str = ""
    offered_tools: list[str] = field(default_factory=list)
    outcome: SpecialistOutcome | None = None
    plan_result: PlanResult | None = None
    consolidation: dict[str, Any] | None = None
    guardrails: dict[str, Any] = field(default_factory=dict)
    judges: dict[str, Any] = field(default_factory=dict)
    review: dict[str, Any] = field(default_factory=dict)
    trace: list[dict[str, Any]] = field(default_factory=list)
    conversation_pk: int | None = None

    def metadata(self) -> dict[str, Any]:
        decision = self.decision
        return {
            "mode": self.mode,
            "route": decision.route if decision else "",
            "intent": decision.intent if decision else "",
            "route_decision": decision.as_dict() if decision else None,
            "mcp_tools": self.offered_tools,
            "mcp_results": self.mcp_results(),
            "guardrails": self.guardrails,
            "judges": self.judges,
            "review": self.review,
            "handoffs": [],
            "flags": {},
            "llm": self.outcome.llm if self.outcome else ("openai" if llm_configured() else "offline"),
            "model": self.outcome.describe() if self.outcome else None,
            "prompt_version": self._prompt_version(),
            "supervisor": [partial.describe() for partial in self.plan_result.partials] if self.plan_result else None,
            "review_rounds": self.plan_result.rounds if self.plan_result else [],
            "consolidation": self.consolidation,
            "trace": self.trace,
        }

    def mcp_results(self) -> list[dict[str, Any]]:
        """The turn's tool calls as stored and shown: personal data and secrets redacted."""
        results = (
            self.plan_result.tool_results() if self.plan_result else self.outcome.tool_results if self.outcome else []
        )
        return [self.vault.redact(result.as_dict()) for result in results]

    def _prompt_version(self) -> int | None:
        specialist = self.input.profile.specialists.get(self.agent)
        return specialist.prompt_version if specialist else None


Node = Callable[[Turn], Awaitable[None]]


async def _timed(turn: Turn, name: str, node: Node) -> None:
    started = time.perf_counter()
    try:
        await node(turn)
    finally:
        turn.trace.append({"node": name, "ms": round((time.perf_counter() - started) * 1000, 3)})


# --- nodes ---------------------------------------------------------------------


async def input_guardrails(turn: Turn) -> None:
    """Size limit, blocked terms, and personal data masked before any model, log or trace sees it."""
    report = run_input_guardrails(
        turn.input.text.strip(),
        turn.input.profile.guardrails,
        turn.vault,
        default_max_input_chars=settings.MAX_INPUT_CHARS,
    )
    turn.blocked = report.blocked
    turn.sanitized_text = report.text_for_model
    turn.text_to_store = report.text_to_store
    turn.guardrails["input"] = report.as_dict()


async def routing_decision(turn: Turn) -> None:
    if turn.blocked:
        return
    turn.decision = await route_decide(
        profile=turn.input.profile,
        text=turn.sanitized_text,
        state=turn.state or None,
        active_agent=turn.active_agent,
        active_intent=turn.active_intent,
    )
    turn.agent = turn.decision.agent


def _specialist_request(
    turn: Turn, current: Snapshot, agent: str, intent_name: str, intent_tools
) -> SpecialistRequest | None:
    profile = turn.input.profile
    spec = profile.specialists.get(agent)
    if spec is None:
        return None
    intent = next((item for item in profile.intents if item.name == intent_name), None)
    tools = tools_for_turn(profile=profile, specialist=spec, intent_tools=list(intent_tools), all_tools=current.tools)
    return SpecialistRequest(
        profile=profile,
        specialist=spec,
        text=turn.sanitized_text,
        intent=intent_name,
        intent_description=intent.description if intent else "",
        history=turn.history,
        context=turn.input.context,
        model_context=turn.vault.mask_value(turn.input.context),
        tools=tools,
        servers=current.servers,
        unmask=turn.vault.unmask,
        mask=turn.vault.mask_value,
    )


async def specialist(turn: Turn) -> None:
    """The chosen specialist answers; for a supervisor plan, every planned specialist does, concurrently."""
    if turn.blocked:
        turn.answer = BLOCKED_ANSWER
        return
    decision = turn.decision
    current = turn.input.snapshot or await sync_to_async(snapshots.current)()
    if decision is not None and decision.is_plan:
        await _supervisor_agent(turn, current, decision.plan)
        return
    request = _specialist_request(
        turn, current, turn.agent, decision.intent if decision else "", decision.mcp_tools if decision else []
    )
    if request is None:
        turn.answer = NO_SPECIALIST_ANSWER
        return
    turn.offered_tools = [tool.name for tool in request.tools]
    turn.outcome = await specialist_run(request)
    turn.answer = turn.outcome.answer


async def _supervisor_agent(turn: Turn, current: Snapshot, steps: list[PlanStep]) -> None:
    """Run the plan, then the review loop (uncovered parts go on to their specialists), then consolidate."""
    steps = list(steps)

    async def run(batch: list[PlanStep], round_number: int) -> PlanResult:
        requests = {
            step.agent: _specialist_request(turn, current, step.agent, step.intent, step.mcp_tools) for step in batch
        }
        offered = {tool.name for request in requests.values() if request for tool in request.tools}
        turn.offered_tools = sorted({*turn.offered_tools, *offered})
        return await executor_for().run(
            batch,
            requests,
            timeout=settings.SUPERVISOR_SPECIALIST_TIMEOUT_SECONDS,
            round_number=round_number,
            vault=turn.vault,
        )

    async def uncovered(result: PlanResult) -> list[PlanStep]:
        missing = failed_steps(result, steps)
        if llm_configured():
            answered = {p.agent for p in result.latest() if p.status == "ok"}
            known = {step.agent for step in missing}
            for step in await llm_uncovered(profile=turn.input.profile, question=turn.sanitized_text, result=result):
                if step.agent not in answered and step.agent not in known:
                    steps.append(step)
                    missing.append(step)
                    known.add(step.agent)
        return missing

    result = await run(steps, 0)
    turn.plan_result = await review_loop(result, run=run, uncovered=uncovered, max_rounds=MAX_REVIEW_ROUNDS)
    turn.answer, turn.consolidation = await consolidate(
        turn.plan_result, profile=turn.input.profile, question=turn.sanitized_text
    )


def _tool_results(turn: Turn) -> list[dict[str, Any]]:
    results = turn.plan_result.tool_results() if turn.plan_result else turn.outcome.tool_results if turn.outcome else []
    return [result.as_dict() for result in results]


async def output_guardrails(turn: Turn) -> None:
    """No raw tool JSON, stack traces or personal data in the answer."""
    report = run_output_guardrails(turn.answer, turn.vault, _tool_results(turn), settings=turn.input.profile.guardrails)
    turn.answer = report.answer
    turn.guardrails["output"] = report.as_dict()


async def judge(turn: Turn) -> None:
    """Rule-based judge always; the LLM judge when the profile asks for it and a model is configured."""
    judges = turn.input.profile.judges
    turn.judges = await judge_answer(
        question=turn.sanitized_text,
        answer=turn.answer,
        tool_results=_tool_results(turn),
        settings=judges,
        boilerplate=(ERROR_ANSWER, BLOCKED_ANSWER, NO_SPECIALIST_ANSWER, REVIEW_FALLBACK_ANSWER),
        ask=judge_asker(turn.input.profile) if judges.get("llm_judge") else None,
    )


async def supervisor_review(turn: Turn) -> None:
    """Replace an answer that failed the judges with a safe fallback (when the profile allows)."""
    turn.review = review_decision(turn.judges, turn.input.profile.judges)
    if turn.review.get("action") == "replace":
        turn.review["replaced_answer_chars"] = len(turn.answer)
        turn.answer = REVIEW_FALLBACK_ANSWER


async def persist(turn: Turn) -> None:
    turn.conversation_pk = await sync_to_async(_persist)(turn)


NODES: tuple[tuple[str, Node], ...] = (
    ("input_guardrails", input_guardrails),
    ("routing_decision", routing_decision),
    ("specialist", specialist),
    ("output_guardrails", output_guardrails),
    ("judge", judge),
    ("supervisor_review", supervisor_review),
    ("persist", persist),
)


# --- database edges --------------------------------------------------------------


def _load_conversation(turn: Turn) -> None:
    """Read the conversation's state and recent history, then give the connection back.

    The model call that follows takes seconds; a connection held across it (this
    request thread's, opened by authentication) would make every chat in flight
    hold one, and 200 of them exceed PostgreSQL's connections. Closed, it goes
    back to the pool (``DATABASE_POOL``) and ``_persist`` takes one again. Inside
    an atomic block (a test's transaction) the connection is left alone.
    """
    try:
        row = (
            Conversation.objects.filter(conversation_key=turn.input.conversation_key)
            .values("pk", "state", "active_specialist", "active_intent")
            .first()
        )
        if row is None:
            return
        turn.conversation_pk = row["pk"]
        turn.state = row["state"]
        turn.active_agent = row["active_specialist"]
        turn.active_intent = row["active_intent"]
        limit = settings.CONVERSATION_HISTORY_LIMIT
        recent = list(
            Message.objects.filter(conversation_id=row["pk"], role__in=[MessageRole.USER, MessageRole.ASSISTANT])
            .order_by("-created_at", "-id")
            .values_list("role", "content")[:limit]
        )
        turn.history = tuple(reversed(recent))
    finally:
        if not connection.in_atomic_block:
            connection.close()


def _persist(turn: Turn) -> int:
    """Write the whole turn in one transaction; the conversation row is locked only here.

    The connection goes back to the pool as soon as the transaction ends, not
    when the response has been sent (see :func:`_load_conversation`).
    """
    data = turn.input
    decision = turn.decision
    try:
        with transaction.atomic():
            conversation, _ = Conversation.objects.select_for_update().get_or_create(
                conversation_key=data.conversation_key,
                defaults={
                    "tenant_id": data.tenant_pk,
                    "profile_id": data.profile.pk,
                    "session_id": data.session_id,
                    "user_id": data.user_id,
                    "channel": data.channel,
                },
            )
            # The turn's messages in one insert, in reading order: the user's, each specialist's part of a
            # supervisor turn (role "agent", step = round + 1), the answer. PostgreSQL and SQLite return ids in order.
            parts = [
                Message(
                    conversation=conversation,
                    role=MessageRole.AGENT,
                    agent=partial.agent,
                    content=turn.vault.redact(partial.answer) or GAP_TEXT.format(reason=partial.status),
                    step=partial.round + 1,
                    metadata={"intent": partial.intent, "status": partial.status, "error": partial.error},
                )
                for partial in (turn.plan_result.partials if turn.plan_result else [])
            ]
            created = Message.objects.bulk_create(
                [
                    Message(
                        conversation=conversation,
                        role=MessageRole.USER,
                        content=turn.text_to_store,
                        metadata={"channel": data.channel, "user_id": data.user_id},
                    ),
                    *parts,
                    Message(
                        conversation=conversation,
                        role=MessageRole.ASSISTANT,
                        agent=turn.agent,
                        content=turn.answer,
                        metadata=turn.metadata(),
                    ),
                ]
            )
            user_message, answer = created[0], created[-1]
            if decision is not None:
                RouteDecisionRecord.objects.create(
                    conversation=conversation,
                    message=user_message,
                    mode=turn.mode,
                    route=decision.route,
                    agent=decision.agent,
                    intent=decision.intent,
                    confidence=decision.confidence,
                    reason=decision.reason,
                    method=decision.method,
                    next_state=decision.next_state or "",
                    handoff=decision.handoff,
                    domain=decision.domain or "",
                    mcp_tools=decision.mcp_tools,
                    metadata=decision.metadata,
                )
            results = turn.mcp_results()
            if results:
                ToolCall.objects.bulk_create(
                    ToolCall(
                        conversation=conversation,
                        message=answer,
                        agent=turn.agent,
                        tool=result["tool"],
                        server=result["server"],
                        arguments=result["arguments"],
                        status=result["status"],
                        latency_ms=result["latency_ms"],
                        result=result["result"],
                        error=result["error"] or "",
                    )
                    for result in results
                )
            updates: dict[str, Any] = {"message_count": F("message_count") + len(created)}
            if decision is not None:
                updates["state"] = decision.next_state or ""
                updates["active_specialist"] = decision.agents[0] if decision.agents else decision.agent
                updates["active_intent"] = decision.plan[0].intent if decision.plan else decision.intent
            Conversation.objects.filter(pk=conversation.pk).update(**updates)
            if decision is not None and decision.handoff:
                handoff_record(
                    conversation=conversation,
                    from_agent=turn.active_agent,
                    to_agent=decision.agent,
                    kind=HandoffKind.ROUTING,
                    reason=decision.reason,
                )
            for partial in turn.plan_result.partials if turn.plan_result else []:
                handoff_record(
                    conversation=conversation,
                    from_agent=SUPERVISOR_ROUTE,
                    to_agent=partial.agent,
                    kind=HandoffKind.FANOUT,
                    reason=f"{partial.intent}: {partial.status}" + (f" ({partial.error})" if partial.error else ""),
                    context_summary=decision.reason if decision else "",
                )
        return conversation.pk
    finally:
        if not connection.in_atomic_block:
            connection.close()


# --- entry point -------------------------------------------------------------------


@dataclass(frozen=True)
class TurnResult:
    answer: str
    agent: str
    conversation_key: str
    metadata: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "agent": self.agent,
            "conversation_key": self.conversation_key,
            "metadata": self.metadata,
        }


def new_session_id() -> str:
    return uuid.uuid4().hex


async def run_turn(data: TurnInput) -> TurnResult:
    """Run one user message through the graph and persist it; never raises for model failures."""
    turn = Turn(input=data, mode=data.profile.effective_mode)
    await sync_to_async(_load_conversation)(turn)
    for name, node in NODES:
        await _timed(turn, turn.agent if name == "specialist" and turn.agent else name, node)
    return TurnResult(
        answer=turn.answer,
        agent=turn.agent,
        conversation_key=data.conversation_key,
        metadata=turn.metadata(),
    )
