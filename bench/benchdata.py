"""Bench data for the analytics: conversations as the platform stores them, down to the agent_handoffs rows.

``bench/generate_handoffs.py`` calls :func:`bench_data_generate` and :func:`bench_data_clear`. The data is
simulated turn by turn against the demo profiles' compiled configuration (``routing.snapshot``): the decisions
are the compiled router's own (its reasons, confidences, tools, next states), the moves follow the graph's rules
(a routing handoff when the routed specialist differs from the active one, delegations and returns under a
coordinator, a supervisor plan's fan-out, loop-safety stops checked by ``handoffs.safety.move_check``).

The rows are not typed here. Each simulated turn becomes a :class:`conversations.records.TurnRecord` — the
plain data the graph's :func:`conversations.turn_store.turn_record` fills from a real turn — and
:func:`conversations.records.turn_rows` builds its rows from it, as it does for the graph: the user's message,
the system notes, a supervisor's parts, the answer (with its latency and judge score), the route decision, the
tool calls and the moves. The conversation's row takes, turn after turn, the live state that
:func:`conversations.records.conversation_updates` gives it. Only the timestamps are set here, once the rows are
built (the simulation dates them back).

Only bench tenants (``bench_tenant_N``) get data. Everything comes from one ``random.Random(seed)``, so a seed
and an ``until`` give the same rows; the batch size changes only how they are written. The rows go in with
``COPY`` on PostgreSQL, with ``executemany`` elsewhere; the columns and their values come from each model's
fields, encoded as Django encodes them (JSON included). Most conversations are replays of simulated ones
(:class:`Replayer`): on PostgreSQL the database makes them, ``INSERT … SELECT`` from the kept conversations' rows
(:class:`_DatabaseReplays`), the same rows as a copy in Python makes elsewhere.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import io
import json
import math
import operator
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, transaction
from django.db.models import CASCADE, Field, Model, QuerySet

from agents.mcp import ToolResult
from agents.models import AgentProfile
from agents.usage import KIND_ANSWER, TurnUsage, other_models, text_tokens
from analytics.rollups import FACTS
from analytics.services import rollup_build
from bench.bulk_load import ERROR_IN_TRANSACTION, BackgroundWriter, indexes_deferred
from common.language import detect_language
from conversations.chain import result_note
from conversations.desk.escalations import (
    HANDED_BACK,
    Person,
    desk_message,
    escalated_outcome,
    escalation_move,
    escalation_new,
    escalation_public,
    hand_back_move,
    person_move,
    person_of_user,
    transfer_words,
)
from conversations.escalation import (
    EscalationAsk,
    escalation_after,
    escalation_asked,
    language_of,
    notice,
    summary_for_person,
    thumbs_down_asked,
)
from conversations.feedback import RATED_DOWN_WORDS
from conversations.graph import ANSWER_KEPT, escalation_team, held_decision
from conversations.language import language_decide
from conversations.models import (
    Conversation,
    ConversationOutcome,
    Escalation,
    EscalationPriority,
    EscalationStatus,
    FeedbackRating,
    Message,
    MessageFeedback,
    MessageRole,
    Outcome,
    RouteDecisionRecord,
    ToolCall,
    ToolCallStatus,
)
from conversations.outcomes import TIMEOUT, Ending, ProfileRules, outcome_decided, outcome_row, profile_rules
from conversations.permissions import permission_question
from conversations.records import (
    CountedAs,
    LiveState,
    PartRecord,
    TurnRecord,
    TurnRows,
    conversation_updates,
    turn_rows,
)
from conversations.runtime import PERMISSION_WAITING
from conversations.supervisor import STATUS_OK, STATUS_TIMEOUT
from conversations.turn import TurnInput
from conversations.turn_store import conversation_defaults
from handoffs.models import KIND_BITS, PERSON, Handoff, HandoffKind, HandoffStatus
from handoffs.partitions import partitions_ensure
from handoffs.safety import REFUSED_NOT_ALLOWED, STOP_STEP_LIMIT, move_check, stop_summary
from handoffs.services import Move
from routing import snapshot
from routing.decide import COORDINATION_INTENT, single_agent_decide
from routing.rollout import bucket
from routing.router import SUPERVISOR_ROUTE, CompiledRouter, IntentSpec, RouteDecision
from routing.specs import ProfileSpec
from tenants.models import Tenant, TenantRight
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
# Turns of a router profile that its gateway sends to a remote backend (the Agent Gateway, conversations/
# gateway.py): a backend_handoff there, and another when the conversation comes back to a local specialist.
BACKEND_SHARE = 0.02
SYSTEM_PROMPT_TOKENS = 180  # a specialist's prompt, policy and tool definitions, as the offline model counts them
REMOTE_BACKEND = "partner_backend"
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
VAGUE_TEXTS = ("Oi", "Olá, bom dia", "Preciso de ajuda", "Boa tarde!", "Hello")
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

PART_TIMEOUT_ERROR = "the step did not answer in time"  # a supervisor part that timed out

# The end of a conversation (docs/analytics.md, "Outcomes"). Now and then the last message thanks or says goodbye (small
# talk, which the fallback answers): the periodic close counts those resolved. A share of answers is rated, the last
# one more often, and rated up as often as it helped.
CLOSING_SHARE = 0.45  # conversations of two turns or more whose last message is a thanks or a goodbye
SMALL_TALK_ANSWER = "Por nada! Se precisar de algo mais, é só chamar."
RATED_SHARE, RATED_LAST_SHARE = 0.04, 0.12
RATED_UP = 0.85  # an answer that helped (quality 0): rated up this often; each 0.1 of lost quality takes 0.15 off
RATING_COMMENTS = ("Não resolveu meu problema.", "Resposta confusa.", "Demorou muito.")

# People in the loop (docs/desk.md). A customer asks for a person now and then — more often after an answer that did
# not help — in a language its profile serves; the profiles' own rules (agents/escalation.py) hand over the rest.
# Then the desk: a wait in line (the customer may write meanwhile, or give up and be closed with the queue), a person
# who takes it, replies, notes, a transfer to another team now and then, and the hand-back.
HUMAN_ASK = {"first": 0.008, "later": 0.004, "after_miss": 0.05}  # per message: at the start, later, after a miss
# The languages of a profile's customers: its own (what its texts are written in) this often, those of its
# translations the rest alike, in this order after it (the demo's: pt 0.8, en 0.1, es 0.1).
OWN_LANGUAGE_SHARE = 0.8
LANGUAGE_ORDER = ("pt", "en", "es")
HUMAN_REQUESTS = {
    "pt": ("Quero falar com um atendente", "Quero falar com uma pessoa, por favor", "Posso falar com um humano?"),
    "en": ("I want to talk to a real person please", "Can I speak to a human?"),
    "es": ("Quiero hablar con una persona", "Quiero hablar con un agente, por favor"),
}
WHILE_WAITING = {
    "pt": ("Ainda estou esperando", "Alguém vai me atender?", "ok"),
    "en": ("Still waiting", "Is anyone there?", "ok"),
    "es": ("Sigo esperando", "¿Alguien me va a atender?", "ok"),
}
WHILE_ANSWERED = {
    "pt": ("Certo", "O número é 11 9****-1234", "Isso mesmo", "Obrigado"),
    "en": ("Right", "The number ends in 1234", "That's it", "Thanks"),
    "es": ("Bien", "El número termina en 1234", "Eso es", "Gracias"),
}
PERSON_REPLIES = {
    "pt": (
        "Olá, aqui é {name}. Já estou vendo o seu caso.",
        "Verifiquei aqui: já corrigi a cobrança e o valor sai na próxima fatura.",
        "Pronto, está resolvido. Posso ajudar em algo mais?",
    ),
    "en": (
        "Hi, this is {name}. I'm looking at your case now.",
        "I checked: the charge is corrected and will show on your next bill.",
        "Done, it's sorted. Anything else I can help with?",
    ),
    "es": (
        "Hola, soy {name}. Ya estoy revisando su caso.",
        "Lo revisé: el cobro ya está corregido y se verá en su próxima factura.",
        "Listo, está resuelto. ¿Le ayudo con algo más?",
    ),
}
DESK_NOTES = (
    "Cliente já entrou em contato ontem pelo mesmo assunto.",
    "Conferido no sistema: cobrança em duplicidade, estorno aberto.",
    "Pediu retorno por e-mail.",
)
TRANSFER_NOTES = ("Assunto do outro time.", "", "Cliente pediu para falar com o responsável.")
HAND_BACK_NOTES = ("Resolvido com o cliente.", "Estorno solicitado; cliente orientado.", "")
PEOPLE = ("Ana", "Bruno", "Carla", "Diego", "Elisa", "Fábio")  # the desk's staff users (bench_person_1..6)
BENCH_PERSON_PREFIX = "bench_person_"
QUEUE_WAIT_S = {EscalationPriority.HIGH: 120.0, EscalationPriority.NORMAL: 300.0}  # median wait in line
POSITIONS = ((1, 2, 3, 4, 5), (50, 25, 12, 8, 5))  # the customer's place in line when handed over
WRITES_WHILE_WAITING = 0.3  # after each minute or two in line, the customer writes again this often
REPLIES = ((1, 2, 3, 4), (25, 40, 25, 10))  # a person's replies before handing back
NOTE_SHARE, TRANSFER_SHARE, HAND_BACK_NOTE_SHARE = 0.15, 0.08, 0.4


# --- the catalogue: each demo profile's routing, compiled once ---------------------------


@dataclass
class ProfileCatalogue:
    """What the simulation needs of one profile: specialists, intents and texts with the router's decisions.

    A decision here is shared by every turn that draws its text: a turn that changes it works on a copy.
    """

    spec: ProfileSpec
    by_keyword: dict[str, list[tuple[str, RouteDecision]]] = field(default_factory=dict)  # specialist → (text, …)
    by_classifier: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # specialist → (text, intent)
    plans: list[tuple[str, RouteDecision]] = field(default_factory=list)
    state_intent: dict[str, str] = field(default_factory=dict)  # intent → the state it sets
    rules: ProfileRules | None = None  # when its conversations close, and what closes them well

    @property
    def agent_id(self) -> str:
        return self.spec.agent_id

    @property
    def delegation(self) -> bool:
        return bool(self.spec.coordinator)

    def specialists(self) -> list[str]:
        return [name for name in self.spec.specialists if name != self.spec.coordinator]


def _catalogue(spec: ProfileSpec) -> ProfileCatalogue:
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
                    (opening + (text[0].lower() + text[1:] if opening else text), decision) for opening in openings
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
                    found.plans.append((text, decision))
    return found


def _demo_profiles() -> list[ProfileCatalogue]:
    if AgentProfile.objects.filter(agent_id__in=DEMO_PROFILES).count() < len(DEMO_PROFILES):
        call_command("seed_demo", verbosity=0, stdout=io.StringIO())
    snapshot.invalidate()
    current = snapshot.current()
    missing = [agent_id for agent_id in DEMO_PROFILES if agent_id not in current.profiles]
    if missing:
        raise BenchDataError(f"Demo profiles not enabled: {', '.join(missing)}.")
    rules = {each.agent_id: each for each in profile_rules()}
    catalogues = [_catalogue(current.profiles[agent_id]) for agent_id in DEMO_PROFILES]
    for catalogue in catalogues:
        catalogue.rules = rules[catalogue.agent_id]
        _small_talk_check(catalogue.spec.router)
    return catalogues


def _small_talk_check(router: CompiledRouter) -> None:
    """The texts that ask for a person, and those that close a conversation, are read so by the router's small talk."""
    for text in (text for texts in HUMAN_REQUESTS.values() for text in texts):
        decision = router.by_small_talk(text)
        if decision is None or decision.metadata["small_talk"]["kind"] != "human_request":
            raise BenchDataError(f"{text!r} is not read as a request for a person.")
    for text in CLOSINGS:
        if router.by_small_talk(text) is None:
            raise BenchDataError(f"{text!r} is not read as small talk.")


def _tool_servers() -> dict[str, str]:
    return {name: tool.server for name, tool in snapshot.current().tools.items()}


class BenchDataError(RuntimeError):
    """The bench data cannot be generated as asked; the message says why."""


# --- the rows of one batch ---------------------------------------------------------------


@dataclass
class Batch:
    """A batch's rows, unsaved: a turn's as :func:`conversations.records.turn_rows` built them, the desk's as
    :mod:`conversations.desk.escalations` builds them, the outcomes as :mod:`conversations.outcomes` and the desk decide
    them.

    Conversations and messages carry ids (other rows point at them): their place in the batch, to which
    :func:`_write` adds the first id :func:`_flush` reserved for the batch. Escalations carry their UUID; decisions,
    tool calls, handoffs, ratings and outcomes get their ids from the database.
    """

    conversations: list[Conversation] = field(default_factory=list)
    escalations: list[Escalation] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    decisions: list[RouteDecisionRecord] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    handoffs: list[Handoff] = field(default_factory=list)
    ratings: list[MessageFeedback] = field(default_factory=list)
    outcomes: list[ConversationOutcome] = field(default_factory=list)
    # Replays the database makes (:func:`_replays_write`): each takes the places of its conversation and messages.
    replays: list[_Replay] = field(default_factory=list)
    replayed_messages: int = 0
    replayed_handoffs: int = 0
    kept: list[_Template] = field(default_factory=list)  # conversations of the batch kept to be replayed
    dropped: list[_Template] = field(default_factory=list)  # kept ones that made room for others

    def conversation_place(self) -> int:
        """The place of the batch's next conversation."""
        return len(self.conversations) + len(self.replays)

    def message_place(self) -> int:
        """The place of the batch's next message."""
        return len(self.messages) + self.replayed_messages

    def handoff_count(self) -> int:
        return len(self.handoffs) + self.replayed_handoffs

    def mark(self) -> dict[str, int]:
        """Where the batch ends now: :meth:`cut` takes it back there."""
        marks = {name: len(getattr(self, name)) for name in (*TABLE_NAMES, "replays")}
        return marks | {"replayed_messages": self.replayed_messages, "replayed_handoffs": self.replayed_handoffs}

    def cut(self, mark: dict[str, int]) -> None:
        """Take back what was added since ``mark``."""
        for name in (*TABLE_NAMES, "replays"):
            del getattr(self, name)[mark[name] :]
        self.replayed_messages, self.replayed_handoffs = mark["replayed_messages"], mark["replayed_handoffs"]

    def add(self, rows: TurnRows) -> None:
        """Append a turn's rows; its messages get their places, and the rows pointing at them the same."""
        for message in rows.messages:
            message.pk = self.message_place()
            self.messages.append(message)
        rows.link()
        if rows.decision is not None:
            self.decisions.append(rows.decision)
        self.tool_calls.extend(rows.tool_calls)
        self.handoffs.extend(rows.handoffs)
        if rows.escalation is not None:
            self.escalations.append(rows.escalation)

    def add_message(self, message: Message) -> None:
        message.pk = self.message_place()
        self.messages.append(message)


# The tables in the order they are written, and their lists in a Batch. What a row points at comes first, but for a
# conversation and the escalation it is held under, which point at each other (foreign keys are checked at commit).
TABLES: tuple[tuple[type[Model], str], ...] = (
    (Conversation, "conversations"),
    (Escalation, "escalations"),
    (Message, "messages"),
    (RouteDecisionRecord, "decisions"),
    (ToolCall, "tool_calls"),
    (Handoff, "handoffs"),
    (MessageFeedback, "ratings"),
    (ConversationOutcome, "outcomes"),
)
TABLE_NAMES = tuple(name for _, name in TABLES)


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
    endings: Counter = field(default_factory=Counter)  # conversations by outcome ("" still open)
    escalations: Counter = field(default_factory=Counter)  # by reason
    escalation_statuses: Counter = field(default_factory=Counter)
    desk_messages: Counter = field(default_factory=Counter)  # the people's replies and notes, by role
    ratings: Counter = field(default_factory=Counter)
    writing_seconds: float = 0.0  # drawing and writing the rows (with --bulk, the indexes dropped)
    drawing_seconds: float = 0.0  # of it, drawing the conversations (the simulator and the replays' plans)
    loading_seconds: float = 0.0  # of it, writing the batches (with --bulk, on a thread beside the drawing)
    index_seconds: float = 0.0  # building the dropped indexes again (--bulk)
    indexes_built: int = 0  # the indexes dropped for the load and built again after it (--bulk)


# --- the simulation -------------------------------------------------------------------------


def _when(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


def customer_languages(spec: ProfileSpec) -> dict[str, float]:
    """The languages ``spec``'s customers write in, weighted: the profile's own, and those it has translations in
    (what it serves: ``language`` and ``translations``, as conversations.language and common.translations read them)."""
    others = [code for code in LANGUAGE_ORDER if code != spec.language and spec.translations.get(code)]
    if not others:
        return {spec.language: 1.0}
    share = round((1 - OWN_LANGUAGE_SHARE) / len(others), 9)  # 0.1, not 0.09999999999999998: the demo's draws kept
    return {spec.language: OWN_LANGUAGE_SHARE, **dict.fromkeys(others, share)}


def _turn_language(live: _Live, text: str) -> tuple[str, str]:
    """The language of the customer's message ``text`` and the one the conversation keeps after it, decided as the
    graph decides them (conversations.language): the kept one, the message, the customer's earlier messages, then the
    profile's own. Remembered by the kept language, the text and the profile's (:data:`_LANGUAGES_DECIDED`) where
    the decision did not read the earlier messages: the simulator's customers write a few hundred texts, and
    detecting their language took a fifth of simulating a conversation."""
    own = live.catalogue.spec.language
    key = (live.language, text, own)
    decided = _LANGUAGES_DECIDED.get(key)
    if decided is not None:
        return decided
    earlier = _Watched(said for role, said in reversed(live.history) if role == "user")
    decided = language_decide(kept=live.language, channel="", text=text, earlier=earlier, own=own)
    if not earlier.read and len(_LANGUAGES_DECIDED) < LANGUAGES_REMEMBERED:
        _LANGUAGES_DECIDED[key] = decided
    return decided


LANGUAGES_REMEMBERED = 100_000  # decisions kept; the demo profiles' texts make a few thousand
_LANGUAGES_DECIDED: dict[tuple[str, str, str], tuple[str, str]] = {}


class _Watched:
    """An iterable that tells whether it was read: a decision that never read it does not depend on it."""

    def __init__(self, items: Iterable[str]):
        self._items, self.read = items, False

    def __iter__(self) -> Iterator[str]:
        self.read = True
        return iter(self._items)


def _pick(rng: random.Random, weighted: dict[str, float]) -> str:
    return rng.choices(list(weighted), weights=list(weighted.values()))[0]


def _threshold(draw: float, table: Sequence[tuple[float, Any]], default: Any = None) -> Any:
    for limit, value in table:
        if draw < limit:
            return value
    return default


@dataclass
class _Turn:
    """One user message as simulated: what its :class:`~conversations.records.TurnRecord` is made of."""

    text: str
    decision: RouteDecision
    mode: str
    agent: str = ""  # who answers
    answer: str = ""
    moves: list[Move] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)  # (agent, system note)
    parts: list[PartRecord] = field(default_factory=list)  # a supervisor plan's parts
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # ToolResult.as_dict()
    agents: list[str] = field(default_factory=list)
    model_calls: int = 1
    quality: float = 0.0  # lowers the judge's score (fallbacks, stops)
    latency_ms: float = 0.0
    judged: bool = True  # False: a person's turn (the routing or the desk answers; no judge, no model)
    answered: bool = True  # False: a person holds the conversation and answers on the desk
    escalation: Escalation | None = None  # the escalation the turn opened
    shown: dict[str, Any] | None = None  # metadata.escalation: the escalation as the customer saw it then
    rating: tuple[str, str, float] | None = None  # the customer's rating of the answer: (rating, comment, after s)


@dataclass
class _DeskAct:
    """What people do with a conversation they hold (conversations.desk.escalations), or a rating down handing it to
    them."""

    kind: str  # opened (outside a turn), take, reply, note, transfer, hand_back, close
    person: Person | None = None
    text: str = ""  # a reply's or a note's words; the hand-back's note


@dataclass
class _Live:
    """A conversation's live state while its turns are simulated."""

    catalogue: ProfileCatalogue
    who: _Who
    local_id: int  # the conversation's place in its batch
    multi_agent: bool
    supervisor: bool  # the profile ran in supervisor mode when this conversation happened
    looping: tuple[str, str] | None  # (A, B): the router keeps sending the customer to A, A keeps handing to B
    fallbacks: int = 0  # the fallback's answers in a row (the escalation rule's count)
    missed: bool = False  # the last answer did not help (a fallback, a stop, a failed tool, a rating down)
    history: list[tuple[str, str]] = field(default_factory=list)  # the last exchanges, for a person's summary
    escalation: Escalation | None = None  # the conversation is with people
    position: int = 1  # its place in line
    state: str = ""
    active_agent: str = ""
    active_intent: str = ""
    topic: str = ""
    sub: dict[str, Any] | None = None
    pending_result: dict[str, Any] | None = None
    pending_permission: dict[str, Any] | None = None
    granted: list[str] = field(default_factory=list)
    language: str = ""  # the conversation's kept language (conversations.language), as the graph keeps it
    paths: list[tuple[str, str]] = field(default_factory=list)  # completed agent handoffs, oldest first

    def left(self) -> LiveState:
        """What a turn that ends now hands to the conversation's next message."""
        return LiveState(
            sub_conversation=self.sub,
            pending_result=self.pending_result,
            pending_permission=self.pending_permission,
            granted_permissions=tuple(self.granted),
            routed=(self.state, self.active_agent, self.active_intent),
            fallbacks_in_row=self.fallbacks,
            language=self.language,
        )

    @property
    def mode(self) -> str:
        """The graph's mode for this conversation's turns."""
        if not self.multi_agent:
            return "single_agent"
        return "supervisor" if self.supervisor else self.catalogue.spec.routing_mode


HISTORY_KEPT = 8  # exchanges' messages kept for a person's summary (it quotes the last four)


@dataclass(frozen=True)
class _Who:
    """Whose conversation: the tenant, the profile, the user (and their side of the flag), session and channel."""

    tenant: Tenant
    catalogue: ProfileCatalogue
    user_id: str
    multi_agent: bool
    flags: dict[str, Any]
    session_id: str
    channel: str

    @property
    def cohort(self) -> str:
        return "multi_agent" if self.multi_agent else "single_agent"


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
        people: Sequence[Person] = (),
    ) -> None:
        self.rng = rng
        self.people = list(people) or [Person(name=name) for name in PEOPLE]
        self.close_every = float(settings.OUTCOMES_CLOSE_SECONDS)  # how often the periodic close runs
        self.endings: dict[tuple[int, str, str | None], Ending] = {}
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

    def _who(self) -> _Who:
        """A tenant, a profile, a user of the tenant and their side of the multi_agent flag (decided as the
        platform decides it), a session and a channel."""
        rng = self.rng
        tenant = self.tenants[rng.choices(range(len(self.tenants)), weights=self.tenant_weights)[0]]
        catalogue = rng.choices(self.catalogues, weights=self.profile_weights)[0]
        user_id = f"u{rng.randrange(self.users_per_tenant):06d}"
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
        return _Who(
            tenant=tenant,
            catalogue=catalogue,
            user_id=user_id,
            multi_agent=enabled,
            flags={MULTI_AGENT_FLAG: evaluation},
            session_id=f"{rng.getrandbits(128):032x}",
            channel=rng.choices([c for c, _ in CHANNELS], weights=[w for _, w in CHANNELS])[0],
        )

    def drawn(self) -> tuple[_Who, int, float]:
        """Whose conversation, of how many turns, arriving when."""
        who = self._who()
        turns = self.rng.choices(range(1, len(TURN_WEIGHTS) + 1), weights=TURN_WEIGHTS)[0]
        return who, turns, self._arrival()

    def conversation(
        self, local_id: int, batch: Batch, who: _Who, turns: int, arrival: float
    ) -> tuple[int, Counter, Counter]:
        """Simulate one conversation (as :meth:`drawn`) and append its rows to ``batch``; returns (handoffs, kinds,
        methods)."""
        live = self._live(who, turns, arrival, local_id)
        simulated = self._simulate(live, turns, arrival)
        # A conversation's turns end within the range, its last turn's rows too (they are stamped microseconds apart
        # after the turn: ROW_STAMPS_SPAN leaves room for them). What people do after a hand-over may run past it: what
        # falls after the range has not happened yet (the conversation is still with them).
        overflow = max(0.0, simulated[-1][0] + ROW_STAMPS_SPAN - self.until)
        if live.sub:
            live.sub["started_at"] = round(live.sub["started_at"] - overflow, 3)
        steps: list[tuple[float, _Turn | _DeskAct, LiveState]] = [
            (at - overflow, step, left) for at, step, left in simulated
        ]
        if live.escalation is not None:
            opened = steps[-1][0]
            live.escalation.created_at = _when(opened)
            held = live.left()  # a person's turn changes nothing of the conversation's live state
            steps += [(at, step, held) for at, step in self._episode(live, opened)]
        row = _conversation_row(local_id, who)
        row.created_at = _when(arrival - overflow)
        handoffs, kinds, methods = 0, Counter(), Counter()
        ratings: list[tuple[float, str]] = []
        last: tuple[float, str, int | None] = (arrival - overflow, "", None)  # the customer's last message
        number = 0
        for at, step, left in steps:
            if isinstance(step, _DeskAct):
                moves = self._desk_rows(live, row, step, at, batch)
                if moves:
                    handoffs += moves
                    kinds[HandoffKind.HUMAN] += moves
                continue
            number += 1
            record = self._record(row, who, number, step, left.language)
            rows = turn_rows(record)
            _conversation_turn(row, record, left, rows)
            _stamp(rows, at)
            batch.add(rows)
            handoffs += len(rows.handoffs)
            kinds.update(move.kind for move in step.moves)
            methods[step.decision.method] += 1
            last = (at, step.text, record.routing_version)
            if step.rating is not None and rows.answer is not None:
                rated = self._rating_row(row, rows.answer, rows.decision, step.rating, at)
                if rated is not None:
                    batch.ratings.append(rated)
                    ratings.append((at + step.rating[2], rated.rating))
        if live.escalation is not None and live.escalation.status in (
            EscalationStatus.RETURNED,
            EscalationStatus.CLOSED,
        ):
            row.escalation_id = None  # handed back, or closed: the assistants answer again
        row.updated_at = row.turn_started_at = _when(last[0])
        self._ending(live, row, batch, last, ratings)
        batch.conversations.append(row)
        return handoffs, kinds, methods

    def _live(self, who: _Who, turns: int, arrival: float, local_id: int) -> _Live:
        """The conversation's state before its first message; now and then, one that will loop."""
        rng, catalogue = self.rng, who.catalogue
        live = _Live(
            catalogue=catalogue,
            who=who,
            local_id=local_id,
            multi_agent=who.multi_agent,
            supervisor=catalogue.agent_id == "telecom_contas" and who.multi_agent and arrival >= self.supervisor_from,
            looping=None,
        )
        if who.multi_agent and not catalogue.delegation and turns >= 3 and rng.random() < LOOPING_CONVERSATIONS:
            first = _pick(rng, {name: START_WEIGHTS.get(name, 0.1) for name in catalogue.by_keyword})
            targets = [name for name in catalogue.spec.specialists[first].handoff_targets if name != first]
            live.looping = (first, rng.choice(targets)) if targets else None
        return live

    def _simulate(self, live: _Live, turns: int, arrival: float) -> list[tuple[float, _Turn | _DeskAct, LiveState]]:
        """The conversation's turns, each with the moment it is stored (the customer takes a while to answer) and
        the live state it leaves; they end early when one hands the conversation to people (or a rating down does,
        the last step then the escalation it opened)."""
        simulated: list[tuple[float, _Turn | _DeskAct, LiveState]] = []
        moment = arrival
        for index in range(turns):
            last = index == turns - 1
            turn = self._turn(live, first=index == 0, last=last)
            turn.latency_ms = self._latency(turn)
            moment += turn.latency_ms / 1000
            if live.sub and not live.sub["started_at"]:
                live.sub["started_at"] = moment
            left = live.left()
            if turn.escalation is not None:
                simulated.append(
                    (moment, turn, replace(left, escalation_id=turn.escalation.pk, outcome=Outcome.ESCALATED))
                )
                break
            simulated.append((moment, turn, left))
            if self._rate(live, turn, last=last):
                opened = self._thumbs_down(live, turn)
                if opened is not None:
                    simulated.append((moment + (turn.rating or ("", "", 0.0))[2], opened, left))
                    break
            moment += min(self.rng.lognormvariate(math.log(40), 0.8), 900)
        return simulated

    def _latency(self, turn: _Turn) -> float:
        if turn.parts:  # the parts run at once: the slowest, then the consolidation
            model = max(self._model_ms() for _ in turn.parts) + 0.6 * self._model_ms()
        else:
            model = sum(self._model_ms() for _ in range(turn.model_calls))
        if turn.decision.method == "llm":
            model += self.rng.lognormvariate(math.log(600), 0.3)
        return model + sum(call["latency_ms"] for call in turn.tool_calls)

    # -- what a turn stores ------------------------------------------------------------

    def _record(self, row: Conversation, who: _Who, number: int, turn: _Turn, language: str) -> TurnRecord:
        """The turn as the graph's ``turn_record`` would give it: its answer's metadata, latency and score, and the
        conversation's language after it (``language``)."""
        decision, trace = turn.decision, self._trace(turn)
        score: float | None = None
        judges: dict[str, Any] = {}  # a person's turn is not judged
        if turn.judged:
            score = self.rng.betavariate(7.0, 1.7) if who.multi_agent else self.rng.betavariate(5.5, 2.0)
            score = round(max(0.0, score - turn.quality), 3)
            judges = {"rule_based": {"name": "rule_based", "status": "ok", "score": score, "passed": score >= 0.5}}
        usage = self._usage(turn)
        used = usage.as_dict()
        metadata = {
            "mode": turn.mode,
            "route": decision.route,
            "intent": decision.intent,
            "mcp_tools": list(decision.mcp_tools),
            "handoffs": [move.as_dict() for move in turn.moves],
            "agents": turn.agents,
            "turn": number,
            "cohort": who.cohort,
            "flags": who.flags,
            "judges": judges,
            "llm": "offline",
            "usage": used,
            "trace": trace,
        }
        if turn.shown is not None:
            metadata["escalation"] = turn.shown
        return TurnRecord(
            conversation_id=row.pk,
            tenant_id=row.tenant_id,
            profile_id=row.profile_id,
            text=turn.text,
            answer=turn.answer,
            agent=turn.agent,
            mode=turn.mode,
            metadata=metadata,
            cohort=who.cohort,
            routing_version=who.catalogue.spec.version,  # the released version that served it, as the graph records
            language=language,
            channel=who.channel,
            user_id=who.user_id,
            latency_ms=round(sum(node["ms"] for node in trace), 3),
            judge_score=score,
            decision=decision,
            notes=turn.notes,
            parts=turn.parts,
            tool_calls=turn.tool_calls,
            moves=turn.moves,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            llm_model=usage.answering_model(),
            other_models=other_models(used),
            answered=turn.answered,
            escalation=turn.escalation,
        )

    def _usage(self, turn: _Turn) -> TurnUsage:
        """What the offline model reports (agents.usage.text_tokens): each call reads a system prompt, some history
        and the message; the answer is what it wrote. A remote backend's answer is the remote's (nothing here)."""
        usage = TurnUsage()
        if turn.agent and turn.agent != REMOTE_BACKEND and turn.model_calls:
            read = SYSTEM_PROMPT_TOKENS + self.rng.randint(0, 400) + text_tokens(turn.text)
            usage.add(KIND_ANSWER, "offline", read * turn.model_calls, text_tokens(turn.answer), turn.model_calls)
        return usage

    def _trace(self, turn: _Turn) -> list[dict[str, Any]]:
        """The graph's nodes and their times: routing (longer with the classifier), the specialist, the rest."""
        rng, decision = self.rng, turn.decision
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
        return trace

    # -- one turn ----------------------------------------------------------------------

    def _turn(self, live: _Live, *, first: bool, last: bool) -> _Turn:
        catalogue = live.catalogue
        state = live.state  # where the conversation stood (a person's summary says)
        turn = self._permission_reply(live)
        if turn is None and not live.sub:
            turn = self._small_talk(live, first=first, last=last)
        if turn is None and catalogue.delegation and live.multi_agent:
            turn = self._coordinated_turn(live)
        elif turn is None:
            turn = self._routed_turn(live, first=first, single_agent=not live.multi_agent)
        if not turn.agents and turn.agent != PERSON:
            turn.agents = [turn.agent]
        # The graph's escalation node: the fallbacks in a row counted, then the profile's rules read.
        live.fallbacks = live.fallbacks + 1 if turn.decision.method == "fallback" else 0
        if turn.escalation is None:
            self._rules(live, turn, state)
        live.missed = turn.quality >= 0.15
        _, live.language = _turn_language(live, turn.text)
        live.history += (("user", turn.text), ("assistant", turn.answer))
        del live.history[:-HISTORY_KEPT]
        return turn

    # -- people in the loop --------------------------------------------------------------

    def _small_talk(self, live: _Live, *, first: bool, last: bool) -> _Turn | None:
        """Now and then the customer asks for a person (more often after an answer that did not help), or ends the
        conversation with thanks or a goodbye: small talk, read before the intents (``routing.small_talk``)."""
        rng = self.rng
        chance = HUMAN_ASK["first" if first else ("after_miss" if live.missed else "later")]
        if rng.random() < chance:
            language = _pick(rng, customer_languages(live.catalogue.spec))
            return self._talked(live, rng.choice(HUMAN_REQUESTS[language]))
        if last and not first and not live.state and rng.random() < CLOSING_SHARE:
            return self._talked(live, rng.choice(CLOSINGS))
        return None

    def _talked(self, live: _Live, text: str) -> _Turn:
        """A small-talk message: the fallback (a coordinator, its own) answers and the conversation stays where it
        was — unless it asks for a person and the profile hands conversations to people (``escalation_asked``)."""
        spec = live.catalogue.spec
        coordinated = live.catalogue.delegation and live.multi_agent
        decision = spec.router.by_small_talk(text, agent=spec.coordinator if coordinated else "")
        assert decision is not None  # the catalogue checked these texts (_small_talk_check)
        if not live.multi_agent:
            decision = single_agent_decide(decision, spec)
        turn = _Turn(text=text, decision=decision, mode=live.mode, agent=decision.agent)
        ask = escalation_asked(spec.escalation, decision)
        if ask is not None:
            self._to_people(live, turn, ask)
            return turn
        turn.answer = SMALL_TALK_ANSWER
        if coordinated and live.pending_result:  # the finished sub-conversation's result reaches the coordinator
            turn.notes.append((spec.coordinator, result_note(live.pending_result)))
            live.pending_result = None
        return turn

    def _to_people(self, live: _Live, turn: _Turn, ask: EscalationAsk) -> None:
        """The routing hands the conversation to people (the customer asked, or a people's intent won): no
        specialist runs, the conversation stays where it was, the answer is the customer's place in line."""
        decision = turn.decision
        decision.handoff, decision.keeps_conversation = False, True
        decision.metadata["escalation"] = ask.reason
        turn.agent, turn.agents, turn.judged, turn.model_calls = PERSON, [], False, 0
        turn.tool_calls, turn.moves = [], []
        self._escalate(live, turn, ask, answered_by="", state=live.state)

    def _rules(self, live: _Live, turn: _Turn, state: str) -> None:
        """The profile's rules after the turn (``escalation_after``): a move loop safety stopped, the fallback's
        answers in a row. The assistants' answer stays, the customer's place in line after it."""
        people = live.catalogue.spec.escalation
        if not (people.enabled and (people.on_loop_stop or people.after_fallbacks)):
            return  # blocked messages and goals are not simulated: the other rules never hold here
        ask = escalation_after(
            people,
            blocked=False,
            moves=turn.moves,
            goal_failed=False,
            method=turn.decision.method,
            fallbacks_in_row=live.fallbacks,
        )
        if ask is not None:
            self._escalate(live, turn, ask, answered_by=turn.agent, state=state)

    def _escalate(self, live: _Live, turn: _Turn, ask: EscalationAsk, *, answered_by: str, state: str) -> None:
        """Hand the conversation over with ``turn``, as the graph's escalation node does: the escalation (its summary
        for the person, in the customer's language), the ``human`` move, the answer telling the customer their place."""
        spec = live.catalogue.spec
        kept = ask.reason in ANSWER_KEPT and bool(turn.answer.strip())
        language = language_of(_turn_language(live, turn.text)[0])  # the turn's, as the graph's escalation node
        intent = turn.decision.intent or live.active_intent
        escalation = escalation_new(
            conversation_id=live.local_id,
            tenant_id=live.who.tenant.pk,
            profile_id=spec.pk,
            ask=ask,
            language=language,
            summary=summary_for_person(
                ask,
                intent=intent,
                agent=answered_by or live.active_agent,
                state=state,
                history=live.history,
                text=turn.text,
                answer=turn.answer if kept else "",
            ),
            from_agent=answered_by if answered_by not in ("", PERSON) else live.active_agent or spec.fallback_agent,
            intent=intent,
            desk=spec.escalation.desk,
        )
        escalation.id = uuid.UUID(int=self.rng.getrandbits(128), version=4)  # from the seed, as every row
        live.escalation, live.position = escalation, self.rng.choices(*POSITIONS)[0]
        words = notice("queued", language, position=live.position)
        turn.answer = f"{turn.answer.strip()}\n\n{words}" if kept else words
        if not kept:
            turn.agent = PERSON
        turn.moves.append(person_move(escalation))
        turn.escalation, turn.shown = escalation, escalation_public(escalation, position=live.position)

    def _rate(self, live: _Live, turn: _Turn, *, last: bool) -> bool:
        """Now and then the customer rates the answer (the last one more often), up as often as it helped; ``True``
        when rated down."""
        rng = self.rng
        if not (turn.judged and turn.answered) or rng.random() >= (RATED_LAST_SHARE if last else RATED_SHARE):
            return False
        up = rng.random() < max(0.05, RATED_UP - 1.5 * turn.quality)
        comment = "" if up or rng.random() < 0.7 else rng.choice(RATING_COMMENTS)
        rating = FeedbackRating.UP if up else FeedbackRating.DOWN
        turn.rating = (rating, comment, rng.lognormvariate(math.log(20), 0.8))
        live.missed = live.missed or not up
        return not up

    def _thumbs_down(self, live: _Live, turn: _Turn) -> _DeskAct | None:
        """A rating down hands the conversation to people when the profile says so (``thumbs_down_asked``), outside a
        turn, as ``conversations.feedback.thumbs_down_escalate`` does."""
        spec = live.catalogue.spec
        ask = thumbs_down_asked(spec.escalation)
        if ask is None:
            return None
        comment = (turn.rating or ("", "", 0.0))[1]
        if comment:
            ask = replace(ask, summary=f"{RATED_DOWN_WORDS}: {comment}")
        escalation = escalation_new(
            conversation_id=live.local_id,
            tenant_id=live.who.tenant.pk,
            profile_id=spec.pk,
            ask=ask,
            language=language_of(detect_language(turn.text)),
            summary=summary_for_person(
                ask,
                intent=live.active_intent,
                agent=live.active_agent,
                state=live.state,
                history=live.history[:-2],  # before the rated exchange, which the summary quotes
                text=turn.text,
                answer=turn.answer,
            ),
            from_agent=live.active_agent,
            intent=live.active_intent,
            desk=spec.escalation.desk,
        )
        escalation.id = uuid.UUID(int=self.rng.getrandbits(128), version=4)
        live.escalation, live.position = escalation, self.rng.choices(*POSITIONS)[0]
        return _DeskAct("opened")

    def _episode(self, live: _Live, start: float) -> list[tuple[float, _Turn | _DeskAct]]:
        """What happens once the conversation joined its queue at ``start``, until the hand-back, the close of the queue
        or the end of the range, in order: the customer's messages (told their place while in line, answered by
        nobody once a person has it), the person who takes it, their replies and notes, a transfer to another team now
        and then, the hand-back. The escalation row changes as it goes (it is written as the range leaves it)."""
        rng, escalation, until = self.rng, live.escalation, self.until
        assert escalation is not None
        language = escalation.language or "pt"
        abandon = live.catalogue.rules.abandon_after.total_seconds() if live.catalogue.rules else 1800.0
        teams = live.catalogue.spec.escalation.teams
        steps: list[tuple[float, _Turn | _DeskAct]] = []
        moment, holder = start, None
        while True:
            # In line: the customer may write meanwhile; idle past the profile's timeout, the close takes it out.
            taken = moment + rng.lognormvariate(math.log(QUEUE_WAIT_S.get(escalation.priority, 300.0)), 1.1)
            quiet = moment
            while rng.random() < WRITES_WHILE_WAITING:
                at = quiet + rng.lognormvariate(math.log(90), 0.7)
                if at >= taken or at > quiet + abandon or at > until:
                    break
                live.position = max(1, live.position - 1)
                steps.append((at, self._held_turn(live, language)))
                quiet = at
            closed = quiet + abandon + rng.uniform(0, self.close_every)
            if closed < taken:
                if closed <= until:
                    escalation.status, escalation.ended_at = EscalationStatus.CLOSED, _when(closed)
                    steps.append((closed, _DeskAct("close")))
                return steps
            if taken > until:
                return steps
            person = rng.choice([each for each in self.people if each is not holder])
            escalation.status, escalation.assigned_to_id, escalation.assigned_at = (
                EscalationStatus.ASSIGNED,
                person.user_id,
                _when(taken),
            )
            escalation.person, escalation.person_ref = person.name, person.ref
            steps.append((taken, _DeskAct("take", person)))
            at, replies, noted = taken, rng.choices(*REPLIES)[0], False
            for number in range(replies):
                at += rng.lognormvariate(math.log(50), 0.6)
                if at > until:
                    return steps
                words = PERSON_REPLIES[language][0 if number == 0 else (2 if number == replies - 1 else 1)]
                steps.append((at, _DeskAct("reply", person, words.format(name=person.name))))
                if not noted and rng.random() < NOTE_SHARE:
                    noted, at = True, at + rng.uniform(5, 60)
                    if at > until:
                        return steps
                    steps.append((at, _DeskAct("note", person, rng.choice(DESK_NOTES))))
                if number == 0 and holder is None and len(teams) > 1 and rng.random() < TRANSFER_SHARE:
                    at += rng.lognormvariate(math.log(30), 0.5)
                    if at > until:
                        return steps
                    team = rng.choice([each for each in teams if each != escalation.team])
                    words = transfer_words(escalation.team, team, person, rng.choice(TRANSFER_NOTES))
                    steps.append((at, _DeskAct("transfer", person, words)))
                    escalation.team, escalation.status = team, EscalationStatus.QUEUED
                    escalation.assigned_to_id, escalation.person, escalation.person_ref = None, "", ""
                    escalation.assigned_at = None
                    if rng.random() < 0.5:
                        escalation.priority = EscalationPriority.HIGH
                    moment, holder = at, person
                    break
                if number < replies - 1 and rng.random() < 0.8:
                    at += rng.lognormvariate(math.log(60), 0.7)
                    if at > until:
                        return steps
                    steps.append((at, self._held_turn(live, language)))
            else:
                at += rng.lognormvariate(math.log(40), 0.6)
                if at > until:
                    return steps
                note = rng.choice(HAND_BACK_NOTES) if rng.random() < HAND_BACK_NOTE_SHARE else ""
                escalation.status, escalation.ended_at = EscalationStatus.RETURNED, _when(at)
                steps.append((at, _DeskAct("hand_back", person, note)))
                return steps

    def _held_turn(self, live: _Live, language: str) -> _Turn:
        """A customer's message while people hold the conversation (the graph's ``person`` node): it goes to the desk;
        in line, the customer is told their place again; once a person has it, nothing answers it now."""
        escalation = live.escalation
        assert escalation is not None
        queued = escalation.status == EscalationStatus.QUEUED
        text = self.rng.choice((WHILE_WAITING if queued else WHILE_ANSWERED)[language])
        decision = held_decision(escalation, intent=live.active_intent)
        turn = _Turn(text=text, decision=decision, mode=live.mode, agent=PERSON, judged=False, model_calls=0)
        if queued:
            words = language_of(detect_language(text), fallback=escalation.language)
            turn.answer = notice("waiting", words, position=live.position)
        else:
            turn.answered = False
        turn.shown = escalation_public(escalation, position=live.position if queued else None)
        turn.latency_ms = self._latency(turn)
        return turn

    def _desk_rows(self, live: _Live, row: Conversation, act: _DeskAct, at: float, batch: Batch) -> int:
        """The rows of what people did (``conversations.desk.escalations``) at ``at``; returns the handoffs written."""
        escalation, spec = live.escalation, live.catalogue.spec
        assert escalation is not None
        if act.kind == "opened":  # a rating down, outside a turn (escalation_open)
            move = escalation_move(escalation)
            move.cohort, move.routing_version, move.created_at = row.cohort, spec.version, _when(at + 2e-5)
            batch.escalations.append(escalation)
            batch.handoffs.append(move)
            row.escalation_id, row.outcome = escalation.pk, Outcome.ESCALATED
            row.handoff_kinds |= KIND_BITS[HandoffKind.HUMAN]
            return 1
        assert act.person is not None or act.kind in ("take", "close")
        written: list[tuple[str, str]] = []  # (role, text) of the messages the act leaves
        if act.kind == "reply":
            written.append((MessageRole.HUMAN, act.text))
        elif act.kind in ("note", "transfer"):
            written.append((MessageRole.NOTE, act.text))
        elif act.kind == "hand_back" and act.person is not None:
            move = hand_back_move(
                escalation=escalation,
                person=act.person,
                to_agent=row.active_specialist or spec.fallback_agent,
                note=act.text,
                cohort=row.cohort,
                routing_version=spec.version,
            )
            move.created_at = _when(at)
            batch.handoffs.append(move)
            if act.text.strip():
                written.append((MessageRole.NOTE, HANDED_BACK.format(note=act.text.strip())))
        for tick, (role, text) in enumerate(written, start=1):
            assert act.person is not None
            message = desk_message(escalation=escalation, cohort=row.cohort, role=role, text=text, person=act.person)
            message.created_at = _when(at + tick * 2e-5)
            batch.add_message(message)
        return 1 if act.kind == "hand_back" else 0

    def _rating_row(
        self,
        row: Conversation,
        answer: Message,
        decision: RouteDecisionRecord | None,
        rating: tuple[str, str, float],
        at: float,
    ) -> MessageFeedback | None:
        """The customer's rating of ``answer`` (``conversations.feedback.feedback_give``), ``None`` when it would come
        after the range."""
        value, comment, after = rating
        rated = at + after
        if rated > self.until:
            return None
        return MessageFeedback(
            message_id=answer.pk,
            conversation_id=row.pk,
            tenant_id=row.tenant_id,
            profile_id=row.profile_id,
            rating=value,
            comment=comment,
            user_id=row.user_id,
            cohort=answer.cohort,
            routing_version=answer.routing_version,
            answered_at=answer.created_at,
            agent=answer.agent,
            route_agent=decision.agent if decision is not None else "",
            route_intent=decision.intent if decision is not None else "",
            created_at=_when(rated),
            updated_at=_when(rated),
        )

    def _ending(
        self,
        live: _Live,
        row: Conversation,
        batch: Batch,
        last: tuple[float, str, int | None],
        ratings: list[tuple[float, str]],
    ) -> None:
        """The conversation's outcome row, as the platform decides it: escalated when it was handed to people (with
        the hand-over), else when the periodic close finds it idle past its profile's timeout (``outcome_decided``:
        closing words, a rating up, or abandoned) — unless that comes after the range (it is still open)."""
        up = sum(1 for _, rating in ratings if rating == FeedbackRating.UP)
        down = len(ratings) - up
        if live.escalation is not None:
            outcome = escalated_outcome(
                escalation=live.escalation,
                cohort=row.cohort,
                routing_version=live.catalogue.spec.version,
                started_at=row.created_at,
            )
            row.outcome = Outcome.ESCALATED
        else:
            rules = live.catalogue.rules
            assert rules is not None
            at, text, version = last
            closed = at + rules.abandon_after.total_seconds() + self.rng.uniform(0, self.close_every)
            if closed > self.until:
                return
            latest = max(ratings)[1] if ratings else None
            key = (rules.pk, text, latest)
            ending = self.endings.get(key)
            if ending is None:
                ending = self.endings[key] = outcome_decided(
                    last_text=text, closing_words=rules.closing_words, last_rating=latest, otherwise=TIMEOUT
                )
            read = {
                "pk": row.pk,
                "tenant_id": row.tenant_id,
                "profile_id": row.profile_id,
                "cohort": row.cohort,
                "active_intent": row.active_intent,
                "active_specialist": row.active_specialist,
                "goal_state": row.goal_state,
                "created_at": row.created_at,
                "last_version": version,
                "rated_up": up,
                "rated_down": down,
            }
            outcome = outcome_row(read, ending, _when(closed))
            row.outcome = ending.outcome
        outcome.rated_up, outcome.rated_down = up, down
        batch.outcomes.append(outcome)

    def _next_topic(self, live: _Live, first: bool) -> str:
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

    def _routed_decision(self, live: _Live, *, first: bool) -> tuple[str, RouteDecision]:
        """The router's decision, as ``CompiledRouter.route`` makes it: state, keywords, classifier, fallback.

        The decision may be the catalogue's, shared: not to be changed.
        """
        rng, catalogue = self.rng, live.catalogue
        router = catalogue.spec.router
        if live.state and live.state in router.state_policies:
            return rng.choice(STATE_REPLIES), router.by_state(live.state)
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
                return text, _classified(router.intents_by_name[intent_name], round(rng.uniform(0.62, 0.95), 2))
            method = "keyword"
        if method == "fallback":
            return rng.choice(VAGUE_TEXTS), router.fallback()
        live.topic = self._next_topic(live, first)
        return rng.choice(catalogue.by_keyword[live.topic])

    def _routed_turn(self, live: _Live, *, first: bool, single_agent: bool) -> _Turn:
        """A router profile's turn, or any profile's single-agent turn (the general specialist answers)."""
        rng, spec = self.rng, live.catalogue.spec
        plan = live.supervisor and not live.state and live.catalogue.plans and rng.random() < SUPERVISOR_PLAN_SHARE
        text, routed = rng.choice(live.catalogue.plans) if plan else self._routed_decision(live, first=first)
        # The router marks the move on its decision, the single-agent path then takes it over: on a copy here.
        decision = copy.copy(routed)
        decision.metadata = dict(routed.metadata)
        decision = CompiledRouter.mark_handoff(decision, live.active_agent)
        if single_agent:
            decision = single_agent_decide(decision, spec)
        mode = live.mode
        team = escalation_team(spec, decision)
        ask = escalation_asked(spec.escalation, decision, escalate_to=team) if team else None
        if ask is not None:  # an intent people answer won: a person of its team takes the conversation
            turn = _Turn(text=text, decision=decision, mode=mode)
            self._to_people(live, turn, ask)
            return turn
        if not (single_agent or decision.plan or live.supervisor or live.state) and rng.random() < BACKEND_SHARE:
            return self._backend_turn(live, text, mode)
        turn = _Turn(text=text, decision=decision, mode=mode)
        if decision.handoff:
            # Away from a remote backend, the move is the gateway's (as conversations/graph.py records it).
            kind = HandoffKind.BACKEND if live.active_agent == REMOTE_BACKEND else HandoffKind.ROUTING
            turn.moves.append(Move(live.active_agent, decision.agent, kind, reason=decision.reason))
        live.state = decision.next_state or ""
        if decision.plan:
            self._plan(live, turn)
            live.active_agent, live.active_intent = decision.plan[0].agent, decision.plan[0].intent
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

    def _backend_turn(self, live: _Live, text: str, mode: str) -> _Turn:
        """A turn the gateway sends to the remote backend: its keyword decides, the remote answers (no local tool)."""
        spec = live.catalogue.spec
        decision = RouteDecision(
            route=REMOTE_BACKEND,
            agent=REMOTE_BACKEND,
            intent=f"backend:{REMOTE_BACKEND}",
            confidence=1.0,
            reason=f"Keyword of the remote backend {REMOTE_BACKEND}.",
            method="keyword",
            domain=spec.domain,
            metadata={"backend": REMOTE_BACKEND},
        )
        turn = _Turn(text=text, decision=decision, mode=mode, agent=REMOTE_BACKEND)
        if live.active_agent and live.active_agent != REMOTE_BACKEND:  # the graph records a move from an agent only
            decision.handoff = True
            summary = f"{live.active_agent} was talking about {live.topic or 'the account'}."
            turn.moves.append(
                Move(
                    live.active_agent,
                    REMOTE_BACKEND,
                    HandoffKind.BACKEND,
                    reason=decision.reason,
                    context_summary=summary,
                )
            )
        live.active_agent, live.active_intent = REMOTE_BACKEND, decision.intent
        turn.answer = f"{REMOTE_BACKEND}: a resposta do parceiro sobre {live.topic or 'sua conta'}."
        return turn

    def _permission_reply(self, live: _Live) -> _Turn | None:
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
        tools = [name for name in pending["mcp_tools"] if granted or name != tool]
        decision = RouteDecision(
            route=agent,
            agent=agent,
            intent=pending["intent"],
            confidence=1.0,
            reason=f"Reply to the permission question: the user {reply} {tool}.",
            method="permission",
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

    def _plan(self, live: _Live, turn: _Turn) -> None:
        """A supervisor plan: each specialist answers its part, then one consolidated answer."""
        rng, decision = self.rng, turn.decision
        turn.agent = SUPERVISOR_ROUTE
        for step in decision.plan:
            answered = rng.random() < 0.97
            part = PartRecord(
                agent=step.agent,
                intent=step.intent,
                status=STATUS_OK if answered else STATUS_TIMEOUT,
                answer=self._answer(live.catalogue.spec, step.agent, step.intent) if answered else "",
                error="" if answered else PART_TIMEOUT_ERROR,
            )
            turn.parts.append(part)
            turn.moves.append(
                Move(
                    SUPERVISOR_ROUTE,
                    step.agent,
                    HandoffKind.FANOUT,
                    reason=f"{part.intent}: {part.status}" + (f" ({part.error})" if part.error else ""),
                    context_summary=decision.reason,
                )
            )
            self._tools(live, turn, SUPERVISOR_ROUTE, step.mcp_tools, allowed_for=step.agent)
        turn.agents = [step.agent for step in decision.plan]
        turn.answer = " ".join(part.answer for part in turn.parts if part.answer) or GREETING_ANSWER

    def _chain(self, live: _Live, turn: _Turn) -> None:
        """Moves inside the turn: a specialist's handoff, and loop safety's stops (``move_check``)."""
        rng, spec = self.rng, live.catalogue.spec
        earlier = live.paths[-spec.loop_safety.window :]  # what the graph reads from agent_handoffs
        looping = live.looping is not None and turn.agent == live.looping[0]
        event = "handoff" if looping else _threshold(rng.random(), CHAIN_EVENTS)
        if event is None:
            return
        agent = turn.agent
        targets = spec.specialists[agent].handoff_targets if agent in spec.specialists else ()
        if event == "refused" or not targets:
            target = rng.choice(UNKNOWN_TARGETS)
            reason = f"{target} is not a target of {agent}."
            turn.moves.append(
                Move(agent, target, HandoffKind.HANDOFF, HandoffStatus.REFUSED, reason, outcome=REFUSED_NOT_ALLOWED)
            )
            turn.model_calls += 1
        elif event == "step_limit":
            reason = f"{agent} used its {spec.specialists[agent].step_limit} steps; it answered with what it had."
            turn.moves.append(
                Move(agent, "", HandoffKind.HANDOFF, HandoffStatus.STOPPED, reason, outcome=STOP_STEP_LIMIT)
            )
            turn.model_calls += 2
            turn.quality = 0.25
        else:
            self._hops(live, turn, event, earlier, looping=looping)

    def _hops(self, live: _Live, turn: _Turn, event: str, earlier: list[tuple[str, str]], *, looping: bool) -> None:
        """The specialists hand the turn on (once, back and forth, or past the limit) until one answers or
        loop safety stops them."""
        rng, spec = self.rng, live.catalogue.spec
        limits = spec.loop_safety
        hops = {"handoff": 1, "ping_pong": 2, "handoff_limit": limits.max_handoffs_per_turn + 1}[event]
        chain = [turn.agent]
        for hop in range(hops):
            current = chain[-1]
            options = spec.specialists[current].handoff_targets if current in spec.specialists else ()
            if event == "ping_pong" and hop == 1:
                target = chain[-2]
            elif looping and live.looping is not None:
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
                    Move(current, target, HandoffKind.HANDOFF, HandoffStatus.STOPPED, reason, summary, stop)
                )
                turn.answer = stop_summary(reason=stop, answer="", findings=[])
                turn.quality = 0.3
                break
            turn.moves.append(Move(current, target, HandoffKind.HANDOFF, reason=reason, context_summary=summary))
            live.paths.append((current, target))
            chain.append(target)
        turn.agent = chain[-1]
        turn.agents = list(chain)

    def _coordinated_turn(self, live: _Live) -> _Turn:
        """A delegation profile's turn: the open sub-conversation's specialist, or the coordinator."""
        return self._sub_conversation_turn(live) if live.sub else self._coordinator_turn(live)

    def _sub_conversation_turn(self, live: _Live) -> _Turn:
        """The delegated specialist's next message: the customer follows up, closes, or asks for something
        out of its scope (or the specialist finds it needs follow-up, or cannot resolve it)."""
        rng, catalogue = self.rng, live.catalogue
        spec, sub = catalogue.spec, live.sub or {}
        specialist, intent = sub["specialist"], spec.router.intents_by_name.get(sub["intent"])
        decision = RouteDecision(
            route=specialist,
            agent=specialist,
            intent=sub["intent"],
            confidence=1.0,
            reason=f"Sub-conversation open with {specialist}: it receives the messages until it ends it.",
            method="sub_conversation",
            domain=spec.domain,
            mcp_tools=list(intent.mcp_tools) if intent else [],
            metadata={"candidates": []},
        )
        event = _threshold(rng.random(), SUB_EVENTS, "out_of_scope")
        others = [name for name in catalogue.specialists() if name != specialist and name in catalogue.by_keyword]
        if event == "out_of_scope" and not others:
            event = "completed"
        other = ""
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
        else:
            self._sub_return(live, turn, event, other)
        return turn

    def _sub_return(self, live: _Live, turn: _Turn, event: str, other: str) -> None:
        """The specialist ends its sub-conversation. The result reaches the coordinator with the next message;
        out of scope, the coordinator takes this same message at once and delegates it again."""
        coordinator, specialist, text = live.catalogue.spec.coordinator, turn.agent, turn.text
        if event == "out_of_scope":
            final: dict[str, Any] = {"reason": "out_of_scope", "suggested_specialist": other}
            note = f"Fora do meu escopo; parece ser assunto de {other}."
        else:
            final = {"resolved": event == "completed", "specialist": specialist, "last_answer": "..."}
            note = f"O cliente encerrou o assunto ({text!r})." if event == "completed" else ""
        reason = note or f"{specialist} ended its sub-conversation: {event}."
        summary = json.dumps(final, ensure_ascii=False)
        turn.moves.append(
            Move(specialist, coordinator, HandoffKind.RETURN, reason=reason, context_summary=summary, outcome=event)
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
            live.active_agent, live.active_intent = coordinator, turn.decision.intent
            return
        live.pending_result = None
        turn.notes.append((coordinator, result_note(result)))
        turn.model_calls += 1
        target = specialist if self.rng.random() < 0.05 else other  # now and then, straight back: ping-pong
        self._delegate(live, turn, coordinator, target, text, chain=[specialist, coordinator])

    def _coordinator_turn(self, live: _Live) -> _Turn:
        """The coordinator takes the message (with a finished sub-conversation's result): it delegates it, or
        answers a greeting itself."""
        rng, catalogue = self.rng, live.catalogue
        spec = catalogue.spec
        coordinator = spec.coordinator
        decision = RouteDecision(
            route=coordinator,
            agent=coordinator,
            intent=COORDINATION_INTENT,
            confidence=1.0,
            reason=f"{coordinator} coordinates: it answers or delegates every message outside a sub-conversation.",
            method="coordinator",
            domain=spec.domain,
            metadata={"candidates": []},
        )
        note = result_note(live.pending_result) if live.pending_result else ""
        live.pending_result = None
        delegates = [name for name in catalogue.specialists() if name in catalogue.by_keyword]
        target = ""
        if delegates and rng.random() < DELEGATE_SHARE:
            target = _pick(rng, {name: START_WEIGHTS.get(name, 0.1) for name in delegates})
            text, routed = rng.choice(catalogue.by_keyword[target])
            decision.metadata = {"candidates": [{"intent": routed.intent, "agent": target}]}
        else:
            text = rng.choice(VAGUE_TEXTS)
        turn = _Turn(text=text, decision=decision, mode=spec.routing_mode, agent=coordinator)
        if note:
            turn.notes.append((coordinator, note))
        if target and rng.random() < 0.012:  # a model naming a role it does not have
            wrong = rng.choice(UNKNOWN_TARGETS)
            reason = f"{wrong} is not a target of {coordinator}."
            turn.moves.append(
                Move(
                    coordinator,
                    wrong,
                    HandoffKind.DELEGATION,
                    HandoffStatus.REFUSED,
                    reason,
                    outcome=REFUSED_NOT_ALLOWED,
                )
            )
            turn.model_calls += 1
        if target:
            self._delegate(live, turn, coordinator, target, text, chain=[coordinator])
        else:
            turn.answer = GREETING_ANSWER
            live.active_agent, live.active_intent = coordinator, COORDINATION_INTENT
        return turn

    def _delegate(self, live: _Live, turn: _Turn, coordinator: str, target: str, text: str, chain: list[str]) -> None:
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
                Move(coordinator, target, HandoffKind.DELEGATION, HandoffStatus.STOPPED, reason, summary, stop)
            )
            turn.answer = stop_summary(reason=stop, answer="", findings=[])
            turn.agent, turn.quality = coordinator, 0.3
            live.active_agent, live.active_intent = coordinator, COORDINATION_INTENT
            return
        turn.moves.append(Move(coordinator, target, HandoffKind.DELEGATION, reason=reason, context_summary=summary))
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
        live: _Live,
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
            arguments = {"order_id": "P1**"} if server == "retail" else {"msisdn": "5511*****1234"}  # masked
            needs = tool == "diagnosticar_linha"
            if needs and tool not in live.granted and turn.decision.method != "permission":
                if allowed_for:  # a supervisor's part: left out rather than asked for
                    continue
                waiting = ToolResult(
                    tool, server, arguments, ToolCallStatus.PERMISSION_REQUIRED, error=PERMISSION_WAITING
                )
                turn.tool_calls.append(waiting.as_dict())
                live.pending_permission = {
                    "tool": tool,
                    "agent": agent,
                    "intent": turn.decision.intent,
                    "mcp_tools": list(offered),
                }
                # The platform's own question, in the customer's language, as the graph asks it.
                language, _ = _turn_language(live, turn.text)
                turn.answer = permission_question(spec, snapshot.current().tools[tool], language)
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
            result = {"status": "ok"} if status == ToolCallStatus.OK else None
            turn.tool_calls.append(ToolResult(tool, server, arguments, status, ms, result, error).as_dict())
            if status != ToolCallStatus.OK:
                turn.quality = max(turn.quality, 0.1)

    def _answer(self, spec: ProfileSpec, agent: str, intent: str) -> str:
        specialist = spec.specialists.get(agent)
        subject = specialist.display_name.lower() if specialist else intent.replace("_", " ")
        return self.rng.choice(ANSWERS).format(subject=subject)


def _classified(intent: IntentSpec, score: float) -> RouteDecision:
    """The classifier's decision for ``intent`` (offline: the most similar intent's examples)."""
    return RouteDecision(
        route=intent.agent,
        agent=intent.agent,
        intent=intent.name,
        confidence=score,
        reason=f"Offline classifier: message most similar to {intent.name} (cosine {score:.2f}).",
        method="llm",
        next_state=intent.next_state or None,
        domain=intent.domain or None,
        mcp_tools=list(intent.mcp_tools),
        metadata={
            "classifier": {
                "intent": intent.name,
                "confidence": score,
                "reason": f"Offline classifier: message most similar to {intent.name}.",
            }
        },
    )


# --- the rows: conversations.records builds them, the simulation dates them ---------------


def _conversation_row(local_id: int, who: _Who) -> Conversation:
    """The conversation as its first message creates it (``conversations.ordering.ticket_take``)."""
    return Conversation(id=local_id, **_conversation_columns(who))


def _conversation_columns(who: _Who) -> dict[str, Any]:
    """The columns ``who``'s conversation is created with: its key, tenant, profile, session, user and channel."""
    data = TurnInput(
        tenant_pk=who.tenant.pk,
        tenant_slug=who.tenant.slug,
        profile=who.catalogue.spec,
        text="",
        session_id=who.session_id,
        user_id=who.user_id,
        channel=who.channel,
    )
    return {"conversation_key": data.conversation_key, **conversation_defaults(data)}


def _conversation_turn(row: Conversation, record: TurnRecord, live: LiveState, rows: TurnRows) -> None:
    """What a turn's transaction does to its conversation's row (``conversation_turn_record``): the live state
    :func:`~conversations.records.conversation_updates` gives, the messages counted, the next ticket's turn."""
    counted = CountedAs(
        cohort=row.cohort, handoff_kinds=row.handoff_kinds, created_at=row.created_at, first=not row.message_count
    )
    for name, value in conversation_updates(record, live, counted).items():
        setattr(row, "escalation_id" if name == "escalation" else name, value)  # the update names the escalation's id
    row.message_count += len(rows.messages)
    row.turn_tickets_issued += 1
    row.turn_tickets_done += 1


ROW_STAMPS_SPAN = 0.01  # seconds: a turn's rows, 20 µs apart, take far less (fewer than 500 rows)


def _stamp(rows: TurnRows, persisted: float) -> None:
    """Date a turn's rows: stored together by one transaction, in order, microseconds apart."""
    ordered: list[Model] = [*rows.messages, *([rows.decision] if rows.decision else []), *rows.tool_calls]
    for tick, row in enumerate([*ordered, *rows.handoffs], start=1):
        row.created_at = _when(persisted + tick * 2e-5)


# --- replay ----------------------------------------------------------------------------------

REPLAY_POOL = 10_000  # simulated conversations kept to be replayed (about 150 MB of rows)
REPLAY_MINIMUM = 200  # a kind of conversation is replayed once this many of its kind are kept
REPLAY_FRESH = 0.05  # share of conversations simulated anew once their kind is replayed: the pool keeps changing
REPLAY_CUT = 3 * 86400.0  # seconds: conversations arriving this close to the range's end are always simulated


@dataclass(eq=False)
class _Template:
    """A simulated conversation kept to be replayed: its rows (per list of a :class:`Batch`), the places of its
    conversation and first message in that batch, how many messages it has, when it arrived, how long after that its
    last row is dated, the escalations it opened and what :meth:`Simulator.conversation` returned for it.

    Replayed by the database (:class:`_DatabaseReplays`), it is found by the ids it was written under (``stored``:
    its conversation's and its first message's), its rows are let go once written, and ``tally`` counts them for the
    report."""

    rows: dict[str, list[Model]]
    place: int
    first_message: int
    messages: int
    arrival: float
    span: float
    escalations: tuple[Any, ...]
    counted: tuple[int, Counter, Counter]
    tally: GenerateReport | None = None
    stored: tuple[int, int] | None = None


@dataclass
class _Replay:
    """A replay the database makes: ``template``'s rows for ``who``, moved by ``shift``, under the batch's places
    ``place`` (the conversation) and ``first_message`` on; ``escalation``: the new id of the escalation it opened."""

    template: _Template
    who: _Who
    shift: timedelta
    place: int
    first_message: int
    escalation: uuid.UUID | None


class Replayer:
    """Conversations as the :class:`Simulator` draws them, most of them replayed: the rows of a conversation
    simulated earlier, of the same profile, cohort and side of the supervisor period, for the customer drawn (tenant,
    user, session, channel) at the moment drawn, under new ids.

    Simulating a conversation turn by turn costs far more than writing it; a replay copies its rows' values and
    moves their times (in Python, or in the database: ``in_database``, see :class:`_DatabaseReplays`). A kind of
    conversation is replayed once :data:`REPLAY_MINIMUM` of its kind were simulated, then :data:`REPLAY_FRESH` of them
    are simulated anew and take a random place among the ``pool`` kept, so the mix drawn stays the simulator's.
    Conversations arriving in the last :data:`REPLAY_CUT` of the range are always simulated, and a kept one is
    replayed only where all of it falls before the range's end (else it is simulated): what happens after a
    conversation's last message (a person still answering, the close) depends on that end. Everything comes from the
    simulator's ``rng``, in the same order either way: a seed gives the same rows.
    """

    def __init__(self, simulator: Simulator, *, pool: int, minimum: int, fresh: float, in_database: bool = False):
        self.simulator = simulator
        self.pool, self.minimum, self.fresh = pool, max(minimum, 1), fresh
        self.in_database = in_database
        self.kept: dict[tuple[str, bool, bool], list[_Template]] = {}
        self.stored = 0
        self.replayed: Counter[_Template] = Counter()  # replays the database made of each template (the report's)
        self._drawn: tuple[tuple[str, bool, bool], _Template] | None = None  # kept once accepted

    def conversation(self, batch: Batch) -> tuple[int, Counter, Counter]:
        """Add one conversation to ``batch``, simulated or replayed; returns (handoffs, kinds, methods). A simulated
        one that may be replayed is kept once :meth:`accepted`."""
        simulator = self.simulator
        rng = simulator.rng
        who, turns, arrival = simulator.drawn()
        kind = (who.catalogue.agent_id, who.multi_agent, arrival >= simulator.supervisor_from)
        kept = self.kept.setdefault(kind, [])
        self._drawn = None
        early = arrival < simulator.until - REPLAY_CUT
        if self.pool and early and len(kept) >= self.minimum and rng.random() >= self.fresh:
            template = kept[rng.randrange(len(kept))]
            if arrival + template.span <= simulator.until:
                return self._replay(template, who, arrival, batch)
        place, first_message, mark = batch.conversation_place(), batch.message_place(), batch.mark()
        counted = simulator.conversation(place, batch, who, turns, arrival)
        if self.pool and early:
            rows = {name: getattr(batch, name)[mark[name] :] for name in TABLE_NAMES}
            arrived = rows["conversations"][0].created_at.timestamp()
            self._drawn = (
                kind,
                _Template(
                    rows=rows,
                    place=place,
                    first_message=first_message,
                    messages=len(rows["messages"]),
                    arrival=arrived,
                    span=_last_moment(rows) - arrived,
                    escalations=tuple(row.pk for row in rows["escalations"]),
                    counted=counted,
                ),
            )
        return counted

    def accepted(self, batch: Batch) -> None:
        """The conversation drawn last stays in ``batch``: keep it to be replayed, if it may be."""
        if self._drawn is None:
            return
        (kind, template), self._drawn = self._drawn, None
        kept = self.kept[kind]
        if self.stored < self.pool:
            kept.append(template)
            self.stored += 1
        else:  # a random one of its kind makes room: the pool follows what is drawn
            index = self.simulator.rng.randrange(len(kept))
            if self.in_database:
                batch.dropped.append(kept[index])
            kept[index] = template
        if self.in_database:
            if len(template.escalations) > 1:
                raise BenchDataError("a kept conversation opened more than one escalation: it cannot be replayed.")
            template.tally = _count(GenerateReport(), Batch(**template.rows), Counter())
            batch.kept.append(template)

    def _replay(self, template: _Template, who: _Who, arrival: float, batch: Batch) -> tuple[int, Counter, Counter]:
        rng = self.simulator.rng
        escalations = {pk: uuid.UUID(int=rng.getrandbits(128), version=4) for pk in template.escalations}
        shift = timedelta(seconds=arrival - template.arrival)
        if not self.in_database:
            _replay(template, who, shift, batch, escalations)
            return template.counted
        place, first_message = batch.conversation_place(), batch.message_place()
        escalation = next(iter(escalations.values()), None)
        batch.replays.append(_Replay(template, who, shift, place, first_message, escalation))
        batch.replayed_messages += template.messages
        batch.replayed_handoffs += template.counted[0]
        return template.counted


def _last_moment(rows: dict[str, list[Model]]) -> float:
    """The latest moment any of ``rows`` is dated at (epoch seconds)."""
    return max(
        moment.timestamp()
        for each in rows.values()
        for row in each
        for attname in _moved(type(row))
        if (moment := getattr(row, attname)) is not None
    )


_MOVED: dict[type[Model], tuple[str, ...]] = {}  # a model's date-time attributes, moved with a replay


def _moved(model: type[Model]) -> tuple[str, ...]:
    found = _MOVED.get(model)
    if found is None:
        found = _MOVED[model] = tuple(
            each.attname for each in model._meta.concrete_fields if each.get_internal_type() == "DateTimeField"
        )
    return found


def _replay(template: _Template, who: _Who, shift: timedelta, batch: Batch, escalations: dict[Any, uuid.UUID]) -> None:
    """Append a copy of ``template``'s rows to ``batch``: ``who``'s, moved by ``shift``, under new places, the
    escalations it opened under the ids ``escalations`` gives them."""
    first = batch.message_place() - template.first_message  # added to a message's place in the template's batch
    local_id = batch.conversation_place()
    fresh = _conversation_columns(who)
    for name, rows in template.rows.items():
        into = getattr(batch, name)
        for row in rows:
            copied = row.__dict__.copy()
            for attname in _moved(type(row)):
                if copied[attname] is not None:
                    copied[attname] += shift
            if "tenant_id" in copied:
                copied["tenant_id"] = who.tenant.pk
            if "conversation_id" in copied:
                copied["conversation_id"] = local_id
            if name == "messages":
                copied["id"] += first
                copied["metadata"] = _replayed_metadata(copied["metadata"], who, escalations)
            elif "message_id" in copied:
                copied["message_id"] += first
            if name == "conversations":
                copied.update(fresh, id=local_id)
                copied["escalation_id"] = escalations.get(copied["escalation_id"], copied["escalation_id"])
                sub = copied["sub_conversation"]
                if sub and sub.get("started_at"):
                    copied["sub_conversation"] = {**sub, "started_at": _moved_seconds(sub["started_at"], shift)}
            elif name == "escalations":
                copied["id"] = escalations[copied["id"]]
            elif name == "ratings":
                copied["user_id"] = who.user_id
            copy_ = row.__class__.__new__(row.__class__)
            copy_.__dict__ = copied
            into.append(copy_)


def _moved_seconds(moment: float, shift: timedelta) -> float:
    """``moment`` (epoch seconds, to the millisecond) moved by ``shift``, to the millisecond: in decimal, as the
    database moves it (:data:`_REPLAYED_COLUMNS`), so that either way of replaying gives the same number."""
    moved = Decimal(repr(moment)) + Decimal(shift // timedelta(microseconds=1)) / 1_000_000
    return float(moved.quantize(Decimal("0.001"), ROUND_HALF_UP))


def _replayed_metadata(metadata: dict[str, Any], who: _Who, escalations: dict[Any, uuid.UUID]) -> dict[str, Any]:
    """A message's metadata for ``who``: the customer's id and channel, their side of the flag, and the escalation
    it names (its id, or the escalation as the customer saw it), where it says."""
    if "user_id" not in metadata and "flags" not in metadata and "escalation" not in metadata:
        return metadata
    changed = dict(metadata)
    if "user_id" in changed:
        changed.update(user_id=who.user_id, channel=who.channel)
    if "flags" in changed:
        changed["flags"] = who.flags
    shown = changed.get("escalation")
    if isinstance(shown, str):
        changed["escalation"] = _replayed_id(shown, escalations)
    elif isinstance(shown, dict) and isinstance(shown.get("id"), str):
        changed["escalation"] = {**shown, "id": _replayed_id(shown["id"], escalations)}
    return changed


def _replayed_id(value: str, escalations: dict[Any, uuid.UUID]) -> str:
    """The replay's id of the escalation ``value`` names; anything else as it is."""
    try:
        return str(escalations.get(uuid.UUID(value), value))
    except ValueError:
        return value


class _DatabaseReplays:
    """Replays made by PostgreSQL: ``INSERT … SELECT`` from the kept conversations' rows, table by table.

    The rows of each kept conversation are copied, once written, into a temporary table per table (``bench_kept_`` and
    the table's name, indexed on the conversation). Each batch's replays go by ``COPY`` into a temporary table of their
    own (:data:`REPLAYS`: per replay its conversation's id, the template's, what to add to a message id, the customer's
    tenant, user, session, channel and flags, the shift in time, the escalation's new id), and one statement per table
    writes the replayed rows from the two: the values :func:`_replay` gives in Python, for a few bytes a row from
    Python (:func:`_replayed_sql`). Rows the database numbers (decisions, tool calls, handoffs, ratings, outcomes) take
    their ids from their sequences; a handoff goes to its month's partition.
    """

    REPLAYS = "bench_replays"
    KEPT = "bench_kept_"

    def __init__(self) -> None:
        self.kept = 0  # conversations in the kept tables
        self.analyzed = 0  # ... when their statistics were last taken

    @staticmethod
    def key(model: type[Model]) -> str:
        """The column a kept row is found by: its conversation's id."""
        return model._meta.pk.column if model is Conversation else model._meta.get_field("conversation").column

    def create(self) -> None:
        quote = connection.ops.quote_name
        with connection.cursor() as cursor:
            cursor.execute(
                f"CREATE TEMPORARY TABLE {self.REPLAYS} (id bigint, template bigint, message_shift bigint, "
                "tenant_id bigint, session_id text, conversation_key text, user_id text, customer text, channel text, "
                "flags jsonb, shift_us bigint, escalation uuid, template_escalation uuid, "
                "shift interval GENERATED ALWAYS AS (shift_us * interval '1 microsecond') STORED, "
                "shift_s numeric GENERATED ALWAYS AS (shift_us / 1000000.0) STORED)"
            )
            for model, _ in TABLES:
                table = model._meta.db_table
                kept = quote(self.KEPT + table)
                cursor.execute(f"CREATE TEMPORARY TABLE {kept} (LIKE {quote(table)})")
                cursor.execute(f"CREATE INDEX ON {kept} ({quote(self.key(model))})")

    def drop(self) -> None:
        quote = connection.ops.quote_name
        tables = [self.REPLAYS, *(quote(self.KEPT + model._meta.db_table) for model, _ in TABLES)]
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {', '.join(tables)}")

    def write(self, batch: Batch, bases: dict[type[Model], int]) -> None:
        """After the batch's simulated rows: keep its templates, write its replays, forget the templates dropped."""
        quote = connection.ops.quote_name
        with connection.cursor() as cursor:
            if batch.kept:
                for template in batch.kept:
                    template.stored = (bases[Conversation] + template.place, bases[Message] + template.first_message)
                    template.rows = {}
                self._copy(cursor, "INSERT INTO {kept} SELECT * FROM {table} WHERE {key} = ANY(%s)", batch.kept)
                self.kept += len(batch.kept)
                if self.kept >= 2 * self.analyzed:  # the planner's idea of their size
                    cursor.execute("ANALYZE " + ", ".join(quote(self.KEPT + m._meta.db_table) for m, _ in TABLES))
                    self.analyzed = self.kept
            if batch.replays:
                self._plan(cursor, batch.replays, bases)
                for model, _ in TABLES:
                    cursor.execute(_replayed_sql(model, self.REPLAYS, quote(self.KEPT + model._meta.db_table)))
            if batch.dropped:
                self._copy(cursor, "DELETE FROM {kept} WHERE {key} = ANY(%s)", batch.dropped)
                self.kept -= len(batch.dropped)

    def _copy(self, cursor: Any, sql: str, templates: Sequence[_Template]) -> None:
        """Run ``sql`` for each table, with the ids of ``templates``' conversations."""
        quote = connection.ops.quote_name
        ids = [template.stored[0] for template in templates if template.stored is not None]
        for model, _ in TABLES:
            table = model._meta.db_table
            query = sql.format(kept=quote(self.KEPT + table), table=quote(table), key=quote(self.key(model)))
            cursor.execute(query, [ids])

    def _plan(self, cursor: Any, replays: Sequence[_Replay], bases: dict[type[Model], int]) -> None:
        columns = "id, template, message_shift, tenant_id, session_id, conversation_key, user_id, customer, channel, "
        columns += "flags, shift_us, escalation, template_escalation"
        cursor.execute(f"TRUNCATE {self.REPLAYS}")
        first_conversation, first_message = bases[Conversation], bases[Message]
        microsecond = timedelta(microseconds=1)
        with connection.wrap_database_errors, cursor.cursor.copy(f"COPY {self.REPLAYS} ({columns}) FROM STDIN") as copy:
            for replay in replays:
                template, who = replay.template, replay.who
                assert template.stored is not None  # written in this batch or an earlier one
                fresh = _conversation_columns(who)
                copy.write_row(
                    (
                        first_conversation + replay.place,
                        template.stored[0],
                        first_message + replay.first_message - template.stored[1],
                        who.tenant.pk,
                        fresh["session_id"],
                        fresh["conversation_key"],
                        fresh["user_id"],
                        who.user_id,
                        fresh["channel"],
                        json.dumps(who.flags),
                        replay.shift // microsecond,
                        replay.escalation,
                        template.escalations[0] if template.escalations else None,
                    )
                )
        cursor.execute(f"ANALYZE {self.REPLAYS}")


# What a replay changes of a kept row, as SQL over the replay (p) and the kept row (t): the columns no foreign key
# or date-time rule covers (:func:`_replayed_value`), as :func:`_replay` and :func:`_replayed_metadata` change them.
_ESCALATION_TEXT = "p.template_escalation::text"
_REPLAYED_COLUMNS: dict[tuple[type[Model], str], str] = {
    **{(Conversation, name): f"p.{name}" for name in ("session_id", "conversation_key", "user_id", "channel")},
    (Conversation, "sub_conversation"): (
        "CASE WHEN (t.sub_conversation->>'started_at')::numeric <> 0 THEN jsonb_set(t.sub_conversation, "
        "'{started_at}', to_jsonb(round((t.sub_conversation->>'started_at')::numeric + p.shift_s, 3))) "
        "ELSE t.sub_conversation END"
    ),
    (Message, "metadata"): (
        "CASE WHEN t.metadata ?| ARRAY['user_id', 'flags', 'escalation'] THEN t.metadata"
        " || CASE WHEN t.metadata ? 'user_id' THEN jsonb_build_object('user_id', p.customer, 'channel', p.channel)"
        " ELSE '{}' END"
        " || CASE WHEN t.metadata ? 'flags' THEN jsonb_build_object('flags', p.flags) ELSE '{}' END"
        f" || CASE WHEN t.metadata->>'escalation' = {_ESCALATION_TEXT}"
        " THEN jsonb_build_object('escalation', p.escalation::text)"
        f" WHEN t.metadata->'escalation'->>'id' = {_ESCALATION_TEXT} THEN jsonb_build_object('escalation',"
        " jsonb_set(t.metadata->'escalation', '{id}', to_jsonb(p.escalation::text))) ELSE '{}' END"
        " ELSE t.metadata END"
    ),
    (MessageFeedback, "user_id"): "p.customer",
}


def _replayed_value(model: type[Model], model_field: Field) -> str | None:
    """The SQL of ``model_field``'s value in a replayed row; ``None``: the database gives it (an id it numbers)."""
    column = f"t.{connection.ops.quote_name(model_field.column)}"
    special = _REPLAYED_COLUMNS.get((model, model_field.attname))
    if special is not None:
        return special
    target = _identifies(model, model_field)
    if target is Conversation:
        return "p.id"
    if target is Message:
        return f"{column} + p.message_shift"
    if target is Escalation:
        return f"CASE WHEN {column} IS NULL THEN NULL ELSE p.escalation END"
    if target is Tenant:
        return "p.tenant_id"
    if model_field.primary_key:
        return None
    if model_field.get_internal_type() == "DateTimeField":
        return f"{column} + p.shift"
    return column


def _replayed_sql(model: type[Model], replays: str, kept: str) -> str:
    """``INSERT … SELECT``: the replays (``replays``) of ``model``'s kept rows (``kept``)."""
    quote = connection.ops.quote_name
    values = [(each.column, _replayed_value(model, each)) for each in model._meta.concrete_fields]
    columns = ", ".join(quote(column) for column, value in values if value is not None)
    select = ", ".join(value for _, value in values if value is not None)
    key = quote(_DatabaseReplays.key(model))
    return (
        f"INSERT INTO {quote(model._meta.db_table)} ({columns}) "  # noqa: S608 (names from _meta)
        f"SELECT {select} FROM {replays} p JOIN {kept} t ON t.{key} = p.template"
    )


# --- writing -------------------------------------------------------------------------------


def _reserve_ids(model: type[Model], count: int) -> int:
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


def _write(model: type[Model], rows: Sequence[Model], bases: dict[type[Model], int]) -> None:
    """Insert ``rows`` in one statement: every concrete field's column (the id when the rows carry one), each
    value prepared as a save prepares it (:func:`_prepared`).

    Ids of conversations and messages, and the references to them, are places in the batch: ``bases`` (the
    first id reserved for the batch, per model) turns them into ids.
    """
    if not rows:
        return
    fields = [each for each in model._meta.concrete_fields if not each.primary_key or rows[0].pk is not None]
    offsets = [(i, bases[target]) for i, each in enumerate(fields) if (target := _identifies(model, each)) in bases]
    quote = connection.ops.quote_name
    table, columns = quote(model._meta.db_table), ", ".join(quote(each.column) for each in fields)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # The raw psycopg cursor's errors are Django's (IntegrityError, ...) only inside this wrapper.
            with connection.wrap_database_errors, cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as stream:
                for values in _prepared(fields, rows, offsets):
                    stream.write_row(values)
            return
        placeholders = ", ".join(["%s"] * len(fields))
        sql = f"INSERT INTO {table} ({columns}) VALUES ({placeholders})"  # noqa: S608
        cursor.executemany(sql, list(_prepared(fields, rows, offsets)))


def _identifies(model: type[Model], model_field: Field) -> type[Model] | None:
    """The model whose rows ``model_field`` holds ids of: ``model`` for its primary key, the related model for a
    foreign key, ``None`` for any other field."""
    if model_field.is_relation:
        return model_field.related_model
    return model if model_field.primary_key else None


def _prepared(
    fields: Sequence[Field], rows: Iterable[Model], offsets: Sequence[tuple[int, int]] = ()
) -> Iterator[list[Any]]:
    """Each row's values of ``fields`` as a save sends them (``get_db_prep_save``: JSON encoded, datetimes
    adapted to the database, ...), after adding ``offsets`` (position, number) to the values at those positions.

    Most values come back from ``get_db_prep_save`` unchanged (a str in a CharField, an aware datetime on
    PostgreSQL) or as good as unchanged (:func:`_as_given`): which ones is learnt from the first row of each
    combination of value types, and only the others are prepared in the rows that follow (a bulk load calls it for
    millions of values).
    """
    database = connections[DEFAULT_DB_ALIAS]  # what ``connection`` stands for, without a lookup per value
    read = operator.attrgetter(*(each.attname for each in fields))
    prepare = [each.get_db_prep_save for each in fields]
    changed: dict[tuple[type, ...], list[int]] = {}  # value types → positions whose value preparing changes
    for row in rows:
        values = list(read(row)) if len(fields) > 1 else [read(row)]
        for i, offset in offsets:
            values[i] += offset
        kinds = tuple(map(type, values))
        positions = changed.get(kinds)
        if positions is None:
            prepared = [prep(value, database) for prep, value in zip(prepare, values, strict=True)]
            changed[kinds] = [
                i for i, (value, ready) in enumerate(zip(values, prepared, strict=True)) if not _as_given(value, ready)
            ]
            yield prepared
            continue
        for i in positions:
            values[i] = prepare[i](values[i], database)
        yield values


def _as_given(value: Any, ready: Any) -> bool:
    """Whether preparing ``value`` gave it back, or the same integer in one of psycopg's integer types (PostgreSQL's
    integer columns get an ``Int4``, an ``Int8``, …, which tell a query's parameter its type: a ``COPY`` row writes
    either as the same digits)."""
    return ready is value or (
        type(value) is int and isinstance(ready, int) and type(ready) is not bool and ready == value
    )


def _flush(batch: Batch, replays: _DatabaseReplays | None) -> None:
    """Write a batch in one transaction: conversations and messages get their ids, the references follow; then the
    replays the database makes (``replays``)."""
    with transaction.atomic():
        _references_trusted()
        bases = {
            Conversation: _reserve_ids(Conversation, batch.conversation_place()),
            Message: _reserve_ids(Message, batch.message_place()) if batch.message_place() else 0,
        }
        for model, name in TABLES:
            _write(model, getattr(batch, name), bases)
        if replays is not None:
            replays.write(batch, bases)


def _references_trusted() -> None:
    """PostgreSQL, as a superuser: the transaction's rows are not checked against the rows they point at (the foreign
    keys' triggers stay off: ``session_replication_role``), as a restore loads rows known to be whole. The checks,
    deferred to the commit, cost more than writing the rows: each row's references looked up one by one. Unique
    constraints still hold (a --seed written twice fails on the conversations' keys)."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        if cursor.fetchone()[0]:
            cursor.execute("SET LOCAL session_replication_role = replica")


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


def bench_people_ensure() -> list[Person]:
    """The desk's people: staff users ``bench_person_1`` … (Ana, Bruno, …) who may answer as a person for every
    tenant, created when missing."""
    answer = Permission.objects.get(codename=TenantRight.ANSWER.value, content_type__app_label="tenants")
    people = []
    for number, name in enumerate(PEOPLE, start=1):
        user, created = get_user_model().objects.get_or_create(
            username=f"{BENCH_PERSON_PREFIX}{number}", defaults={"first_name": name, "is_staff": True}
        )
        if created:
            user.user_permissions.add(answer)
        people.append(person_of_user(user))
    return people


def bench_data_clear() -> dict[str, int]:
    """Delete every conversation of the bench tenants and what hangs from it; other tenants are untouched.

    The tenants stay (with their API keys), and the desk's people. One ``DELETE`` per table, dependents first: Django's
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
    pool: int = REPLAY_POOL,
    in_database: bool | None = None,
    bulk: bool = False,
) -> GenerateReport:
    """Generate conversations until exactly ``count`` handoff rows were written, in batches of about ``batch``.

    Every row's ``created_at`` lies in ``[until - days, until]`` (``until`` defaults to now). A
    conversation whose moves would pass ``count`` is drawn again, so the last one fits exactly and
    every conversation is whole. Each batch is one transaction. ``pool``: conversations kept to replay
    (:class:`Replayer`; 0: every conversation simulated). ``in_database``: the replays are made by the database
    (:class:`_DatabaseReplays`), not copied in Python; by default on PostgreSQL.

    ``bulk`` (PostgreSQL, outside a transaction): loaded as a restore loads, the same rows — the tables' secondary
    indexes dropped and built again after the rows (:func:`bench.bulk_load.indexes_deferred`, all but those the load
    reads by), and each batch written by a thread of its own while the next one is drawn
    (:class:`bench.bulk_load.BackgroundWriter`).
    """
    if count < 0 or tenants < 1 or days < 1 or batch < 1 or pool < 0:
        raise BenchDataError("count and pool must be ≥ 0, and tenants, days and batch ≥ 1.")
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
        people=bench_people_ensure(),
    )
    if in_database is None:
        in_database = connection.vendor == "postgresql"
    if in_database and connection.vendor != "postgresql":
        raise BenchDataError("the database makes the replays on PostgreSQL only.")
    if bulk and (connection.vendor != "postgresql" or connection.in_atomic_block):
        raise BenchDataError(f"bulk loads are for PostgreSQL; {ERROR_IN_TRANSACTION}")
    replayer = Replayer(
        simulator, pool=pool, minimum=min(REPLAY_MINIMUM, pool // 20), fresh=REPLAY_FRESH, in_database=in_database
    )
    report = GenerateReport()
    partitions_ensure(since=_when(end - days * 86400))  # PostgreSQL: the rows go to their months, not the DEFAULT
    replays = _DatabaseReplays() if in_database else None
    keep = {model._meta.db_table: _DatabaseReplays.key(model) for model, _ in TABLES}
    with indexes_deferred(keep) if bulk else contextlib.nullcontext() as deferred:
        writing = _writer(replays, bulk=bulk, target=count, progress=progress, started=started, report=report)
        with writing as writer, _cycle_collector_paused():
            _batches(replayer, writer, count=count, size=batch, report=report)
        report.writing_seconds = time.perf_counter() - started
    if deferred is not None:
        report.index_seconds, report.indexes_built = deferred.seconds, len(deferred.indexes)
    for template, times in replayer.replayed.items():
        _add(report, template.tally, times)
    _statistics_refresh()
    # The rows are dated back: sum their days into the analytics' daily totals again (today stays live).
    summing = time.perf_counter()
    report.days_summed = len(rollup_build(first=_when(end - days * 86400).date(), last=until.date(), rebuild=True))
    report.rollup_seconds = time.perf_counter() - summing
    report.seconds = time.perf_counter() - started
    return report


def _statistics_refresh() -> None:
    """ANALYZE the tables just filled (PostgreSQL), so the next query plans see their size: a ``--clear`` right
    after a large load otherwise checks each deleted row's references by scanning tables it believes empty."""
    if connection.vendor != "postgresql":
        return
    tables = [model._meta.db_table for model, _ in TABLES]
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE " + ", ".join(connection.ops.quote_name(table) for table in tables))


@dataclass
class _Written:
    """A batch to write, and the report's totals once it is: what :class:`Progress` says then."""

    batch: Batch
    handoffs: int
    conversations: int
    messages: int


class _Writer:
    """Writes each batch in the caller's thread (:func:`_flush`), then reports progress."""

    def __init__(
        self,
        replays: _DatabaseReplays | None,
        *,
        target: int,
        progress: Callable[[Progress], None] | None,
        started: float,
    ):
        self.replays, self.target, self.progress, self.started = replays, target, progress, started
        self.seconds = 0.0  # spent writing

    def start(self) -> None:
        if self.replays is not None:
            self.replays.create()

    def finish(self) -> None:
        if self.replays is not None:
            self.replays.drop()

    def write(self, written: _Written) -> None:
        begun = time.perf_counter()
        _flush(written.batch, self.replays)
        self.seconds += time.perf_counter() - begun
        if self.progress is not None:
            seconds = time.perf_counter() - self.started
            self.progress(Progress(written.handoffs, self.target, written.conversations, written.messages, seconds))

    def put(self, written: _Written) -> None:
        self.write(written)


@contextlib.contextmanager
def _writer(
    replays: _DatabaseReplays | None,
    *,
    bulk: bool,
    target: int,
    progress: Callable[[Progress], None] | None,
    started: float,
    report: GenerateReport,
) -> Iterator[_Writer | BackgroundWriter]:
    """Where :func:`_batches` puts its batches: written at once, or (``bulk``) by a :class:`BackgroundWriter` while the
    next one is drawn — the same statements in the same order, so the same ids. A batch whose conversation keys are
    taken says so (:data:`ERROR_ALREADY_GENERATED`). ``report`` gets the seconds spent writing."""
    writer = _Writer(replays, target=target, progress=progress, started=started)
    try:
        if not bulk:
            writer.start()
            try:
                yield writer
            finally:
                writer.finish()
                report.loading_seconds = writer.seconds
            return
        background = BackgroundWriter(writer.write, start=writer.start, finish=writer.finish)
        try:
            yield background
        finally:
            background.close()
            report.loading_seconds = writer.seconds
    except IntegrityError as exc:
        raise BenchDataError(f"{ERROR_ALREADY_GENERATED} ({exc})") from exc


def _batches(
    replayer: Replayer, writer: _Writer | BackgroundWriter, *, count: int, size: int, report: GenerateReport
) -> None:
    """Draw conversations and give them to ``writer``, a transaction per ``size`` handoffs, until ``count`` handoffs
    are written."""
    current = Batch()
    written = 0
    while written + current.handoff_count() < count or current.conversation_place():
        begun = time.perf_counter()
        if written + current.handoff_count() < count:
            _draw(replayer, current, count - written - current.handoff_count(), report)
        report.drawing_seconds += time.perf_counter() - begun
        if current.handoff_count() >= size or written + current.handoff_count() >= count:
            written += current.handoff_count()
            _count(report, current, replayer.replayed)
            writer.put(_Written(current, written, report.conversations, report.messages))
            current = Batch()


@contextlib.contextmanager
def _cycle_collector_paused() -> Iterator[None]:
    """Pause Python's cycle collector while the batches are drawn and written.

    A batch holds a few hundred thousand model instances and none is in a reference cycle, but the collector
    would walk them again and again while they are made: about a third of the generator's time.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _draw(replayer: Replayer, batch: Batch, remaining: int, report: GenerateReport) -> None:
    """Add one conversation to ``batch`` with at most ``remaining`` handoffs (drawing again until one fits)."""
    while True:
        mark = batch.mark()
        handoffs, kinds, methods = replayer.conversation(batch)
        if handoffs <= remaining:
            replayer.accepted(batch)
            report.kinds.update(kinds)
            report.methods.update(methods)
            return
        batch.cut(mark)


def _count(report: GenerateReport, batch: Batch, replayed: Counter[_Template]) -> GenerateReport:
    """Count ``batch``'s rows into ``report`` (and returns it); of the replays the database makes, their handoffs,
    conversations and messages, and how many there were of each template in ``replayed`` (the rest: :func:`_add`)."""
    for replay in batch.replays:
        report.handoffs += replay.template.counted[0]
        report.messages += replay.template.messages
        replayed[replay.template] += 1
    report.conversations += len(batch.replays)
    report.handoffs += len(batch.handoffs)
    report.conversations += len(batch.conversations)
    report.messages += len(batch.messages)
    report.decisions += len(batch.decisions)
    report.tool_calls += len(batch.tool_calls)
    report.cohorts.update(conversation.cohort for conversation in batch.conversations)
    report.tool_statuses.update(call.status for call in batch.tool_calls)
    report.outcomes.update(handoff.outcome for handoff in batch.handoffs if handoff.outcome)
    report.endings.update(conversation.outcome for conversation in batch.conversations)
    report.escalations.update(escalation.reason for escalation in batch.escalations)
    report.escalation_statuses.update(escalation.status for escalation in batch.escalations)
    report.desk_messages.update(
        message.role for message in batch.messages if message.role in (MessageRole.HUMAN, MessageRole.NOTE)
    )
    report.ratings.update(rating.rating for rating in batch.ratings)
    return report


COUNTERS = ("cohorts", "tool_statuses", "outcomes", "endings", "escalations", "escalation_statuses", "desk_messages")
COUNTERS += ("ratings",)  # the GenerateReport counters a replay adds to


def _add(report: GenerateReport, tally: GenerateReport | None, times: int) -> None:
    """Add ``times`` replays of a template whose rows ``tally`` counted (but for handoffs, conversations and messages,
    which :func:`_count` counted)."""
    if tally is None:
        return
    report.decisions += tally.decisions * times
    report.tool_calls += tally.tool_calls * times
    for name in COUNTERS:
        getattr(report, name).update({key: count * times for key, count in getattr(tally, name).items()})
