"""Export the configuration as the YAML files :mod:`releases.configio.importer` reads.

The output is deterministic (names sorted in Python, not by the database's
collation), so exporting twice gives identical files and an export imported
into an empty database exports to the same files again.

Exports never carry a secret: endpoints (MCP servers', a profile's model endpoint) are written masked
(:func:`common.endpoints.endpoint_mask`: credentials before the host and query values as ``***``), and the importer
reads such a mask as "the stored endpoint, unchanged". An MCP server imported with ``${NAME}`` references is written
as it was read (the variables' names, never their values), unless what is written in it holds a secret. Key
variables are names, never keys.
"""

from __future__ import annotations

from typing import Any

import yaml

from agents.models import AgentProfile, McpServer, McpTool, Specialist, SpecialistPrompt
from agents.public import EscalationSettings, ProfileSetting, YamlBlock, endpoint_exported, yaml_exported
from common.endpoints import endpoint_mask
from common.translations import translations_cleaned
from knowledge.public import knowledge_exported
from routing.models import Capability, Goal, Intent, StatePolicy

HEADER = "# Exported by `manage.py export_config`; load with `manage.py import_config <files>`.\n"


def routing_file_name(agent_id: str) -> str:
    return f"routing.{agent_id}.yaml"


def knowledge_file_name(agent_id: str) -> str:
    return f"knowledge.{agent_id}.yaml"


def goals_file_name(domain: str) -> str:
    return f"goals.{domain}.yaml"


def config_export_data() -> dict[str, dict[str, Any]]:
    """The configuration as plain data, one entry per file name."""
    files: dict[str, dict[str, Any]] = {
        "mcp_servers.yaml": {"servers": _servers()},
        "tools.yaml": {"tools": _tools()},
    }
    profiles = list(AgentProfile.objects.select_related("fallback_specialist", "coordinator"))
    profiles.sort(key=lambda p: p.agent_id)
    files["agents.yaml"] = {"agents": [_profile(profile) for profile in profiles]}
    for profile in profiles:
        files[routing_file_name(profile.agent_id)] = _routing(profile)
        if sources := knowledge_exported(profile.pk):
            files[knowledge_file_name(profile.agent_id)] = {"agent_id": profile.agent_id, "knowledge_sources": sources}
    files.update(_domains())
    return files


def config_export() -> dict[str, str]:
    """The configuration as YAML texts, keyed by file name."""
    return {name: HEADER + dump(data) for name, data in config_export_data().items()}


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # Indent list items under their key, as people write them by hand.
        super().increase_indent(flow, False)


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # Prompts and descriptions read best as literal blocks.
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120, default_flow_style=False)


def _sorted_names(objects) -> list[str]:
    return sorted(obj.name for obj in objects)


def _servers() -> dict[str, Any]:
    return {
        server.name: {
            "description": server.description,
            "transport": server.transport,
            "endpoint": endpoint_exported(server.endpoint, server.endpoint_template),
            "timeout": server.timeout,
            "enabled": server.enabled,
        }
        for server in sorted(McpServer.objects.all(), key=lambda s: s.name)
    }


def _tools() -> dict[str, Any]:
    return {
        tool.name: {
            "description": tool.description,
            "mcp_server": tool.server.name,
            **({"remote_name": tool.remote_name} if tool.remote_name else {}),
            "enabled": tool.enabled,
            "needs_permission": tool.needs_permission,
            "args_schema": tool.args_schema or {"type": "object", "properties": {}},
        }
        for tool in sorted(McpTool.objects.select_related("server"), key=lambda t: t.name)
    }


def _profile(profile: AgentProfile) -> dict[str, Any]:
    specialists = sorted(
        Specialist.objects.filter(profile=profile).prefetch_related("allowed_tools", "handoff_targets"),
        key=lambda s: s.name,
    )
    prompts = {
        prompt.specialist_id: prompt.text
        for prompt in SpecialistPrompt.objects.filter(specialist__profile=profile, is_active=True)
    }
    # Routing switches (mode, LLM router, handoffs, fallback, coordinator, loop safety) go to the routing file.
    return {
        "agent_id": profile.agent_id,
        **_settings(profile, "agents"),
        "specialists": [_specialist(specialist, prompts.get(specialist.pk)) for specialist in specialists],
    }


_LEFT_OUT = object()  # a setting an export leaves out (:func:`_exported`)


def _settings(profile: AgentProfile, block: YamlBlock) -> dict[str, Any]:
    """The profile settings an export writes in ``block`` (agents.profile_settings), in their order, each as its kind
    says (:func:`_exported`); a mapping within the block (``llm:``, ``examples:``) at its first setting."""
    data: dict[str, Any] = {}
    for path, setting in yaml_exported(block):
        value = _exported(setting, getattr(profile, setting.name))
        if value is _LEFT_OUT:
            continue
        within = data
        for group in path[:-1]:
            within = within.setdefault(group, {})
        within[path[-1]] = value
    return data


def _exported(setting: ProfileSetting, value: Any) -> Any:
    """A setting's value as an export writes it, or ``_LEFT_OUT``: an address masked, a word list and JSON settings
    never null; people in the loop only when they differ from the defaults and the reliability table only when
    calibration wrote one (so that an imported file that had none exports as it was)."""
    if setting.kind == "endpoint":
        return endpoint_mask(value)
    if setting.kind == "words":
        return list(value or [])
    if setting.kind == "settings":
        return value or {}
    if setting.kind == "translations":
        return translations_cleaned(value) or _LEFT_OUT
    if setting.kind == "escalation":
        settings = EscalationSettings.from_json(value).as_json()
        return settings if settings != EscalationSettings().as_json() else _LEFT_OUT
    if setting.kind == "reliability":
        rows = [
            {key: row[key] for key in ("low", "high", "routed", "right", "mean_score") if key in row}
            for row in value or ()
        ]
        return rows or _LEFT_OUT
    return value


def _specialist(specialist: Specialist, prompt: str | None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": specialist.name,
        "display_name": specialist.display_name,
        "description": specialist.description,
        **_translations(specialist.translations),
        "enabled": specialist.enabled,
        "step_limit": specialist.step_limit,
        **({"knowledge": specialist.knowledge} if specialist.knowledge else {}),
        **({"remember_tool": True} if specialist.remember_tool else {}),
        "tools": _sorted_names(specialist.allowed_tools.all()),
        "handoff_targets": _sorted_names(specialist.handoff_targets.all()),
    }
    if prompt is not None:
        data["prompt"] = prompt
    return data


def _translations(value: Any) -> dict[str, Any]:
    """A row's ``translations`` key as written, left out when it has none (most rows of a one-language business)."""
    cleaned = translations_cleaned(value)
    return {"translations": cleaned} if cleaned else {}


def _routing(profile: AgentProfile) -> dict[str, Any]:
    policies = sorted(
        StatePolicy.objects.filter(profile=profile).select_related("specialist", "intent"), key=lambda p: p.state
    )
    intents = sorted(
        Intent.objects.filter(profile=profile).select_related("specialist").prefetch_related("keywords", "mcp_tools"),
        key=lambda i: (i.priority, i.name),
    )
    router: dict[str, Any] = {}
    for key, value in _settings(profile, "routing").items():
        router[key] = value
        # The keys naming other rows, after the setting they go with (ROUTER_REFERENCES in parse.py).
        if key == "mode":
            router["fallback_agent"] = profile.fallback_specialist.name if profile.fallback_specialist else None
            router["coordinator"] = profile.coordinator.name if profile.coordinator else None
        elif key == "goal_threshold":
            router["goal_domains"] = _sorted_names(profile.goal_domains.all())
    return {
        "agent_id": profile.agent_id,
        "router": router,
        "state_policies": {
            policy.state: {
                "agent": policy.specialist.name,
                "intent": policy.intent.name if policy.intent else None,
                "description": policy.description,
                "enabled": policy.enabled,
            }
            for policy in policies
        },
        "intents": [_intent(intent) for intent in intents],
    }


def _intent(intent: Intent) -> dict[str, Any]:
    keywords = sorted(intent.keywords.all(), key=lambda k: (k.normalized, k.text))
    data: dict[str, Any] = {
        "name": intent.name,
        "domain": intent.domain,
        "agent": intent.specialist.name,
        "description": intent.description,
        **_translations(intent.translations),
        "priority": intent.priority,
        "enabled": intent.enabled,
        "keywords": [keyword.text for keyword in keywords],
    }
    exclusions = {keyword.text: sorted(keyword.exclusions) for keyword in keywords if keyword.exclusions}
    if exclusions:  # most intents have none: the key is left out
        data["keyword_exclusions"] = exclusions
    limits = {keyword.text: list(keyword.languages) for keyword in keywords if keyword.languages}
    if limits:  # keywords count in every language unless limited: the key is left out when none is
        data["keyword_languages"] = limits
    phrase_limits = {
        keyword.text: {phrase: list(languages) for phrase, languages in sorted(keyword.exclusion_languages.items())}
        for keyword in keywords
        if keyword.exclusion_languages
    }
    if phrase_limits:  # likewise exclusions
        data["keyword_exclusion_languages"] = phrase_limits
    data.update(
        examples=[str(example) for example in intent.examples or []],
        mcp_tools=_sorted_names(intent.mcp_tools.all()),
        next_state=intent.next_state,
    )
    if intent.escalate_to:  # most intents are the assistants': the key is left out
        data["escalate_to"] = intent.escalate_to
    return data


def _domains() -> dict[str, dict[str, Any]]:
    """One ``goals.<domain>.yaml`` per domain: its capabilities and goals, the fields a business user may edit
    (``synced`` stays in the database: an import never writes it)."""
    capabilities: dict[str, list[Capability]] = {}
    goals: dict[str, list[Goal]] = {}
    servers: dict[str, set[str]] = {}
    for capability in Capability.objects.select_related("server", "tool"):
        capabilities.setdefault(capability.domain, []).append(capability)
        servers.setdefault(capability.domain, set()).add(capability.server.name)
    for goal in Goal.objects.select_related("server"):
        goals.setdefault(goal.domain, []).append(goal)
        servers.setdefault(goal.domain, set()).add(goal.server.name)
    return {
        goals_file_name(domain): {
            "domain": domain,
            # One server per domain (the sync and the importer hold to it); the first by name otherwise.
            "mcp_server": sorted(servers[domain])[0],
            "capabilities": {
                capability.name: _capability(capability)
                for capability in sorted(capabilities.get(domain, []), key=lambda c: c.name)
            },
            "goals": {goal.name: _goal(goal) for goal in sorted(goals.get(domain, []), key=lambda g: g.name)},
        }
        for domain in sorted(servers)
    }


def _capability(capability: Capability) -> dict[str, Any]:
    return {
        "tool": capability.tool.name if capability.tool else None,
        "description": capability.description,
        "enabled": capability.enabled,
        "keywords": list(capability.keywords or []),
        "examples": list(capability.examples or []),
        "metadata": capability.metadata or {},
    }


def _goal(goal: Goal) -> dict[str, Any]:
    return {
        "description": goal.description,
        **_translations(goal.translations),
        "enabled": goal.enabled,
        "confidence_threshold": goal.confidence_threshold,
        "examples": list(goal.examples or []),
        "capabilities": list(goal.capabilities or []),
        "entities_schema": goal.entities_schema or {},
    }
