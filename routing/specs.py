"""The compiled configuration's types: frozen data, no ORM — what the message path, the routing decision and the
engine read of a profile, its specialists, tools, servers and remote backends.

:func:`routing.documents.profile_compile` makes a :class:`ProfileSpec` from a profile's document; the loader
(:mod:`routing.snapshot`) holds one per served profile, draft and rollout candidate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings

from agents.public import EscalationSettings, KnowledgeSettings, SpecialistKnowledge
from common.translations import Translations, translated, translated_only
from routing.goals.planner import DEFAULT_CONFIDENCE_THRESHOLD, GoalCatalogue
from routing.repairs import RepairWords
from routing.replies import ReplyWords
from routing.router import CompiledRouter, IntentSpec


@dataclass(frozen=True)
class ServerSpec:
    name: str
    endpoint: str
    transport: str
    timeout: float
    enabled: bool


@dataclass(frozen=True)
class ToolSpec:
    name: str
    server: str
    description: str
    args_schema: dict[str, Any]
    needs_permission: bool
    enabled: bool
    read_only: bool | None = None  # what its server said at the last sync (None: never synced)
    remote_name: str = ""  # its name on the server when it is not ``name`` (agents.models.McpTool)

    @property
    def called_as(self) -> str:
        """The name its server knows it by."""
        return self.remote_name or self.name

    @property
    def changes_things(self) -> bool:
        """Whether a successful call may have changed something outside the conversation (a message sent, an order
        placed): its server said so, or did not say it only reads."""
        return self.read_only is False


@dataclass(frozen=True)
class ToolRights:
    """What a profile's version says about one tool: whether a call needs the user's permission, and whether the
    tool may be offered at all (enabled, on an enabled server)."""

    needs_permission: bool
    enabled: bool


@dataclass(frozen=True)
class SpecialistSpec:
    name: str
    display_name: str
    description: str
    prompt: str
    prompt_version: int | None
    allowed_tools: frozenset[str]
    handoff_targets: tuple[str, ...]
    step_limit: int
    # The display name and description in other languages than the profile's (common.translations).
    translations: Translations = field(default_factory=dict, hash=False)
    # Whether it searches the profile's knowledge before answering, and the tags it keeps to.
    knowledge: SpecialistKnowledge = field(default_factory=SpecialistKnowledge)
    # Whether its model is offered the built-in remember tool (conversations.memory.tool).
    remember_tool: bool = False


@dataclass(frozen=True)
class BackendSpec:
    """An enabled remote backend of a gateway profile (agents.RemoteBackend): another deployment the profile routes
    to like a specialist. Not versioned (as MCP servers are not): what is saved takes effect with the next snapshot."""

    name: str
    display_name: str
    description: str
    base_url: str
    api_key: str = field(repr=False)
    remote_agent_id: str
    keywords: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    priority: int = 100
    timeout: float = 30.0
    failures_to_open: int = 3
    open_seconds: float = 30.0
    kind: str = "gateway"  # agents.BackendKind: this platform's gateway API, or an A2A agent

    @property
    def intent_name(self) -> str:
        """The intent-like entry it is in the compiled router (routing.documents.profile_compile)."""
        return f"{BACKEND_INTENT_PREFIX}{self.name}"


BACKEND_INTENT_PREFIX = "backend:"


@dataclass(frozen=True)
class LoopSafety:
    """A profile's loop-safety limits, checked before every agent-to-agent handoff."""

    max_handoffs_per_turn: int = 3
    max_steps_per_agent: int = 10
    block_ping_pong: bool = True
    window: int = 5
    max_repeats: int = 3


@dataclass(frozen=True)
class ProfileSpec:
    """A profile as the turn reads it. Each attribute is a profile setting (agents/profile_settings.py: passed as is,
    or built by an explicit step of routing.documents.profile_compile) or built from the document's other parts;
    agents/tests/test_profile_settings.py holds them together."""

    pk: int
    agent_id: str
    name: str
    domain: str
    description: str
    policy: str
    synthesis_prompt: str
    routing_mode: str
    fallback_agent: str
    llm_router_enabled: bool
    llm_router_threshold: float
    handoffs_enabled: bool
    hybrid_followup_max_chars: int
    llm_model: str
    llm_temperature: float | None
    guardrails: dict[str, Any]
    judges: dict[str, Any]
    specialists: dict[str, SpecialistSpec]
    intents: tuple[IntentSpec, ...]
    router: CompiledRouter = field(repr=False, compare=False)
    coordinator: str = ""
    loop_safety: LoopSafety = field(default_factory=LoopSafety)
    confirmation_words: tuple[str, ...] = ()
    denial_words: tuple[str, ...] = ()
    closing_words: tuple[str, ...] = ()
    # The conversation stack (routing.stack): repair phrases, several requests in one message, open flows.
    repair_words: RepairWords = field(default_factory=RepairWords)
    multi_topic: str = "together"
    stack_depth: int = 3
    frame_expiry_turns: int = 6
    frame_expiry_minutes: int = 30
    resume_style: str = "explicit"
    # How the A2A face buckets a caller that names no user for the rollout flag (agents.AnonymousBucket).
    a2a_anonymous_bucket: str = "none"
    # Goal mode: the goals and capabilities the profile serves, and its confidence gate.
    goals: GoalCatalogue = field(default_factory=GoalCatalogue)
    goal_threshold: float = DEFAULT_CONFIDENCE_THRESHOLD
    # The authorisation of the tools the profile's document names (routing/documents.py), by tool name.
    tool_rights: Mapping[str, ToolRights] = field(default_factory=dict)
    # The released version this spec was compiled from (releases.versions); None: a draft, or never published.
    version: int | None = None
    # The model endpoint of the profile's answers ("": OPENAI_BASE_URL) and the environment variable holding its key
    # ("": OPENAI_API_KEY); agents.llm reads them through its ModelSettings protocol.
    llm_base_url: str = ""
    llm_api_key_env: str = ""
    # Supervisor mode's planner (agents.models.SupervisorPlanner) and the review of single-specialist turns.
    supervisor_planner: str = "keywords"
    review_single_turns: bool = False
    # Whether its conversations keep a running summary for the specialists (conversations.memory.summary).
    summarise_conversations: bool = True
    # Whether its specialists share a customer's remembered facts (conversations.memory).
    share_customer_memory: bool = True
    # Whether the summary's rewrite also keeps lasting facts about the customer (conversations.memory.summary).
    extract_customer_facts: bool = False
    # The enabled remote backends it routes to (a gateway profile), by name: agents in its router like specialists.
    backends: Mapping[str, BackendSpec] = field(default_factory=dict)
    # People in the loop: when its conversations go to a person, and when an idle one is closed.
    escalation: EscalationSettings = field(default_factory=EscalationSettings)
    # The language its texts (display names, subject lines) are written in: common.translations' fallback.
    language: str = "pt"
    # Its own name and description in other languages than ``language`` (common.translations).
    translations: Translations = field(default_factory=dict)
    # Retrieval from its knowledge before its specialists answer, and the relevance bar (agents.knowledge_settings).
    knowledge: KnowledgeSettings = field(default_factory=KnowledgeSettings)
    # The documents its knowledge searches: (source, file name, SHA-256) as its document holds them (a version the
    # ones it was published with, the draft the current ones); None, a version published before documents were
    # versioned: the current ones (knowledge.versions).
    knowledge_documents: frozenset[tuple[str, str, str]] | None = None
    # The synonyms of its knowledge's sources, by source name, as its document holds them (knowledge.synonyms; None:
    # a version published before synonyms were versioned: the current ones).
    knowledge_synonyms: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...] | None = None

    def authorised(self, tool: ToolSpec) -> ToolSpec:
        """``tool`` with this profile's ``needs_permission`` and ``enabled`` where its document names the tool."""
        rights = self.tool_rights.get(tool.name)
        if rights is None or (rights.needs_permission, rights.enabled) == (tool.needs_permission, tool.enabled):
            return tool
        return replace(tool, needs_permission=rights.needs_permission, enabled=rights.enabled)

    def name_in(self, language: str | None) -> str:
        """The profile's name as a customer of ``language`` reads it: its translation, else as written."""
        return translated(self.name, self.translations, "name", language, own=self.language)

    def own_description_in(self, language: str | None) -> str:
        """The profile's description in ``language``: its translation, else as written."""
        return translated(self.description, self.translations, "description", language, own=self.language)

    def display_name_in(self, specialist: SpecialistSpec, language: str | None) -> str:
        """``specialist``'s display name as a customer of ``language`` reads it: its translation, else as written (in
        the profile's language)."""
        return translated(specialist.display_name, specialist.translations, "display_name", language, own=self.language)

    def description_in(self, specialist: SpecialistSpec, language: str | None) -> str:
        """``specialist``'s description in ``language``: its translation, else as written (in the profile's
        language)."""
        return translated(specialist.description, specialist.translations, "description", language, own=self.language)

    def subject_line_in(self, intent: IntentSpec | None, language: str | None) -> str:
        """``intent``'s subject line in ``language`` only (``""`` when it has none in it): said inside a sentence of
        that language, where the profile's words would mix two languages."""
        if intent is None:
            return ""
        return translated_only(intent.description, intent.translations, "description", language, own=self.language)

    @property
    def reply_words(self) -> ReplyWords:
        """The profile's yes and no words, which read the answers to its yes/no questions (:mod:`routing.replies`)."""
        return ReplyWords(yes=self.confirmation_words, no=self.denial_words)

    @property
    def effective_mode(self) -> str:
        """``ROUTING_MODE`` from the environment overrides the profile's mode."""
        return settings.ROUTING_MODE or self.routing_mode

    @property
    def max_input_chars(self) -> int:
        """The longest message this profile takes: its guardrails' ``max_input_chars``, else ``MAX_INPUT_CHARS``."""
        return int(self.guardrails.get("max_input_chars", settings.MAX_INPUT_CHARS))
