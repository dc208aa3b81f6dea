"""The in-memory snapshot of all routing configuration, compiled once per version.

The message path reads profiles, specialists, intents, tools and servers from
:func:`current` — plain frozen data and one :class:`~routing.router.CompiledRouter`
per profile — never from the ORM. :func:`current` costs one version check
(:func:`common.config_version.config_version`, a cache read) and rebuilds the snapshot
when the version moved or this process changed routing data itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings

from common.config_version import config_version, local_generation
from routing.goals import DEFAULT_CONFIDENCE_THRESHOLD, CapabilitySpec, GoalCatalogue, GoalSpec
from routing.rollout import FlagSpec
from routing.router import CompiledRouter, IntentSpec, StatePolicySpec


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
class LoopSafety:
    """A profile's loop-safety limits (seed 003), checked before every agent-to-agent handoff."""

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
    # Goal mode (seed 002): the goals and capabilities the profile serves, and its confidence gate.
    goals: GoalCatalogue = field(default_factory=GoalCatalogue)
    goal_threshold: float = DEFAULT_CONFIDENCE_THRESHOLD
    # The authorisation of the tools the profile's document names (routing/documents.py), by tool name.
    tool_rights: Mapping[str, ToolRights] = field(default_factory=dict)

    def authorised(self, tool: ToolSpec) -> ToolSpec:
        """``tool`` with this profile's ``needs_permission`` and ``enabled`` where its document names the tool."""
        rights = self.tool_rights.get(tool.name)
        if rights is None or (rights.needs_permission, rights.enabled) == (tool.needs_permission, tool.enabled):
            return tool
        return replace(tool, needs_permission=rights.needs_permission, enabled=rights.enabled)

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
    profiles: dict[str, ProfileSpec]
    tools: dict[str, ToolSpec]
    servers: dict[str, ServerSpec]
    flags: dict[str, FlagSpec] = field(default_factory=dict)  # rollout flags by key


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


def build(*, version: int, generation: int) -> Snapshot:
    """Load every enabled piece of configuration and compile the routers: one query per model, whatever the sizes.

    Each kind has its compiler below; a compiler takes what the kinds before it compiled.
    """
    tools = _tools()
    usable_tools = frozenset(name for name, tool in tools.items() if tool.enabled)
    intents_by_profile, intent_specs = _intents(usable_tools)
    return Snapshot(
        version=version,
        generation=generation,
        profiles=_profiles(
            specialists_by_profile=_specialists(),
            intents_by_profile=intents_by_profile,
            policies_by_profile=_state_policies(intent_specs),
        ),
        tools=tools,
        servers=_servers(),
        flags=_flags(),
    )


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
        )
        for tool in McpTool.objects.select_related("server")
    }


def _specialists() -> dict[int, dict[str, SpecialistSpec]]:
    """Enabled specialists with their active prompt, by profile pk and name (three queries)."""
    from agents.models import Specialist, SpecialistPrompt

    active_prompts = {
        prompt.specialist_id: prompt
        for prompt in SpecialistPrompt.objects.filter(is_active=True).only("specialist_id", "version", "text")
    }
    by_profile: dict[int, dict[str, SpecialistSpec]] = {}
    for specialist in Specialist.objects.filter(enabled=True).prefetch_related("allowed_tools", "handoff_targets"):
        prompt = active_prompts.get(specialist.pk)
        by_profile.setdefault(specialist.profile_id, {})[specialist.name] = SpecialistSpec(
            name=specialist.name,
            display_name=specialist.display_name or specialist.name,
            description=specialist.description,
            prompt=prompt.text if prompt else "",
            prompt_version=prompt.version if prompt else None,
            allowed_tools=frozenset(tool.name for tool in specialist.allowed_tools.all()),
            handoff_targets=tuple(sorted(target.name for target in specialist.handoff_targets.all() if target.enabled)),
            step_limit=specialist.step_limit,
        )
    return by_profile


def _intents(usable_tools: frozenset[str]) -> tuple[dict[int, list[IntentSpec]], dict[int, IntentSpec]]:
    """Enabled intents of enabled specialists with their keywords and usable tools, by profile pk (in priority
    order) and by intent pk."""
    from routing.models import Intent, Keyword

    keywords_by_intent: dict[int, list[str]] = {}
    for intent_id, text in Keyword.objects.filter(intent__enabled=True).values_list("intent_id", "text"):
        keywords_by_intent.setdefault(intent_id, []).append(text)
    by_profile: dict[int, list[IntentSpec]] = {}
    by_pk: dict[int, IntentSpec] = {}
    for intent in (
        Intent.objects.filter(enabled=True, specialist__enabled=True)
        .select_related("specialist")
        .prefetch_related("mcp_tools")
        .order_by("priority", "name")
    ):
        spec = IntentSpec(
            name=intent.name,
            agent=intent.specialist.name,
            domain=intent.domain,
            description=intent.description,
            priority=intent.priority,
            keywords=tuple(sorted(keywords_by_intent.get(intent.pk, []))),
            examples=tuple(str(example) for example in intent.examples or []),
            mcp_tools=tuple(tool.name for tool in intent.mcp_tools.all() if tool.name in usable_tools),
            next_state=intent.next_state,
        )
        by_pk[intent.pk] = spec
        by_profile.setdefault(intent.profile_id, []).append(spec)
    return by_profile, by_pk


def _state_policies(intent_specs: dict[int, IntentSpec]) -> dict[int, list[StatePolicySpec]]:
    """Enabled state policies of enabled specialists, by profile pk; a policy's intent lends it its tools."""
    from routing.models import StatePolicy

    by_profile: dict[int, list[StatePolicySpec]] = {}
    for policy in StatePolicy.objects.filter(enabled=True, specialist__enabled=True).select_related("specialist"):
        intent = intent_specs.get(policy.intent_id) if policy.intent_id else None
        by_profile.setdefault(policy.profile_id, []).append(
            StatePolicySpec(
                state=policy.state,
                agent=policy.specialist.name,
                intent=intent.name if intent else "",
                domain=intent.domain if intent else "",
                mcp_tools=intent.mcp_tools if intent else (),
                next_state=intent.next_state if intent else "",
            )
        )
    return by_profile


def _profiles(
    *,
    specialists_by_profile: dict[int, dict[str, SpecialistSpec]],
    intents_by_profile: dict[int, list[IntentSpec]],
    policies_by_profile: dict[int, list[StatePolicySpec]],
) -> dict[str, ProfileSpec]:
    """Enabled profiles, each with its specialists, intents, compiled router and goal catalogue, by ``agent_id``."""
    from agents.models import AgentProfile

    catalogue_of = _goal_catalogues()
    profiles: dict[str, ProfileSpec] = {}
    for profile in AgentProfile.objects.filter(enabled=True).select_related("fallback_specialist", "coordinator"):
        specialists = specialists_by_profile.get(profile.pk, {})
        fallback = profile.fallback_specialist
        fallback_agent = fallback.name if fallback and fallback.name in specialists else min(specialists, default="")
        intents = tuple(intents_by_profile.get(profile.pk, []))
        coordinator = profile.coordinator
        profiles[profile.agent_id] = ProfileSpec(
            pk=profile.pk,
            agent_id=profile.agent_id,
            name=profile.name,
            domain=profile.domain,
            description=profile.description,
            policy=profile.policy,
            synthesis_prompt=profile.synthesis_prompt,
            routing_mode=profile.routing_mode,
            fallback_agent=fallback_agent,
            llm_router_enabled=profile.llm_router_enabled,
            llm_router_threshold=profile.llm_router_threshold,
            handoffs_enabled=profile.handoffs_enabled,
            hybrid_followup_max_chars=profile.hybrid_followup_max_chars,
            llm_model=profile.llm_model,
            llm_temperature=profile.llm_temperature,
            guardrails=dict(profile.guardrails or {}),
            judges=dict(profile.judges or {}),
            specialists=specialists,
            intents=intents,
            router=CompiledRouter(
                intents=intents,
                state_policies=tuple(policies_by_profile.get(profile.pk, [])),
                fallback_agent=fallback_agent,
                llm_enabled=profile.llm_router_enabled,
                llm_threshold=profile.llm_router_threshold,
            ),
            coordinator=coordinator.name if coordinator and coordinator.name in specialists else "",
            loop_safety=LoopSafety(
                max_handoffs_per_turn=profile.max_handoffs_per_turn,
                max_steps_per_agent=profile.max_steps_per_agent,
                block_ping_pong=profile.block_ping_pong,
                window=profile.loop_window,
                max_repeats=profile.loop_max_repeats,
            ),
            confirmation_words=tuple(profile.confirmation_words or ()),
            denial_words=tuple(profile.denial_words or ()),
            closing_words=tuple(profile.closing_words or ()),
            # Every profile, not only those in goal mode: ROUTING_MODE=goal puts them all in it.
            goals=catalogue_of(profile.pk),
            goal_threshold=profile.goal_threshold,
        )
    return profiles


def _goal_catalogues() -> Callable[[int], GoalCatalogue]:
    """Each profile's goal catalogue, by profile pk: the goals and capabilities of its goal domains (every synced
    domain when it names none). Three queries whatever the numbers of goals, capabilities and profiles.

    A capability is enabled when it is, and its MCP tool exists and is enabled on an enabled server; without a
    description of its own it reads its tool's.
    """
    from agents.models import AgentProfile
    from routing.models import Capability, Goal

    goals: dict[int, list[GoalSpec]] = {}  # by server pk
    for goal in Goal.objects.order_by("domain", "name"):
        goals.setdefault(goal.server_id, []).append(
            GoalSpec(
                domain=goal.domain,
                name=goal.name,
                entities_schema=dict(goal.entities_schema or {}),
                capabilities=tuple(goal.capabilities or ()),
                description=goal.description,
                examples=tuple(str(example) for example in goal.examples or ()),
                confidence_threshold=goal.confidence_threshold,
                enabled=goal.enabled,
            )
        )
    capabilities: dict[int, list[CapabilitySpec]] = {}
    for capability in Capability.objects.select_related("tool__server").order_by("name"):
        tool = capability.tool
        hints = dict((capability.metadata or {}).get("intent_hints") or {})
        hints.update(keywords=list(capability.keywords or ()), examples=list(capability.examples or ()))
        capabilities.setdefault(capability.server_id, []).append(
            CapabilitySpec(
                domain=capability.domain,
                name=capability.name,
                metadata={**(capability.metadata or {}), "intent_hints": hints},
                enabled=capability.enabled and tool is not None and tool.enabled and tool.server.enabled,
                tool=tool.name if tool is not None else "",
                description=capability.description or (tool.description if tool is not None else ""),
            )
        )
    domains: dict[int, set[int]] = {}
    for profile_id, server_id in AgentProfile.goal_domains.through.objects.values_list(
        "agentprofile_id", "mcpserver_id"
    ):
        domains.setdefault(profile_id, set()).add(server_id)
    every = frozenset(goals) | frozenset(capabilities)
    compiled: dict[frozenset[int], GoalCatalogue] = {}

    def catalogue(servers: frozenset[int]) -> GoalCatalogue:
        if servers not in compiled:
            compiled[servers] = GoalCatalogue(
                goals={(g.domain, g.name): g for server in sorted(servers) for g in goals.get(server, ())},
                capabilities={c.name: c for server in sorted(servers) for c in capabilities.get(server, ())},
            )
        return compiled[servers]

    return lambda profile_id: catalogue(frozenset(domains.get(profile_id) or every))


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
