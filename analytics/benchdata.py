"""Bench data for the analytics: conversations as the platform stores them, down to the agent_handoffs rows.

``manage.py generate_handoffs`` calls :func:`bench_data_generate` and
:func:`bench_data_clear`. The data is simulated turn by turn against the demo
profiles' compiled configuration (``routing.snapshot``): the decisions are
the compiled router's own (its reasons, confidences, tools, next states), the
moves follow the graph's rules (a routing handoff when the routed specialist
differs from the active one, delegations and returns under a coordinator, a
supervisor plan's fan-out, loop-safety stops checked by
``handoffs.safety.move_check``), and each turn writes the rows that
``conversations.graph._persist`` writes: the user's message, system notes, a
supervisor's parts, the answer (with its latency and judge score), one route
decision, the tool calls and the moves.

Only bench tenants (``bench_tenant_N``) get data. Everything comes from one
``random.Random(seed)``, so a seed and an ``until`` give the same rows; the
batch size changes only how they are written. On PostgreSQL the rows go in
with ``COPY``; elsewhere with ``executemany``.
"""

from __future__ import annotations

import io
import json
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.db.models import CASCADE, QuerySet

from agents.models import AgentProfile
from analytics.rollups import FACTS
from analytics.services import rollup_build
from conversations.models import (
    Conversation,
    Message,
    MessageRole,
    RouteDecisionRecord,
    ToolCall,
    ToolCallStatus,
)
from handoffs.models import Handoff, HandoffKind, HandoffStatus
from handoffs.safety import REFUSED_NOT_ALLOWED, STOP_STEP_LIMIT, move_check, stop_summary
from handoffs.services import moves_kinds
from routing import snapshot
from routing.rollout import bucket
from routing.router import SUPERVISOR_ROUTE, RouteDecision
from tenants.models import Tenant
from tenants.services import tenant_get_or_create

BENCH_TENANT_PREFIX = "bench_tenant_"
DEMO_PROFILES = ("telecom_contas", "retail_orders", "telecom_assistente")
ERROR_ALREADY_GENERATED = (
    "Conversations of this --seed are already stored (the same seed draws the same conversation keys): "
    "add --clear, or pick another --seed."
)
MULTI_AGENT_FLAG = "multi_agent"
MULTI_AGENT_PERCENTAGE = 70  # the multi_agent flag's rollout: 70 % of users on the multi-agent graph

# Share of conversations per profile, and where a router profile's conversations start.
PROFILE_WEIGHTS = {"telecom_contas": 0.5, "retail_orders": 0.3, "telecom_assistente": 0.2}
START_WEIGHTS = {"billing_agent": 0.42, "orders_agent": 0.25, "support_agent": 0.18, "product_agent": 0.15}
# Where a customer goes next when they change the subject: invoice → order is the common story.
SWITCH_WEIGHTS = {
    "billing_agent": {"orders_agent": 10, "product_agent": 4, "support_agent": 3},
    "orders_agent": {"billing_agent": 5, "support_agent": 4, "product_agent": 1},
    "product_agent": {"billing_agent": 3, "orders_agent": 2, "support_agent": 1},
    "support_agent": {"billing_agent": 4, "orders_agent": 3, "product_agent": 1},
}
# Intents that set a state are asked for often enough that state decisions make about 10 % of a router's.
INTENT_WEIGHTS = {"billing_payment_request": 1.6, "retail_order_cancellation": 2.2}
STAY_ON_TOPIC = 0.55
# A router profile's decision when no state policy applies (state ≈ 10 % comes on top, from the states).
METHOD_WEIGHTS = {"keyword": 0.78, "llm": 0.09, "fallback": 0.13}
TURN_WEIGHTS = (22, 20, 17, 13, 10, 8, 6, 4)  # 1..8 turns; mean ≈ 3.4

# Moves inside a turn (multi-agent router turns), as cumulative thresholds of one draw.
CHAIN_EVENTS = (
    (0.085, "handoff"),
    (0.095, "ping_pong"),
    (0.098, "handoff_limit"),
    (0.104, "refused"),
    (0.111, "step_limit"),
)
LOOPING_CONVERSATIONS = 0.006  # customer and specialists keep sending each other back: path_repeated
SUPERVISOR_PLAN_SHARE = 0.15  # turns of telecom_contas that hit several specialists while it ran in supervisor mode
# A delegated specialist's next message: keeps talking, closes, needs follow-up, or is out of its scope.
SUB_EVENTS = ((0.35, "followup"), (0.75, "completed"), (0.78, "needs_followup"), (0.80, "cannot_resolve"))
DELEGATE_SHARE = 0.78  # coordinator turns that delegate (the rest are greetings it answers itself)
TOOL_CALL_SHARE = 0.45
TOOL_STATUSES = (
    (0.950, ToolCallStatus.OK),
    (0.975, ToolCallStatus.ERROR),
    (0.990, ToolCallStatus.TIMEOUT),
    (0.997, ToolCallStatus.UNAVAILABLE),
    (1.000, ToolCallStatus.INVALID),
)
UNKNOWN_TARGETS = ("retention_agent", "human_agent", "financial_agent")
CHANNELS = (("web", 0.55), ("whatsapp", 0.35), ("api", 0.10))

# Texts. Keyword and classifier texts are checked against each profile's compiled router when the
# catalogue is built, so a text routed "by keyword" does hit that intent's keywords and one sent to
# the classifier hits none.
CLASSIFIER_TEXTS = {
    "billing_agent": ("Cobraram a mais de mim esse mês", "Quanto eu tenho que pagar?", "Caiu um valor estranho"),
    "orders_agent": ("Cadê o modem que comprei semana passada?", "Comprei um chip e não chegou ainda"),
    "product_agent": ("Vocês têm alguma opção com mais gigas?", "Quero algo melhor pro meu celular"),
    "support_agent": ("Meu aparelho quebrou", "O modem fica piscando vermelho", "A tela do celular apagou"),
}
VAGUE_TEXTS = ("Oi", "Olá, bom dia", "Preciso de ajuda", "Quero falar com um atendente", "Boa tarde!", "Hello")
STATE_REPLIES = ("sim", "ok", "já paguei", "sim, pode seguir", "não", "ok, paguei agora")
FOLLOWUPS = ("e quando vence?", "qual o prazo?", "pode repetir?", "e agora?", "certo, e depois?", "entendi")
CLOSINGS = ("obrigado", "valeu, era só isso", "resolvido, obrigada", "obrigada!", "thanks")
PERMISSION_YES, PERMISSION_NO = ("sim", "pode", "ok, pode"), ("não", "prefiro não")
GREETING_ANSWER = "Olá! Posso ajudar com sua fatura, um pedido ou suporte técnico. Como posso ajudar?"
ANSWERS = (
    "Certo! Verifiquei aqui: {subject}. Posso ajudar em mais alguma coisa?",
    "Entendi. Sobre {subject}, o próximo passo é o que descrevi acima; qualquer dúvida, estou por aqui.",
    "Pronto: {subject}. Se precisar, envio os detalhes por e-mail.",
)
GOODBYE = "Que bom que ajudou! Se precisar de algo mais, é só chamar."
PERMISSION_QUESTION = (
    "Para seguir preciso da sua autorização para usar {tool}. Posso prosseguir? "
    'Responda "sim" para autorizar ou "não" para continuar sem isso.'
)


# json.dumps(ensure_ascii=False) builds an encoder on every call; this one is built once.
_encode = json.JSONEncoder(ensure_ascii=False).encode


# --- the catalogue: each demo profile's routing, compiled once ---------------------------


@dataclass
class Decision:
    """A routing decision ready to store, with its JSON columns encoded once."""

    route: str
    agent: str
    intent: str
    confidence: float
    reason: str
    method: str
    next_state: str
    domain: str
    mcp_tools: tuple[str, ...]
    metadata: dict[str, Any]
    plan: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # a supervisor plan: (agent, intent, tools)
    metadata_json: str = ""  # the catalogue's decisions are encoded once; "" = encode when stored

    @classmethod
    def of(cls, decision: RouteDecision) -> Decision:
        return cls(
            route=decision.route,
            agent=decision.agent,
            intent=decision.intent,
            confidence=decision.confidence,
            reason=decision.reason,
            method=decision.method,
            next_state=decision.next_state or "",
            domain=decision.domain or "",
            mcp_tools=tuple(decision.mcp_tools),
            metadata=dict(decision.metadata),
            plan=tuple((step.agent, step.intent, tuple(step.mcp_tools)) for step in decision.plan or ()),
            metadata_json=_encode(decision.metadata),
        )


@dataclass
class ProfileCatalogue:
    """What the simulation needs of one profile: specialists, intents and texts with their decisions."""

    spec: snapshot.ProfileSpec
    by_keyword: dict[str, list[tuple[str, Decision]]] = field(default_factory=dict)  # specialist → (text, decision)
    by_classifier: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # specialist → (text, intent)
    plans: list[tuple[str, Decision]] = field(default_factory=list)
    state_intent: dict[str, str] = field(default_factory=dict)  # intent → the state it sets

    @property
    def agent_id(self) -> str:
        return self.spec.agent_id

    @property
    def delegation(self) -> bool:
        return bool(self.spec.coordinator)

    def specialists(self) -> list[str]:
        return [name for name in self.spec.specialists if name != self.spec.coordinator]


def _catalogue(spec: snapshot.ProfileSpec) -> ProfileCatalogue:
    router = spec.router
    found = ProfileCatalogue(spec=spec)
    openings = ("", "Oi, ", "Bom dia! ", "Olá, ")
    for intent in spec.intents:
        if intent.next_state:
            found.state_intent[intent.name] = intent.next_state
        texts = list(intent.examples) + [f"Tenho uma dúvida: {keyword}" for keyword in intent.keywords]
        weight = max(1, round(INTENT_WEIGHTS.get(intent.name, 1.0) * 4))
        for text in texts:
            decision = router.by_keywords(text)
            if decision is not None and decision.intent == intent.name:
                entries = [
                    (opening + (text[0].lower() + text[1:] if opening else text), Decision.of(decision))
                    for opening in openings
                ]
                found.by_keyword.setdefault(intent.agent, []).extend(entries * weight)
    for agent, texts in CLASSIFIER_TEXTS.items():
        intent = next((i for i in sorted(spec.intents, key=lambda i: i.priority) if i.agent == agent), None)
        if intent is not None:
            found.by_classifier[agent] = [(text, intent.name) for text in texts if not router.match(text)]
    agents = sorted(found.by_keyword)
    for first in agents:
        for second in agents:
            if first < second:
                text = f"{found.by_keyword[first][0][0]} e também {found.by_keyword[second][0][0].lower()}"
                decision = router.by_plan(text)
                if decision is not None and decision.plan:
                    found.plans.append((text, Decision.of(decision)))
    return found


def _demo_profiles() -> list[ProfileCatalogue]:
    if AgentProfile.objects.filter(agent_id__in=DEMO_PROFILES).count() < len(DEMO_PROFILES):
        call_command("seed_demo", verbosity=0, stdout=io.StringIO())
    snapshot.invalidate()
    current = snapshot.current()
    missing = [agent_id for agent_id in DEMO_PROFILES if agent_id not in current.profiles]
    if missing:
        raise BenchDataError(f"Demo profiles not enabled: {', '.join(missing)}.")
    return [_catalogue(current.profiles[agent_id]) for agent_id in DEMO_PROFILES]


def _tool_servers() -> dict[str, str]:
    return {name: tool.server for name, tool in snapshot.current().tools.items()}


class BenchDataError(RuntimeError):
    """The bench data cannot be generated as asked; the message says why."""


# --- the rows of one batch ---------------------------------------------------------------
# Conversations and messages carry ids (others point at them), as offsets within the batch until the
# batch reserves its ids; decisions, tool calls and handoffs get theirs from the database.

CONVERSATION_FIELDS = (
    "id",
    "tenant_id",
    "profile_id",
    "session_id",
    "conversation_key",
    "user_id",
    "channel",
    "state",
    "active_specialist",
    "active_intent",
    "sub_conversation",
    "pending_result",
    "pending_permission",
    "granted_permissions",
    "turn_tickets_issued",
    "turn_tickets_done",
    "turn_started_at",
    "ended_at",
    "message_count",
    "cohort",
    "created_at",
    "updated_at",
    "handoff_kinds",
)
MESSAGE_FIELDS = (
    "id",
    "conversation_id",
    "role",
    "agent",
    "content",
    "metadata",
    "step",
    "cohort",
    "latency_ms",
    "judge_score",
    "created_at",
)
DECISION_FIELDS = (
    "conversation_id",
    "message_id",
    "mode",
    "route",
    "agent",
    "intent",
    "confidence",
    "reason",
    "method",
    "next_state",
    "handoff",
    "domain",
    "mcp_tools",
    "metadata",
    "created_at",
)
TOOL_CALL_FIELDS = (
    "conversation_id",
    "message_id",
    "agent",
    "tool",
    "server",
    "arguments",
    "status",
    "latency_ms",
    "result",
    "error",
    "created_at",
)
HANDOFF_FIELDS = (
    "conversation_id",
    "tenant_id",
    "profile_id",
    "from_agent",
    "to_agent",
    "kind",
    "status",
    "reason",
    "context_summary",
    "outcome",
    "created_at",
    "cohort",
)


@dataclass
class Batch:
    conversations: list[list[Any]] = field(default_factory=list)
    messages: list[list[Any]] = field(default_factory=list)
    decisions: list[list[Any]] = field(default_factory=list)
    tool_calls: list[list[Any]] = field(default_factory=list)
    handoffs: list[list[Any]] = field(default_factory=list)


@dataclass
class GenerateReport:
    handoffs: int = 0
    conversations: int = 0
    messages: int = 0
    decisions: int = 0
    tool_calls: int = 0
    seconds: float = 0.0
    kinds: Counter = field(default_factory=Counter)
    outcomes: Counter = field(default_factory=Counter)
    methods: Counter = field(default_factory=Counter)
    cohorts: Counter = field(default_factory=Counter)
    days_summed: int = 0
    rollup_seconds: float = 0.0
    tool_statuses: Counter = field(default_factory=Counter)


# --- the simulation -------------------------------------------------------------------------


def _when(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


def _pick(rng: random.Random, weighted: dict[str, float]) -> str:
    return rng.choices(list(weighted), weights=list(weighted.values()))[0]


def _threshold(draw: float, table: Sequence[tuple[float, Any]], default: Any = None) -> Any:
    for limit, value in table:
        if draw < limit:
            return value
    return default


@dataclass
class _Move:
    from_agent: str
    to_agent: str
    kind: str
    status: str = HandoffStatus.COMPLETED
    reason: str = ""
    context_summary: str = ""
    outcome: str = ""

    def as_dict(self) -> dict[str, str]:
        return {
            "from_agent": self.from_agent,
            "to_agent": self.to_agent,
            "kind": self.kind,
            "status": self.status,
            "reason": self.reason,
            "context_summary": self.context_summary,
            "outcome": self.outcome,
        }


@dataclass
class _Turn:
    """One user message and everything its persist writes."""

    text: str
    decision: Decision
    mode: str
    agent: str = ""  # who answers
    answer: str = ""
    handoff: bool = False  # the decision's routing handoff flag
    moves: list[_Move] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)  # (agent, system note)
    parts: list[tuple[str, str, str]] = field(default_factory=list)  # supervisor: (agent, intent, answer)
    tools: list[tuple[str, str, str, float, str]] = field(default_factory=list)  # tool, server, status, ms, error
    agents: list[str] = field(default_factory=list)
    model_calls: int = 1
    quality: float = 0.0  # lowers the judge's score (fallbacks, stops)
    latency_ms: float = 0.0


@dataclass
class _Conversation:
    """A conversation's live state while its turns are simulated."""

    catalogue: ProfileCatalogue
    multi_agent: bool
    supervisor: bool  # the profile ran in supervisor mode when this conversation happened
    looping: tuple[str, str] | None  # (A, B): the router keeps sending the customer to A, A keeps handing to B
    state: str = ""
    active_agent: str = ""
    active_intent: str = ""
    topic: str = ""
    sub: dict[str, Any] | None = None
    pending_result: dict[str, Any] | None = None
    pending_permission: dict[str, Any] | None = None
    granted: list[str] = field(default_factory=list)
    paths: list[tuple[str, str]] = field(default_factory=list)  # completed agent handoffs, oldest first


class Simulator:
    """Draws conversations; every random choice comes from ``rng``, in a fixed order."""

    def __init__(
        self,
        *,
        rng: random.Random,
        catalogues: list[ProfileCatalogue],
        tool_servers: dict[str, str],
        tenants: list[Tenant],
        users_per_tenant: int,
        start: float,
        until: float,
    ) -> None:
        self.rng = rng
        self.catalogues = catalogues
        self.profile_weights = [PROFILE_WEIGHTS[c.agent_id] for c in catalogues]
        self.tool_servers = tool_servers
        self.tenants = tenants
        self.tenant_weights = [1 / (index + 1) for index in range(len(tenants))]
        self.users_per_tenant = users_per_tenant
        self.start, self.until = start, until
        self.supervisor_from = until - (until - start) / 3  # telecom_contas ran in supervisor mode lately

    # -- time ------------------------------------------------------------------------

    def _arrival(self) -> float:
        """A moment of the range, with a daily rhythm (quiet nights, busy late mornings and evenings in
        Brasília time), quieter weekends and 30 % growth from the first day to the last."""
        rng, span = self.rng, self.until - self.start
        while True:
            moment = self.start + rng.random() * span
            local = datetime.fromtimestamp(moment - 3 * 3600, tz=UTC)
            hour = local.hour + local.minute / 60
            daily = 0.12 + math.exp(-((hour - 11) ** 2) / 8) + 0.8 * math.exp(-((hour - 20) ** 2) / 6)
            weekly = (1.0, 1.0, 1.0, 1.0, 0.95, 0.7, 0.55)[local.weekday()]
            growth = 0.77 + 0.23 * (moment - self.start) / span
            if rng.random() * 1.15 < daily * weekly * growth:
                return moment

    def _model_ms(self) -> float:
        return self.rng.lognormvariate(math.log(1100), 0.45)

    # -- conversations -----------------------------------------------------------------

    def _user(self) -> tuple[str, bool, dict[str, Any]]:
        """A user of the tenant and their side of the multi_agent flag, decided as the platform does."""
        user_id = f"u{self.rng.randrange(self.users_per_tenant):06d}"
        found = bucket(MULTI_AGENT_FLAG, user_id)
        enabled = found <= MULTI_AGENT_PERCENTAGE
        evaluation = {
            "flag": MULTI_AGENT_FLAG,
            "enabled": enabled,
            "reason": "bucket",
            "percentage": MULTI_AGENT_PERCENTAGE,
            "stickiness": "user_id",
            "stickiness_value": user_id,
            "bucket": found,
        }
        return user_id, enabled, {MULTI_AGENT_FLAG: evaluation}

    def conversation(self, local_id: int, batch: Batch) -> tuple[int, Counter, Counter]:
        """Simulate one conversation and append its rows to ``batch``; returns (handoffs, kinds, methods)."""
        rng = self.rng
        tenant = self.tenants[rng.choices(range(len(self.tenants)), weights=self.tenant_weights)[0]]
        catalogue = rng.choices(self.catalogues, weights=self.profile_weights)[0]
        user_id, multi_agent, flags = self._user()
        cohort = "multi_agent" if multi_agent else "single_agent"
        session_id = f"{rng.getrandbits(128):032x}"
        channel = rng.choices([c for c, _ in CHANNELS], weights=[w for _, w in CHANNELS])[0]
        turns = rng.choices(range(1, len(TURN_WEIGHTS) + 1), weights=TURN_WEIGHTS)[0]
        arrival = self._arrival()
        live = _Conversation(
            catalogue=catalogue,
            multi_agent=multi_agent,
            supervisor=(catalogue.agent_id == "telecom_contas" and multi_agent and arrival >= self.supervisor_from),
            looping=None,
        )
        if multi_agent and not catalogue.delegation and turns >= 3 and rng.random() < LOOPING_CONVERSATIONS:
            first = _pick(rng, {name: START_WEIGHTS.get(name, 0.1) for name in catalogue.by_keyword})
            targets = [name for name in catalogue.spec.specialists[first].handoff_targets if name != first]
            live.looping = (first, rng.choice(targets)) if targets else None
        simulated: list[tuple[float, _Turn]] = []
        moment = arrival
        for index in range(turns):
            turn = self._turn(live, first=index == 0)
            turn.latency_ms = self._latency(turn)
            moment += turn.latency_ms / 1000
            if live.sub and not live.sub["started_at"]:
                live.sub["started_at"] = moment
            simulated.append((moment, turn))
            moment += min(rng.lognormvariate(math.log(40), 0.8), 900)
        overflow = max(0.0, simulated[-1][0] - self.until)  # a conversation ends within the range
        arrival -= overflow
        if live.sub:
            live.sub["started_at"] = round(live.sub["started_at"] - overflow, 3)
        messages = batch.messages
        first_message = len(messages)
        profile_id, kinds, methods, handoffs, handoff_kinds = catalogue.spec.pk, Counter(), Counter(), 0, 0
        for number, (persisted, turn) in enumerate(simulated, start=1):
            persisted -= overflow
            handoffs += self._rows(
                batch,
                local_id=local_id,
                tenant_id=tenant.pk,
                profile_id=profile_id,
                cohort=cohort,
                flags=flags,
                user_id=user_id,
                channel=channel,
                number=number,
                persisted=persisted,
                turn=turn,
            )
            kinds.update(move.kind for move in turn.moves)
            handoff_kinds |= moves_kinds(turn.moves)
            methods[turn.decision.method] += 1
        last_moment = simulated[-1][0] - overflow
        sub = live.sub
        batch.conversations.append(
            [
                local_id,
                tenant.pk,
                profile_id,
                session_id,
                f"{tenant.slug}:{catalogue.agent_id}:{session_id}",
                user_id,
                channel,
                live.state,
                live.active_agent,
                live.active_intent,
                _encode(sub) if sub else None,
                _encode(live.pending_result) if live.pending_result else None,
                _encode(live.pending_permission) if live.pending_permission else None,
                _encode(live.granted),
                turns,
                turns,
                _when(last_moment),
                None,
                len(messages) - first_message,
                cohort,
                _when(arrival),
                _when(last_moment),
                handoff_kinds,
            ]
        )
        return handoffs, kinds, methods

    def _latency(self, turn: _Turn) -> float:
        if turn.parts:  # the parts run at once: the slowest, then the consolidation
            model = max(self._model_ms() for _ in turn.parts) + 0.6 * self._model_ms()
        else:
            model = sum(self._model_ms() for _ in range(turn.model_calls))
        if turn.decision.method == "llm":
            model += self.rng.lognormvariate(math.log(600), 0.3)
        return model + sum(tool[3] for tool in turn.tools)

    # -- one turn ----------------------------------------------------------------------

    def _turn(self, live: _Conversation, *, first: bool) -> _Turn:
        catalogue = live.catalogue
        turn = self._permission_reply(live)
        if turn is None and catalogue.delegation and live.multi_agent:
            turn = self._coordinated_turn(live)
        elif turn is None:
            turn = self._routed_turn(live, first=first, single_agent=not live.multi_agent)
        turn.agents = turn.agents or [turn.agent]
        return turn

    def _next_topic(self, live: _Conversation, first: bool) -> str:
        rng = self.rng
        names = live.catalogue.by_keyword
        if first or not live.topic:
            weights = {name: START_WEIGHTS.get(name, 0.1) for name in names}
        elif rng.random() < STAY_ON_TOPIC:
            return live.topic
        else:
            weights = {name: w for name, w in SWITCH_WEIGHTS.get(live.topic, {}).items() if name in names}
            weights = weights or {name: 1.0 for name in names if name != live.topic}
        return _pick(rng, weights)

    def _routed_decision(self, live: _Conversation, *, first: bool) -> tuple[str, Decision]:
        """The router's decision, as ``CompiledRouter.route`` makes it: state, keywords, classifier, fallback."""
        rng, catalogue = self.rng, live.catalogue
        router = catalogue.spec.router
        if live.state and live.state in router.state_policies:
            return rng.choice(STATE_REPLIES), Decision.of(router.by_state(live.state))
        if live.looping:
            live.topic = live.looping[0]
            return rng.choice(catalogue.by_keyword[live.topic])
        method = _pick(rng, METHOD_WEIGHTS)
        if method == "llm":
            topic = self._next_topic(live, first)
            texts = catalogue.by_classifier.get(topic)
            if texts:
                live.topic = topic
                text, intent_name = rng.choice(texts)
                intent = router.intents_by_name[intent_name]
                score = round(rng.uniform(0.62, 0.95), 2)
                return text, Decision(
                    route=intent.agent,
                    agent=intent.agent,
                    intent=intent.name,
                    confidence=score,
                    reason=f"Offline classifier: message most similar to {intent.name} (cosine {score:.2f}).",
                    method="llm",
                    next_state=intent.next_state,
                    domain=intent.domain,
                    mcp_tools=tuple(intent.mcp_tools),
                    metadata={
                        "classifier": {
                            "intent": intent.name,
                            "confidence": score,
                            "reason": f"Offline classifier: message most similar to {intent.name}.",
                        }
                    },
                )
            method = "keyword"
        if method == "fallback":
            return rng.choice(VAGUE_TEXTS), Decision.of(router.fallback())
        live.topic = self._next_topic(live, first)
        text, decision = rng.choice(catalogue.by_keyword[live.topic])
        return text, decision

    def _routed_turn(self, live: _Conversation, *, first: bool, single_agent: bool) -> _Turn:
        """A router profile's turn, or any profile's single-agent turn (the general specialist answers)."""
        rng, spec = self.rng, live.catalogue.spec
        plan = live.supervisor and not live.state and live.catalogue.plans and rng.random() < SUPERVISOR_PLAN_SHARE
        if plan:
            text, decision = rng.choice(live.catalogue.plans)
        else:
            text, decision = self._routed_decision(live, first=first)
        mode = "single_agent" if single_agent else ("supervisor" if live.supervisor else spec.routing_mode)
        handoff = not single_agent and not decision.plan and live.active_agent not in ("", decision.agent)
        if single_agent:  # routing.decide.single_agent_decide
            general = spec.fallback_agent
            decision = replace(
                decision,
                route=general,
                agent=general,
                reason=f"Single-agent path: {general} answers every message. Router: {decision.reason}",
                metadata={**decision.metadata, "routed_agent": decision.agent},
                metadata_json="",
            )
        elif handoff:  # CompiledRouter._mark_handoff
            decision = replace(
                decision, metadata={**decision.metadata, "previous_agent": live.active_agent}, metadata_json=""
            )
        turn = _Turn(text=text, decision=decision, mode=mode, handoff=handoff)
        if handoff:
            turn.moves.append(_Move(live.active_agent, decision.agent, HandoffKind.ROUTING, reason=decision.reason))
        live.state = decision.next_state
        if decision.plan:
            self._plan(live, turn)
            live.active_agent, live.active_intent = decision.plan[0][0], decision.plan[0][1]
            return turn
        turn.agent = decision.agent
        if decision.method == "fallback":
            turn.quality = 0.15
        if not single_agent:
            self._chain(live, turn)
        self._tools(live, turn, turn.agent, decision.mcp_tools)
        live.active_agent, live.active_intent = turn.agent, decision.intent
        turn.answer = turn.answer or self._answer(spec, turn.agent, decision.intent)
        return turn

    def _permission_reply(self, live: _Conversation) -> _Turn | None:
        """The message after a specialist asked to use a tool needing permission (the graph's permission gate)."""
        pending, live.pending_permission = live.pending_permission, None
        if not pending:
            return None
        rng = self.rng
        granted = rng.random() < 0.8
        if rng.random() < 0.1:
            return None  # something else: routed as usual
        tool, agent = pending["tool"], pending["agent"]
        reply = "granted" if granted else "denied"
        if granted and tool not in live.granted:
            live.granted.append(tool)
        tools = tuple(name for name in pending["mcp_tools"] if granted or name != tool)
        decision = Decision(
            route=agent,
            agent=agent,
            intent=pending["intent"],
            confidence=1.0,
            reason=f"Reply to the permission question: the user {reply} {tool}.",
            method="permission",
            next_state="",
            domain=live.catalogue.spec.domain,
            mcp_tools=tools,
            metadata={"permission": {"tool": tool, "reply": reply}},
        )
        turn = _Turn(
            text=rng.choice(PERMISSION_YES if granted else PERMISSION_NO),
            decision=decision,
            mode=live.catalogue.spec.routing_mode if live.multi_agent else "single_agent",
            agent=agent,
        )
        self._tools(live, turn, agent, tools, always=granted)
        turn.answer = self._answer(live.catalogue.spec, agent, decision.intent)
        live.state, live.active_agent, live.active_intent = "", agent, decision.intent
        return turn

    def _plan(self, live: _Conversation, turn: _Turn) -> None:
        """A supervisor plan: each specialist answers its part, then one consolidated answer."""
        rng, decision = self.rng, turn.decision
        turn.agent = SUPERVISOR_ROUTE
        for agent, intent, tools in decision.plan:
            status = "ok" if rng.random() < 0.97 else "timeout"
            part = self._answer(live.catalogue.spec, agent, intent) if status == "ok" else ""
            turn.parts.append((agent, intent, part))
            turn.moves.append(
                _Move(
                    SUPERVISOR_ROUTE,
                    agent,
                    HandoffKind.FANOUT,
                    reason=f"{intent}: {status}" + (" (the step did not answer in time)" if status != "ok" else ""),
                    context_summary=decision.reason,
                )
            )
            self._tools(live, turn, SUPERVISOR_ROUTE, tools, allowed_for=agent)
        turn.agents = [agent for agent, _, _ in decision.plan]
        turn.answer = " ".join(part for _, _, part in turn.parts if part) or GREETING_ANSWER

    def _chain(self, live: _Conversation, turn: _Turn) -> None:
        """Moves inside the turn: a specialist's handoff, and loop safety's stops (``move_check``)."""
        rng, spec = self.rng, live.catalogue.spec
        limits = spec.loop_safety
        earlier = live.paths[-limits.window :]  # what the graph reads from agent_handoffs
        looping = live.looping is not None and turn.agent == live.looping[0]
        event = "handoff" if looping else _threshold(rng.random(), CHAIN_EVENTS)
        if event is None:
            return
        agent = turn.agent
        targets = spec.specialists[agent].handoff_targets if agent in spec.specialists else ()
        if event == "refused" or not targets:
            target = rng.choice(UNKNOWN_TARGETS)
            turn.moves.append(
                _Move(
                    agent,
                    target,
                    HandoffKind.HANDOFF,
                    HandoffStatus.REFUSED,
                    reason=f"{target} is not a target of {agent}.",
                    outcome=REFUSED_NOT_ALLOWED,
                )
            )
            turn.model_calls += 1
            return
        if event == "step_limit":
            steps = spec.specialists[agent].step_limit
            turn.moves.append(
                _Move(
                    agent,
                    "",
                    HandoffKind.HANDOFF,
                    HandoffStatus.STOPPED,
                    reason=f"{agent} used its {steps} steps; it answered with what it had.",
                    outcome=STOP_STEP_LIMIT,
                )
            )
            turn.model_calls += 2
            turn.quality = 0.25
            return
        hops = {"handoff": 1, "ping_pong": 2, "handoff_limit": limits.max_handoffs_per_turn + 1}[event]
        chain = [agent]
        for hop in range(hops):
            current = chain[-1]
            options = spec.specialists[current].handoff_targets if current in spec.specialists else ()
            if event == "ping_pong" and hop == 1:
                target = chain[-2]
            elif looping:
                target = live.looping[1]
            else:
                fresh = [name for name in options if name not in chain] or list(options)
                weights = SWITCH_WEIGHTS.get(current, {})
                target = rng.choices(fresh, weights=[weights.get(name, 1) for name in fresh])[0]
            reason = f"A mensagem é do escopo de {target}, não de {current}."
            display = spec.specialists[current].display_name if current in spec.specialists else current
            summary = f'{display} recebeu: "{turn.text[:300]}"; nada consultado ainda.'
            this_turn = [
                (m.from_agent, m.to_agent)
                for m in turn.moves
                if m.kind == HandoffKind.HANDOFF and m.status == HandoffStatus.COMPLETED
            ]
            stop = move_check(
                chain=chain,
                target=target,
                moves_this_turn=len(this_turn),
                recent_paths=[*earlier, *this_turn],
                steps_left=1,
                max_handoffs=limits.max_handoffs_per_turn,
                block_ping_pong=limits.block_ping_pong,
                window=limits.window,
                max_repeats=limits.max_repeats,
            )
            turn.model_calls += 1
            if stop:
                turn.moves.append(
                    _Move(current, target, HandoffKind.HANDOFF, HandoffStatus.STOPPED, reason, summary, stop)
                )
                turn.answer = stop_summary(reason=stop, answer="", findings=[])
                turn.quality = 0.3
                break
            turn.moves.append(_Move(current, target, HandoffKind.HANDOFF, reason=reason, context_summary=summary))
            live.paths.append((current, target))
            chain.append(target)
        turn.agent = chain[-1]
        turn.agents = list(chain)

    def _coordinated_turn(self, live: _Conversation) -> _Turn:
        """A delegation profile's turn (seed 001): the coordinator, or the open sub-conversation's specialist."""
        rng, catalogue = self.rng, live.catalogue
        spec = catalogue.spec
        coordinator = spec.coordinator
        specialists = catalogue.specialists()
        if live.sub:
            specialist = live.sub["specialist"]
            decision = Decision(
                route=specialist,
                agent=specialist,
                intent=live.sub["intent"],
                confidence=1.0,
                reason=f"Sub-conversation open with {specialist}: it receives the messages until it ends it.",
                method="sub_conversation",
                next_state="",
                domain=spec.domain,
                mcp_tools=tuple(spec.router.intents_by_name[live.sub["intent"]].mcp_tools)
                if live.sub["intent"] in spec.router.intents_by_name
                else (),
                metadata={"candidates": []},
            )
            event = _threshold(rng.random(), SUB_EVENTS, "out_of_scope")
            others = [name for name in specialists if name != specialist and name in catalogue.by_keyword]
            if event == "out_of_scope" and not others:
                event = "completed"
            if event == "followup":
                text = rng.choice(FOLLOWUPS)
            elif event == "out_of_scope":
                other = rng.choice(others)
                text = rng.choice(catalogue.by_keyword[other])[0]
            else:
                text = rng.choice(CLOSINGS)
            turn = _Turn(text=text, decision=decision, mode=spec.routing_mode, agent=specialist)
            if event == "followup":
                self._tools(live, turn, specialist, decision.mcp_tools)
                turn.answer = self._answer(spec, specialist, decision.intent)
                return turn
            if event == "out_of_scope":
                final = {"reason": "out_of_scope", "suggested_specialist": other}
                note = f"Fora do meu escopo; parece ser assunto de {other}."
            else:
                final = {"resolved": event == "completed", "specialist": specialist, "last_answer": "..."}
                note = f"O cliente encerrou o assunto ({text!r})." if event == "completed" else ""
            turn.moves.append(
                _Move(
                    specialist,
                    coordinator,
                    HandoffKind.RETURN,
                    reason=note or f"{specialist} ended its sub-conversation: {event}.",
                    context_summary=_encode(final),
                    outcome=event,
                )
            )
            result = {
                "specialist": specialist,
                "status": event,
                "final_result": final,
                "last_user_message": text,
                "message_to_coordinator": note,
            }
            live.sub = None
            if event != "out_of_scope":
                live.pending_result = result
                turn.answer = GOODBYE
                live.active_agent, live.active_intent = coordinator, decision.intent
                return turn
            # Out of scope: the coordinator takes this same message at once and delegates it again.
            live.pending_result = None
            turn.notes.append((coordinator, _result_note(result)))
            turn.model_calls += 1
            target = specialist if rng.random() < 0.05 else other  # now and then, straight back: ping-pong
            self._delegate(live, turn, coordinator, target, text, chain=[specialist, coordinator])
            return turn

        decision = Decision(
            route=coordinator,
            agent=coordinator,
            intent="coordination",
            confidence=1.0,
            reason=f"{coordinator} coordinates: it answers or delegates every message outside a sub-conversation.",
            method="coordinator",
            next_state="",
            domain=spec.domain,
            mcp_tools=(),
            metadata={"candidates": []},
        )
        if live.pending_result:
            note = _result_note(live.pending_result)
            live.pending_result = None
        else:
            note = ""
        delegates = [name for name in specialists if name in catalogue.by_keyword]
        if delegates and rng.random() < DELEGATE_SHARE:
            target = _pick(rng, {name: START_WEIGHTS.get(name, 0.1) for name in delegates})
            text, routed = rng.choice(catalogue.by_keyword[target])
            decision.metadata = {"candidates": [{"intent": routed.intent, "agent": target}]}
            turn = _Turn(text=text, decision=decision, mode=spec.routing_mode, agent=coordinator)
        else:
            target = ""
            turn = _Turn(text=rng.choice(VAGUE_TEXTS), decision=decision, mode=spec.routing_mode, agent=coordinator)
        if note:
            turn.notes.append((coordinator, note))
        if target and rng.random() < 0.012:  # a model naming a role it does not have
            wrong = rng.choice(UNKNOWN_TARGETS)
            turn.moves.append(
                _Move(
                    coordinator,
                    wrong,
                    HandoffKind.DELEGATION,
                    HandoffStatus.REFUSED,
                    reason=f"{wrong} is not a target of {coordinator}.",
                    outcome=REFUSED_NOT_ALLOWED,
                )
            )
            turn.model_calls += 1
        if target:
            self._delegate(live, turn, coordinator, target, text, chain=[coordinator])
        else:
            turn.answer = GREETING_ANSWER
            live.active_agent, live.active_intent = coordinator, "coordination"
        return turn

    def _delegate(
        self, live: _Conversation, turn: _Turn, coordinator: str, target: str, text: str, chain: list[str]
    ) -> None:
        spec, limits = live.catalogue.spec, live.catalogue.spec.loop_safety
        intent = spec.router.intent_of(target, text)
        summary = f"O cliente escreveu: {text[:300]}"
        reason = f"{coordinator} delegated to {target}."
        stop = move_check(
            chain=chain,
            target=target,
            moves_this_turn=0,
            recent_paths=live.paths[-limits.window :],
            steps_left=1,
            max_handoffs=limits.max_handoffs_per_turn,
            block_ping_pong=limits.block_ping_pong,
            window=limits.window,
            max_repeats=limits.max_repeats,
        )
        if stop:
            turn.moves.append(
                _Move(coordinator, target, HandoffKind.DELEGATION, HandoffStatus.STOPPED, reason, summary, stop)
            )
            turn.answer = stop_summary(reason=stop, answer="", findings=[])
            turn.agent, turn.quality = coordinator, 0.3
            live.active_agent, live.active_intent = coordinator, "coordination"
            return
        turn.moves.append(_Move(coordinator, target, HandoffKind.DELEGATION, reason=reason, context_summary=summary))
        turn.model_calls += 1
        intent_name = intent.name if intent else ""
        live.sub = {
            "specialist": target,
            "coordinator": coordinator,
            "intent": intent_name,
            "initial_context": summary,
            "started_at": 0,  # set when the turn's time is known
        }
        turn.agent = target
        turn.agents = [*chain[-1:], target]
        self._tools(live, turn, target, tuple(intent.mcp_tools) if intent else ())
        turn.answer = self._answer(spec, target, intent_name)
        live.active_agent, live.active_intent = target, intent_name

    def _tools(
        self,
        live: _Conversation,
        turn: _Turn,
        agent: str,
        offered: Sequence[str],
        allowed_for: str = "",
        always: bool = False,
    ) -> None:
        """The tool calls of one specialist's run: the intent's tools that the specialist may use."""
        rng, spec = self.rng, live.catalogue.spec
        specialist = spec.specialists.get(allowed_for or agent)
        tools = [name for name in offered if specialist is not None and name in specialist.allowed_tools]
        if not tools or (rng.random() >= TOOL_CALL_SHARE and not always):
            return
        for tool in rng.sample(tools, k=2 if len(tools) > 1 and rng.random() < 0.25 else 1):
            server = self.tool_servers.get(tool, "")
            needs = tool == "diagnosticar_linha"
            if needs and tool not in live.granted and turn.decision.method != "permission":
                if allowed_for:  # a supervisor's part: left out rather than asked for
                    continue
                turn.tools.append((tool, server, ToolCallStatus.PERMISSION_REQUIRED, 0.0, ""))
                live.pending_permission = {
                    "tool": tool,
                    "agent": agent,
                    "intent": turn.decision.intent,
                    "mcp_tools": list(offered),
                }
                turn.answer = PERMISSION_QUESTION.format(tool=tool)
                return
            status = _threshold(rng.random(), TOOL_STATUSES, ToolCallStatus.OK)
            if status == ToolCallStatus.TIMEOUT:
                ms, error = 10_000.0, "The MCP server did not answer within 10 s."
            elif status == ToolCallStatus.UNAVAILABLE:
                ms, error = rng.uniform(1, 30), f"MCP server {server} is unavailable."
            elif status == ToolCallStatus.INVALID:
                ms, error = 0.0, "Missing required argument."
            else:
                ms = rng.lognormvariate(math.log(180), 0.5)
                error = "Upstream error 502." if status == ToolCallStatus.ERROR else ""
            turn.tools.append((tool, server, status, round(ms, 3), error))
            if status != ToolCallStatus.OK:
                turn.quality = max(turn.quality, 0.1)

    def _answer(self, spec: snapshot.ProfileSpec, agent: str, intent: str) -> str:
        specialist = spec.specialists.get(agent)
        subject = specialist.display_name.lower() if specialist else intent.replace("_", " ")
        return self.rng.choice(ANSWERS).format(subject=subject)

    # -- rows --------------------------------------------------------------------------

    def _rows(
        self,
        batch: Batch,
        *,
        local_id: int,
        tenant_id: int,
        profile_id: int,
        cohort: str,
        flags: dict[str, Any],
        user_id: str,
        channel: str,
        number: int,
        persisted: float,
        turn: _Turn,
    ) -> int:
        """Append one turn's rows as ``_persist`` writes them; returns how many handoff rows."""
        rng, messages = self.rng, batch.messages
        tick = iter(range(1, 10_000))

        def at() -> datetime:  # rows of one turn are stored together, in order, microseconds apart
            return _when(persisted + next(tick) * 2e-5)

        user_local = len(messages)
        messages.append(
            [
                user_local,
                local_id,
                MessageRole.USER,
                "",
                turn.text,
                f'{{"channel": {_encode(channel)}, "user_id": {_encode(user_id)}}}',
                0,
                cohort,
                None,
                None,
                at(),
            ]
        )
        for agent, note in turn.notes:
            metadata = '{"kind": "sub_conversation_result"}'
            messages.append([len(messages), local_id, MessageRole.SYSTEM, agent, note, metadata])
            messages[-1].extend([0, cohort, None, None, at()])
        for agent, intent, part in turn.parts:
            status = "ok" if part else "timeout"
            metadata = _encode({"intent": intent, "status": status, "error": "" if part else "timeout"})
            content = part or f"(sem resposta desta parte: {status})"
            messages.append([len(messages), local_id, MessageRole.AGENT, agent, content, metadata])
            messages[-1].extend([1, cohort, None, None, at()])
        decision = turn.decision
        trace = [
            {"node": "input_guardrails", "ms": round(rng.uniform(0.1, 0.8), 3)},
            {"node": "routing_decision", "ms": 0.0},
            {"node": decision.agent or "specialist", "ms": 0.0},
            {"node": "output_guardrails", "ms": round(rng.uniform(0.2, 1.2), 3)},
            {"node": "judge", "ms": round(rng.uniform(0.5, 3.0), 3)},
        ]
        total = turn.latency_ms
        routing_ms = round(rng.uniform(0.05, 0.4) + (total * 0.3 if decision.method == "llm" else 0), 3)
        trace[1]["ms"] = routing_ms
        trace[2]["ms"] = round(max(total - routing_ms, 1.0), 3)
        latency = round(sum(node["ms"] for node in trace), 3)
        score = rng.betavariate(7.0, 1.7) if cohort == "multi_agent" else rng.betavariate(5.5, 2.0)
        score = round(max(0.0, score - turn.quality), 3)
        moves = [move.as_dict() for move in turn.moves]
        metadata = {
            "mode": turn.mode,
            "route": decision.route,
            "intent": decision.intent,
            "mcp_tools": list(decision.mcp_tools),
            "handoffs": moves,
            "agents": turn.agents,
            "turn": number,
            "cohort": cohort,
            "flags": flags,
            "judges": {"rule_based": {"name": "rule_based", "status": "ok", "score": score, "passed": score >= 0.5}},
            "llm": "offline",
            "trace": trace,
        }
        answer_local = len(messages)
        messages.append(
            [
                answer_local,
                local_id,
                MessageRole.ASSISTANT,
                turn.agent,
                turn.answer,
                _encode(metadata),
                0,
                cohort,
                latency,
                score,
                at(),
            ]
        )
        batch.decisions.append(
            [
                local_id,
                user_local,
                turn.mode,
                decision.route,
                decision.agent,
                decision.intent,
                decision.confidence,
                decision.reason,
                decision.method,
                decision.next_state,
                turn.handoff,
                decision.domain,
                _encode(list(decision.mcp_tools)),
                decision.metadata_json or _encode(decision.metadata),
                at(),
            ]
        )
        for tool, server, status, ms, error in turn.tools:
            arguments = {"order_id": "P1**"} if server == "retail" else {"msisdn": "5511*****1234"}
            result = {"status": "ok"} if status == ToolCallStatus.OK else None
            batch.tool_calls.append(
                [
                    local_id,
                    answer_local,
                    turn.agent,
                    tool,
                    server,
                    _encode(arguments),
                    status,
                    ms,
                    _encode(result) if result else None,
                    error,
                    at(),
                ]
            )
        for move in turn.moves:
            batch.handoffs.append(
                [
                    local_id,
                    tenant_id,
                    profile_id,
                    move.from_agent,
                    move.to_agent,
                    move.kind,
                    move.status,
                    move.reason,
                    move.context_summary,
                    move.outcome,
                    at(),
                    cohort,
                ]
            )
        return len(turn.moves)


def _result_note(result: dict[str, Any]) -> str:
    """The system note a coordinator gets with a finished sub-conversation's result (as ``conversations.graph``)."""
    return (
        f"[SYSTEM_NOTE: the sub-conversation with {result.get('specialist', '')} ended. "
        f"status: {result.get('status', '')}; "
        f"final_result: {_encode(result.get('final_result'))}; "
        f"last_user_message: {_encode(result.get('last_user_message', ''))}; "
        f"message_to_coordinator: {_encode(result.get('message_to_coordinator', ''))}]"
    )


# --- writing -------------------------------------------------------------------------------


def _columns(model: type, names: Sequence[str]) -> list[str]:
    return [model._meta.get_field(name).column for name in names]  # get_field knows "tenant_id" too


TABLES = (
    (Conversation, CONVERSATION_FIELDS, "conversations"),
    (Message, MESSAGE_FIELDS, "messages"),
    (RouteDecisionRecord, DECISION_FIELDS, "decisions"),
    (ToolCall, TOOL_CALL_FIELDS, "tool_calls"),
    (Handoff, HANDOFF_FIELDS, "handoffs"),
)


def _reserve_ids(model: type, count: int) -> int:
    """The first of ``count`` consecutive ids nobody else will be given (call inside the batch's transaction).

    PostgreSQL: the table's sequence jumps ahead by ``count`` in one statement. Elsewhere: after the
    largest id (SQLite allows one writer at a time).
    """
    table = model._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT setval(pg_get_serial_sequence(%s, 'id'), nextval(pg_get_serial_sequence(%s, 'id')) + %s - 1)",
                [table, table, count],
            )
            return cursor.fetchone()[0] - count + 1
        cursor.execute(f"SELECT COALESCE(MAX(id), 0) FROM {connection.ops.quote_name(table)}")  # noqa: S608
        return cursor.fetchone()[0] + 1


def _write(model: type, names: Sequence[str], rows: list[list[Any]]) -> None:
    if not rows:
        return
    table = connection.ops.quote_name(model._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(column) for column in _columns(model, names))
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # The raw psycopg cursor's errors are Django's (IntegrityError, ...) only inside this wrapper.
            with connection.wrap_database_errors, cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            return
        adapt = connection.ops.adapt_datetimefield_value
        prepared = [[adapt(value) if isinstance(value, datetime) else value for value in row] for row in rows]
        placeholders = ", ".join(["%s"] * len(names))
        cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({placeholders})", prepared)  # noqa: S608


def _flush(batch: Batch) -> None:
    """Write a batch in one transaction: conversations and messages get their ids, the references follow."""
    with transaction.atomic():
        conversation_base = _reserve_ids(Conversation, len(batch.conversations))
        message_base = _reserve_ids(Message, len(batch.messages)) if batch.messages else 0
        for row in batch.conversations:
            row[0] += conversation_base
        for row in batch.messages:
            row[0] += message_base
            row[1] += conversation_base
        for rows in (batch.decisions, batch.tool_calls):
            for row in rows:
                row[0] += conversation_base
                row[1] += message_base
        for row in batch.handoffs:
            row[0] += conversation_base
        for model, names, attribute in TABLES:
            _write(model, names, getattr(batch, attribute))


# --- the entry points ----------------------------------------------------------------------


@dataclass(frozen=True)
class Progress:
    handoffs: int
    target: int
    conversations: int
    messages: int
    seconds: float


def bench_tenants_ensure(*, count: int) -> list[Tenant]:
    """``bench_tenant_1`` … ``bench_tenant_<count>``, created when missing."""
    return [
        tenant_get_or_create(slug=f"{BENCH_TENANT_PREFIX}{number}", name=f"Bench tenant {number}")[0]
        for number in range(1, count + 1)
    ]


def bench_data_clear() -> dict[str, int]:
    """Delete every conversation of the bench tenants and what hangs from it; other tenants are untouched.

    The tenants stay (with their API keys). One ``DELETE`` per table, dependents first: Django's
    cascading delete would load millions of messages into memory first. Returns rows deleted per model.
    """
    tenant_ids = list(Tenant.objects.filter(slug__startswith=BENCH_TENANT_PREFIX).values_list("pk", flat=True))
    if not tenant_ids:
        return {}
    conversations = Conversation.objects.filter(tenant_id__in=tenant_ids)
    messages = Message.objects.filter(conversation__in=conversations)
    deleted: Counter = Counter()
    with transaction.atomic():
        for queryset in [*_dependents(messages), *_dependents(conversations), messages, conversations]:
            deleted[queryset.model._meta.label] += _delete_rows(queryset)
        for fact in FACTS:  # the bench tenants' daily totals counted exactly the rows just deleted
            fact.rollup.objects.filter(tenant_id__in=tenant_ids).delete()
    return dict(deleted)


def _dependents(parents: QuerySet) -> list[QuerySet]:
    """Rows of other models that a cascade from ``parents`` would delete (messages and conversations aside)."""
    return [
        relation.related_model.objects.filter(**{f"{relation.field.name}__in": parents})
        for relation in parents.model._meta.related_objects
        if relation.on_delete is CASCADE and relation.related_model not in (Message, Conversation)
    ]


def _delete_rows(queryset: QuerySet) -> int:
    """``DELETE … WHERE id IN (<queryset>)`` in one statement; no signals, no cascade collected in Python."""
    quote, model = connection.ops.quote_name, queryset.model
    sql, params = queryset.values("pk").query.sql_with_params()
    table, pk = quote(model._meta.db_table), quote(model._meta.pk.column)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE {pk} IN ({sql})", params)  # noqa: S608 (names from _meta)
        return cursor.rowcount


def bench_data_generate(
    *,
    count: int,
    tenants: int = 3,
    days: int = 90,
    seed: int = 1,
    batch: int = 20_000,
    until: datetime | None = None,
    progress: Callable[[Progress], None] | None = None,
) -> GenerateReport:
    """Generate conversations until exactly ``count`` handoff rows were written, in batches of about ``batch``.

    Every row's ``created_at`` lies in ``[until - days, until]`` (``until`` defaults to now). A
    conversation whose moves would pass ``count`` is drawn again, so the last one fits exactly and
    every conversation is whole. Each batch is one transaction.
    """
    if count < 0 or tenants < 1 or days < 1 or batch < 1:
        raise BenchDataError("count must be ≥ 0, and tenants, days and batch ≥ 1.")
    started = time.perf_counter()
    until = until or datetime.now(tz=UTC)
    end = until.timestamp()
    catalogues = _demo_profiles()
    simulator = Simulator(
        rng=random.Random(seed),
        catalogues=catalogues,
        tool_servers=_tool_servers(),
        tenants=bench_tenants_ensure(count=tenants),
        users_per_tenant=max(20, count // (2 * tenants)),
        start=end - days * 86400,
        until=end,
    )
    report = GenerateReport()
    current = Batch()
    written = 0
    while written + len(current.handoffs) < count or current.conversations:
        if written + len(current.handoffs) < count:
            _draw(simulator, current, count - written - len(current.handoffs), report)
        if len(current.handoffs) >= batch or written + len(current.handoffs) >= count:
            try:
                _flush(current)
            except IntegrityError as exc:
                raise BenchDataError(f"{ERROR_ALREADY_GENERATED} ({exc})") from exc
            written += len(current.handoffs)
            _count(report, current)
            current = Batch()
            if progress is not None:
                seconds = time.perf_counter() - started
                progress(Progress(written, count, report.conversations, report.messages, seconds))
    # The rows are dated back: sum their days into the analytics' daily totals again (today stays live).
    summing = time.perf_counter()
    report.days_summed = len(rollup_build(first=_when(end - days * 86400).date(), last=until.date(), rebuild=True))
    report.rollup_seconds = time.perf_counter() - summing
    report.seconds = time.perf_counter() - started
    return report


def _draw(simulator: Simulator, batch: Batch, remaining: int, report: GenerateReport) -> None:
    """Add one conversation to ``batch`` with at most ``remaining`` handoffs (drawing again until one fits)."""
    while True:
        marks = {name: len(getattr(batch, name)) for _, _, name in TABLES}
        handoffs, kinds, methods = simulator.conversation(len(batch.conversations), batch)
        if handoffs <= remaining:
            report.kinds.update(kinds)
            report.methods.update(methods)
            return
        for name, mark in marks.items():
            del getattr(batch, name)[mark:]


def _count(report: GenerateReport, batch: Batch) -> None:
    report.handoffs += len(batch.handoffs)
    report.conversations += len(batch.conversations)
    report.messages += len(batch.messages)
    report.decisions += len(batch.decisions)
    report.tool_calls += len(batch.tool_calls)
    report.cohorts.update(row[19] for row in batch.conversations)
    report.tool_statuses.update(row[6] for row in batch.tool_calls)
    report.outcomes.update(row[9] for row in batch.handoffs if row[9])
