"""What one turn knows: the message as it came in (:class:`TurnInput`), and what every stage of one pass through the
graph shares (:class:`Turn`) beside the parts its features own, each defined in the feature's module.

The graph's nodes (:mod:`conversations.graph`), goal mode's nodes (:mod:`conversations.goals.turn`) and the faces
take and fill these; they live here, below all of them, so a helper that takes a turn need not import the pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from django.conf import settings

from agents.public import KIND_ANSWER, Generation, TurnUsage, llm_configured
from common.events import Emit
from common.sizes import json_size, limit_hit
from conversations.chain_part import TurnChain
from conversations.desk.escalations import escalation_public
from conversations.escalation import TurnEscalation
from conversations.gateway import TurnBackend
from conversations.goals.part import GoalTurn
from conversations.guardrails import TurnGuardrails, identifier_pseudonym
from conversations.history import HistoryEntry
from conversations.knowledge_turn import knowledge_merged
from conversations.language import TurnLanguage
from conversations.memory.part import TurnMemory
from conversations.route_part import TurnRoute
from conversations.stack_part import TurnStack
from conversations.store_part import TurnStore
from conversations.supervisor import PlanResult, TurnSupervision
from handoffs.models import HandoffKind
from handoffs.public import Move
from routing.public import SUPERVISOR_ROUTE, ProfileSpec, RouteDecision, Snapshot

# The limits the graph sets on what reaches the customer (metadata.limits): a tool's output, the answer, the answer
# with its metadata (the response the faces return and the stored message).
LIMIT_TOOL_OUTPUT, LIMIT_ANSWER, LIMIT_RESPONSE = "tool_output", "answer_chars", "response_bytes"
LIMIT_TOOL_RESPONSE = "tool_response"  # a server's answer on the wire, not read
LIMIT_MAX_TOKENS = "max_tokens"  # the client's own limit on the answer (agents.generation), a request parameter


@dataclass(frozen=True)
class TurnInput:
    """A validated user message. ``tenant_id`` is the key's tenant, never the body's."""

    tenant_pk: int
    tenant_slug: str
    profile: ProfileSpec
    text: str
    session_id: str = ""
    # The session id was made for this message (none was given): its conversation does not exist yet, and the
    # ticket's take begins by creating it.
    session_new: bool = False
    user_id: str = ""
    channel: str = "api"
    context: dict[str, Any] = field(default_factory=dict)
    snapshot: Snapshot | None = None
    # The rollout: the single-agent path (no plan, no handoffs, no delegation), the flags evaluated for this
    # message (shown in metadata.flags) and the cohort they put the message in ("" when no flag decided).
    single_agent: bool = False
    flags: dict[str, Any] = field(default_factory=dict)
    cohort: str = ""
    language: str = ""  # the channel's (conversations.language.language_asked): wins over the conversation's
    language_hint: str = ""  # the client's Accept-Language: a guess when neither the words nor the conversation tell
    client_metadata: dict[str, str] = field(default_factory=dict)  # the client's own (the OpenAI faces' metadata)
    # The scheme://host the client reached: the links the turn writes point there (agents.mcp.AttachmentScope);
    # "" (the chat page's WebSocket) → paths on the page's own origin.
    origin: str = ""
    # A streaming client's event sink (common.events); None for the JSON API.
    emit: Emit | None = field(default=None, compare=False, repr=False)
    # The deployments this message crossed before this one (the X-Gateway-Hops header; conversations/gateway.py).
    hops: int = 0
    # How the client asked the answer written (agents.generation), and its instructions for this answer (a system
    # note to the specialists, INSTRUCTIONS_NOTE); neither is stored.
    generation: Generation | None = None
    instructions: str = ""
    # The Idempotency-Key's row (conversations.models.IdempotentRequest) the request holds: the transaction that
    # persists the turn records its result there, and persists nothing when the row was taken over meanwhile.
    idempotency_claim: int | None = None

    @property
    def conversation_key(self) -> str:
        return f"{self.tenant_slug}:{self.profile.agent_id}:{self.session_id}"

    @cached_property
    def stored_user_id(self) -> str:
        """The user id the store keeps: a keyed pseudonym when the client's id is personal data (an e-mail, phone,
        CPF; the OpenAI ``user`` field too), else the id itself (:func:`conversations.guardrails.identifier_pseudonym`).
        Made once per input: a turn reads it four times (the conversation's row, the customer's facts, memory, the
        turn's record), each a scan of the id for personal data."""
        return identifier_pseudonym(self.user_id, key=settings.SECRET_KEY) if self.user_id else ""


@dataclass(frozen=True)
class TurnResult:
    answer: str
    agent: str
    conversation_key: str
    metadata: dict[str, Any]
    message_id: int | None = None  # the stored answer: what POST /api/sessions/{key}/feedback rates
    conversation_pk: int | None = None
    # The conversation's state as the turn stored it (None: the turn stored nothing); not in the faces' answer.
    state: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The answer as every face returns it: the JSON routes' body, the SSE and WebSocket ``done`` event."""
        return {
            "answer": self.answer,
            "agent": self.agent,
            "conversation_key": self.conversation_key,
            "message_id": self.message_id,
            "metadata": self.metadata,
        }

    def recorded(self) -> dict[str, Any]:
        """What the persisting transaction keeps of it for an ``Idempotency-Key`` (:meth:`from_recorded`)."""
        return {**self.as_dict(), "conversation_pk": self.conversation_pk}

    @classmethod
    def from_recorded(cls, recorded: dict[str, Any]) -> TurnResult:
        return cls(**recorded)


class ClaimTakenOver(Exception):
    """The request's ``Idempotency-Key`` was taken over by a retry while its turn ran (it outlived the turn lease):
    the retry's turn answers, this one persisted nothing."""


@dataclass
class Turn:
    """What every stage of one pass through the graph shares, and the parts its features own: each part is defined
    in its feature's module, which does not import this one (docs/architecture.md, "The turn")."""

    input: TurnInput
    mode: str
    history: tuple[HistoryEntry, ...] = ()
    decision: RouteDecision | None = None
    agent: str = ""
    answer: str = ""
    trace: list[dict[str, Any]] = field(default_factory=list)
    limits: list[dict[str, Any]] = field(default_factory=list)  # the answer's and the response's limits that bit
    model_calls: TurnUsage = field(default_factory=TurnUsage)  # calls recorded by agents.usage (not specialists')
    # The parts.
    route: TurnRoute = field(default_factory=TurnRoute)  # the conversation's state and specialist, before and after
    guardrails: TurnGuardrails = field(default_factory=TurnGuardrails)  # the message masked, blocked; the reports
    stack: TurnStack = field(default_factory=TurnStack)  # the conversation's frames and live state, as loaded
    chain: TurnChain = field(default_factory=TurnChain)  # the specialists that ran, their moves, the answering one
    supervisor: TurnSupervision = field(default_factory=TurnSupervision)  # a plan's parts, the judges, the review
    goal: GoalTurn | None = None  # goal mode's decision, plan run and combined output
    escalation: TurnEscalation = field(default_factory=TurnEscalation)  # people in the loop
    backend: TurnBackend = field(default_factory=TurnBackend)  # the gateway's move and hop
    language: TurnLanguage = field(default_factory=TurnLanguage)  # the turn's, and the conversation's kept one
    memory: TurnMemory = field(default_factory=TurnMemory)  # the summary and the customer's facts (docs/memory.md)
    store: TurnStore = field(default_factory=TurnStore)  # the ticket, the stored ids, the row as the turn found it

    def all_moves(self) -> list[Move]:
        """Every move this turn records, in order: the router's handoff, a plan's fan-out, the chain's moves."""
        moves: list[Move] = []
        decision = self.decision
        if decision is not None and decision.handoff:
            routed = Move(self.route.active_agent, decision.agent, HandoffKind.ROUTING, reason=decision.reason)
            moves.append(self.backend.move or routed)
        for partial in self.supervisor.parts():
            moves.append(
                Move(
                    SUPERVISOR_ROUTE,
                    partial.agent,
                    HandoffKind.FANOUT,
                    reason=f"{partial.intent}: {partial.status}" + (f" ({partial.error})" if partial.error else ""),
                    context_summary=decision.reason if decision else "",
                )
            )
        return moves + self.chain.moves + ([self.escalation.person_move] if self.escalation.person_move else [])

    def usage(self) -> TurnUsage:
        """Every model call of the turn: the specialists' runs and a plan's parts (from workers too) as kind
        ``answer``, and the calls recorded meanwhile (routing, synthesis, review, judge, goal)."""
        runs = [outcome for _, outcome in self.chain.runs]
        runs += [part.outcome for part in self.supervisor.parts() if part.outcome]
        usage = TurnUsage()
        for run in runs:
            usage.add(KIND_ANSWER, run.model, run.prompt_tokens, run.completion_tokens, run.steps)
        return usage.merged(self.model_calls)

    def tool_results(self) -> list[Any]:
        if self.supervisor.plan_result:
            return self.supervisor.plan_result.tool_results()
        if self.goal is not None and self.goal.run is not None:
            return self.goal.tool_results()
        reviewed = self.supervisor.reviewed.tool_results() if self.supervisor.reviewed else []
        return [result for _, outcome in self.chain.runs for result in outcome.tool_results] + reviewed

    def limits_bitten(self) -> list[dict[str, Any]]:
        """Every limit of the platform that bit in this turn: the goal plan's, the servers' answers not read
        (``MCP_RESPONSE_MAX_BYTES``) and the tool outputs cut (``MCP_TOOL_OUTPUT_MAX_BYTES``: the largest asked, how
        many calls), the answer's and the response's."""
        hits = self.goal.limits() if self.goal is not None else []
        results = self.tool_results()
        refused = [result for result in results if getattr(result, "refused", 0)]
        if refused:
            largest_answer = max(result.refused for result in refused)
            limit = settings.MCP_RESPONSE_MAX_BYTES
            hits.append(
                limit_hit(LIMIT_TOOL_RESPONSE, "MCP_RESPONSE_MAX_BYTES", limit, largest_answer, 0, calls=len(refused))
            )
        cut = [result for result in results if getattr(result, "cut", 0)]
        if cut:
            largest = max(cut, key=lambda result: result.cut)
            limit = settings.MCP_TOOL_OUTPUT_MAX_BYTES
            hits.append(
                limit_hit(
                    LIMIT_TOOL_OUTPUT,
                    "MCP_TOOL_OUTPUT_MAX_BYTES",
                    limit,
                    largest.cut,
                    json_size(largest.result),
                    calls=len(cut),
                )
            )
        return hits + self.limits

    def result(self) -> TurnResult:
        """What the faces answer: the metadata built once, for the stored answer (its trace is the turn's own list,
        which gets the persisting step's time after it)."""
        return TurnResult(
            answer=self.answer,
            agent=self.agent,
            conversation_key=self.input.conversation_key,
            metadata=self.store.metadata if self.store.metadata is not None else self.metadata(),
            message_id=self.store.answer_message_id,
            conversation_pk=self.store.conversation_pk or None,
            state=self.store.state,
        )

    def metadata(self) -> dict[str, Any]:
        decision = self.decision
        limits = self.limits_bitten()
        goal = self.goal.metadata() if self.goal else None
        if goal is not None:
            goal["limits"] = limits
        return {
            "mode": self.mode,
            # The released version that answered; "draft": an editor tried the draft of a published profile
            # (chat.drafts); None: a profile never published, whose draft customers are served too.
            "version": "draft"
            if self.input.profile.version is None
            and self.input.profile.agent_id in getattr(self.input.snapshot, "released", {})
            else self.input.profile.version,
            "rollout": self.store.rollout,
            "route": decision.route if decision else "",
            "intent": decision.intent if decision else "",
            "route_decision": decision.as_dict() if decision else None,
            "mcp_tools": self.chain.offered_tools,
            "mcp_results": self.mcp_results(),
            "guardrails": self.guardrails.report,
            "judges": self.supervisor.judges,
            "review": self.supervisor.review,
            "handoffs": [move.as_dict() for move in self.all_moves()],
            "agents": [agent for agent, _ in self.chain.runs],
            "turn": self.store.ticket + 1,  # the message's place in its conversation, in arrival order
            "language": self.language.code,
            "permission": self.stack.permission,
            "granted_permissions": list(self.stack.granted),
            "sub_conversation": self.stack.sub_conversation,
            "flags": self.input.flags,
            "cohort": self.input.cohort,
            "llm": self.chain.outcome.llm
            if self.chain.outcome
            else ("openai" if llm_configured(self.input.profile) else "offline"),
            "model": self.chain.outcome.describe() if self.chain.outcome else None,
            "prompt_version": self._prompt_version(),
            "supervisor": [partial.describe() for partial in self.supervisor.plan_result.partials]
            if self.supervisor.plan_result
            else None,
            "review_rounds": (self.supervisor.plan_result or self.supervisor.reviewed or PlanResult()).rounds,
            "consolidation": self.supervisor.consolidation,
            "goal": goal,
            "conversation": self.stack.metadata(by=self.route.final_intent or self.agent),
            "backend": self.backend.reply.metadata() if self.backend.reply else None,
            "escalation": self.escalation_metadata(),
            "usage": self.usage().as_dict(),
            "memory": self.memory.metadata(),
            "knowledge": self.knowledge_metadata(),
            "limits": limits,
            "trace": self.trace,
        }

    def escalation_metadata(self) -> dict[str, Any] | None:
        """``metadata.escalation``: the escalation this turn opened, or the one a person holds the conversation
        under (``status``, ``queue``, ``position`` in line, ``reason``, …); ``None`` when the assistants answer."""
        escalation = self.escalation.opened or self.escalation.held
        return escalation_public(escalation, position=self.escalation.position) if escalation is not None else None

    def knowledge_metadata(self) -> dict[str, Any] | None:
        """``metadata.knowledge``: what the answering specialist (or a plan's parts) retrieved and cited
        (:mod:`conversations.knowledge_turn`); ``None`` when no run searched the knowledge."""
        answering = self.chain.outcome
        runs = [answering] if answering is not None else []
        runs += [part.outcome for part in self.supervisor.parts() if part.outcome and part.outcome is not answering]
        return knowledge_merged(run.knowledge for run in runs)

    def knowledge_unknown(self) -> bool:
        """The answer is "I don't know": no passage reached the bar and no tool answered."""
        return bool((self.knowledge_metadata() or {}).get("unknown"))

    def mcp_results(self) -> list[dict[str, Any]]:
        """The turn's tool calls as stored and shown: personal data and secrets redacted."""
        return [self.guardrails.vault.redact(result.as_dict()) for result in self.tool_results()]

    def _prompt_version(self) -> int | None:
        specialist = self.input.profile.specialists.get(self.agent)
        return specialist.prompt_version if specialist else None
