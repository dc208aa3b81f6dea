"""The in-memory snapshot of all routing configuration, compiled once per version.

The message path reads profiles, specialists, intents, tools and servers from
:func:`current` — plain frozen data and one :class:`~routing.router.CompiledRouter`
per profile, compiled from the profile's document (:mod:`routing.documents`) — never from
the ORM. :func:`current` costs one version check
(:func:`common.config_version.config_version`, a cache read) and rebuilds the snapshot
when the version moved or this process changed routing data itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connections

from agents.escalation import EscalationSettings
from common.config_version import config_version, local_generation
from routing.goals import DEFAULT_CONFIDENCE_THRESHOLD, GOAL_MODE, GoalCatalogue
from routing.replies import ReplyWords
from routing.rollout import FlagSpec
from routing.rollout_plans import VersionRollout, history_parse
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
    # Goal mode: the goals and capabilities the profile serves, and its confidence gate.
    goals: GoalCatalogue = field(default_factory=GoalCatalogue)
    goal_threshold: float = DEFAULT_CONFIDENCE_THRESHOLD
    # The authorisation of the tools the profile's document names (routing/documents.py), by tool name.
    tool_rights: Mapping[str, ToolRights] = field(default_factory=dict)
    # The released version this spec was compiled from (routing.versions); None: a draft, or never published.
    version: int | None = None
    # The model endpoint of the profile's answers ("": OPENAI_BASE_URL) and the environment variable holding its key
    # ("": OPENAI_API_KEY); agents.llm reads them through its ModelSettings protocol.
    llm_base_url: str = ""
    llm_api_key_env: str = ""
    # Supervisor mode's planner (agents.models.SupervisorPlanner) and the review of single-specialist turns.
    supervisor_planner: str = "keywords"
    review_single_turns: bool = False
    # The enabled remote backends it routes to (a gateway profile), by name: agents in its router like specialists.
    backends: Mapping[str, BackendSpec] = field(default_factory=dict)
    # People in the loop: when its conversations go to a person, and when an idle one is closed.
    escalation: EscalationSettings = field(default_factory=EscalationSettings)

    def authorised(self, tool: ToolSpec) -> ToolSpec:
        """``tool`` with this profile's ``needs_permission`` and ``enabled`` where its document names the tool."""
        rights = self.tool_rights.get(tool.name)
        if rights is None or (rights.needs_permission, rights.enabled) == (tool.needs_permission, tool.enabled):
            return tool
        return replace(tool, needs_permission=rights.needs_permission, enabled=rights.enabled)

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


@dataclass(frozen=True)
class Snapshot:
    version: int
    generation: int
    profiles: dict[str, ProfileSpec]  # what customers are served: each profile's released version
    tools: dict[str, ToolSpec]
    servers: dict[str, ServerSpec]
    flags: dict[str, FlagSpec] = field(default_factory=dict)  # rollout flags by key
    # What editors try: each profile's draft (the same object as the released one when nothing changed since).
    drafts: dict[str, ProfileSpec] = field(default_factory=dict)
    released: dict[str, int] = field(default_factory=dict)  # agent_id → the version number served
    # Running (or paused) rollout plans of a version, by agent_id: which conversations the candidate serves.
    rollouts: dict[str, VersionRollout] = field(default_factory=dict)

    def profile(self, agent_id: str, *, draft: bool = False) -> ProfileSpec | None:
        """The profile customers get, or with ``draft`` the one its editors are changing."""
        return (self.drafts if draft else self.profiles).get(agent_id)


logger = logging.getLogger(__name__)

_lock = threading.Lock()
_current: Snapshot | None = None


def invalidate() -> None:
    """Drop this process's snapshot; the next :func:`current` rebuilds it."""
    global _current
    with _lock:
        _current = None


def current() -> Snapshot:
    """The up-to-date snapshot (sync; call through ``sync_to_async`` from async code)."""
    global _current
    version = config_version()
    generation = local_generation()
    snapshot = _current
    if snapshot is not None and snapshot.version == version and snapshot.generation == generation:
        return snapshot
    with _lock:
        snapshot = _current
        if snapshot is None or snapshot.version != version or snapshot.generation != generation:
            snapshot = build(version=version, generation=generation)
            _current = snapshot
        return snapshot


def snapshot_warm() -> None:
    """Compile the routing now (the demo profiles' examples index with it: about half a second of CPU), not in the
    first message that asks: for a process's start, before it serves. A database that does not answer yet is no
    error here — the first message compiles it then.

    Its connections are closed and a connection pool it opened is closed too, so that a process that forks after
    (Celery's prefork pool) leaves its children no pool whose connections and threads they would share."""
    try:
        compiled = current()
        logger.info(
            "Routing compiled at start: %d profiles, configuration version %s", len(compiled.profiles), compiled.version
        )
    except DatabaseError as exc:
        logger.warning("Routing not compiled at start (%s: %s); the first message compiles it", type(exc).__name__, exc)
    finally:
        for connection in connections.all(initialized_only=True):
            connection.close()
            close_pool = getattr(connection, "close_pool", None)  # PostgreSQL's, with the pool on or off
            if close_pool is not None:
                close_pool()


def build(*, version: int, generation: int) -> Snapshot:
    """Load every piece of configuration and compile the enabled profiles: a constant number of queries, whatever
    the sizes. A profile is compiled from a document (:mod:`routing.documents`), the one path to a
    :class:`ProfileSpec`: customers get the document of its released version (:mod:`routing.versions`), editors
    its draft — read from the models; a profile never published is served its draft. Tools, servers and rollout
    flags are global. While ``ROUTING_MODE=goal`` overrides every profile's mode, a profile that carries no goal
    (:func:`routing.documents.serves_every_domain`) is compiled with every synced domain's
    (:func:`routing.documents.with_every_domain`)."""
    from agents.models import AgentProfile
    from routing.documents import document_complete, every_domain_goals, profile_compile, profile_documents
    from routing.models import ProfileRelease

    drafts = profile_documents()
    pks = dict(AgentProfile.objects.values_list("agent_id", "pk"))  # read after: a profile deleted since is left out
    backends = backends_load()
    released = {
        agent_id: (number, document)
        for agent_id, number, document in ProfileRelease.objects.values_list(
            "profile__agent_id", "version__number", "version__document"
        )
    }
    # ROUTING_MODE=goal puts every profile in goal mode: one that carries no goal serves every synced domain's.
    every = every_domain_goals() if settings.ROUTING_MODE == GOAL_MODE else None
    profiles: dict[str, ProfileSpec] = {}
    draft_specs: dict[str, ProfileSpec] = {}
    for agent_id, draft in drafts.items():
        if agent_id not in pks:
            continue
        number, live = released.get(agent_id, (None, draft))
        if live["profile"]["enabled"]:
            profiles[agent_id] = profile_compile(
                live, pk=pks[agent_id], version=number, backends=backends.get(pks[agent_id], {}), every_domain=every
            )
        if draft["profile"]["enabled"]:
            # A version published before a key the draft holds at its default serves what the draft would.
            same = agent_id in profiles and (live == draft or document_complete(live) == draft)
            draft_specs[agent_id] = (
                profiles[agent_id]
                if same
                else profile_compile(
                    draft, pk=pks[agent_id], backends=backends.get(pks[agent_id], {}), every_domain=every
                )
            )
    return Snapshot(
        version=version,
        generation=generation,
        profiles=profiles,
        tools=_tools(),
        servers=_servers(),
        flags=_flags(),
        drafts=draft_specs,
        released={agent_id: number for agent_id, (number, _) in released.items()},
        rollouts=_rollouts(pks, profiles, backends),
    )


def backends_load(profile_pks: list[int] | None = None) -> dict[int, dict[str, BackendSpec]]:
    """The enabled remote backends of every profile (or of ``profile_pks``), by profile pk and name: one query."""
    from agents.models import RemoteBackend

    rows = RemoteBackend.objects.filter(enabled=True)
    if profile_pks is not None:
        rows = rows.filter(profile_id__in=profile_pks)
    out: dict[int, dict[str, BackendSpec]] = {}
    for row in rows.order_by("name"):
        out.setdefault(row.profile_id, {})[row.name] = BackendSpec(
            name=row.name,
            display_name=row.display_name or row.name,
            description=row.description,
            base_url=row.base_url.rstrip("/"),
            api_key=row.api_key,
            remote_agent_id=row.remote_agent_id,
            keywords=tuple(sorted(row.keywords)),
            examples=tuple(row.examples),
            priority=row.priority,
            timeout=row.timeout,
            failures_to_open=row.failures_to_open,
            open_seconds=row.open_seconds,
            kind=row.kind,
        )
    return out


def _rollouts(
    pks: dict[str, int], profiles: dict[str, ProfileSpec], backends: dict[int, dict[str, BackendSpec]]
) -> dict[str, VersionRollout]:
    """The running and paused version plans, their candidates compiled (one query)."""
    from routing.documents import profile_compile
    from routing.models import ROLLOUT_PLAN_ACTIVE, RolloutPlan, RolloutPlanTarget

    plans = RolloutPlan.objects.filter(
        status__in=ROLLOUT_PLAN_ACTIVE, target=RolloutPlanTarget.VERSION, candidate__isnull=False
    ).values_list("pk", "profile__agent_id", "candidate__number", "candidate__document", "control__number", "history")
    out = {}
    for pk, agent_id, number, document, control, history in plans:
        if agent_id in profiles and agent_id in pks and document["profile"]["enabled"]:
            candidate = profile_compile(
                document, pk=pks[agent_id], version=number, backends=backends.get(pks[agent_id], {})
            )
            out[agent_id] = VersionRollout(pk, agent_id, candidate, control, history_parse(history))
    return out


def _servers() -> dict[str, ServerSpec]:
    from agents.models import McpServer

    return {
        server.name: ServerSpec(
            name=server.name,
            endpoint=server.endpoint,
            transport=server.transport,
            timeout=server.timeout,
            enabled=server.enabled,
        )
        for server in McpServer.objects.all()
    }


def _tools() -> dict[str, ToolSpec]:
    """Every tool; a tool of a disabled server is disabled too."""
    from agents.models import McpTool

    return {
        tool.name: ToolSpec(
            name=tool.name,
            server=tool.server.name,
            description=tool.description,
            args_schema=tool.args_schema or {},
            needs_permission=tool.needs_permission,
            enabled=tool.enabled and tool.server.enabled,
            read_only=tool.read_only,
        )
        for tool in McpTool.objects.select_related("server")
    }


def _flags() -> dict[str, FlagSpec]:
    """Rollout flags with their overrides: three queries whatever the number of flags and overrides."""
    from routing.models import RolloutFlag, RolloutTenantOverride, RolloutUserOverride

    user_overrides: dict[int, dict[str, bool]] = {}
    for flag_id, user_id, enabled in RolloutUserOverride.objects.values_list("flag_id", "user_id", "enabled"):
        user_overrides.setdefault(flag_id, {})[user_id] = enabled
    tenant_overrides: dict[int, dict[str, bool]] = {}
    for flag_id, slug, enabled in RolloutTenantOverride.objects.values_list("flag_id", "tenant__slug", "enabled"):
        tenant_overrides.setdefault(flag_id, {})[slug] = enabled
    return {
        key: FlagSpec(
            key=key,
            kill_switch=kill_switch,
            percentage=percentage,
            stickiness=stickiness,
            user_overrides=user_overrides.get(pk, {}),
            tenant_overrides=tenant_overrides.get(pk, {}),
        )
        for pk, key, kill_switch, percentage, stickiness in RolloutFlag.objects.values_list(
            "pk", "key", "kill_switch", "percentage", "stickiness"
        )
    }
