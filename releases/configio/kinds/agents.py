"""An ``agents.yaml``'s ``agents:``: profiles with their settings (:mod:`agents.profile_settings`) and their
specialists.
"""

from __future__ import annotations

from agents.models import PROFILE_TRANSLATED, SPECIALIST_TRANSLATED, AgentProfile, Specialist
from agents.public import EscalationSettings, ProfileSetting, YamlBlock, escalation_problems, yaml_keys, yaml_settings
from releases.configio.fields import (
    Parsed,
    Patch,
    check,
    keys_of,
    model_clean,
    name_of,
    names_of,
    read_scalar,
    read_translations,
    read_words,
)
from releases.configio.messages import ERROR_BAD_CHOICE, ERROR_EMPTY, ERROR_RELIABILITY_ROW
from releases.configio.source import Node, Problems

# The reference framework's agents.yaml points at other files (docs/configuration.md); here that configuration lives
# in the database. Only ``routing_config_path`` is read: it names the routing file of the same import that applies
# to the profile (:func:`routing_files_named`).
ROUTING_PATH_KEY = "routing_config_path"


IGNORED_PROFILE_KEYS = (
    "prompt_policy_path",
    "guardrails_config_path",
    "judges_config_path",
    "mcp_servers_config_path",
    "tools_config_path",
)


# An agents.yaml entry: its identity, its routing file, the profile settings (agents.profile_settings), its specialists.
PROFILE_KEYS = ("agent_id", ROUTING_PATH_KEY, *yaml_keys("agents"), "specialists")


SPECIALIST_KEYS = (
    "name",
    "display_name",
    "description",
    "translations",
    "prompt",
    "tools",
    "handoff_targets",
    "step_limit",
    "knowledge",
    "remember_tool",
    "enabled",
)


RELIABILITY_TYPES = {
    "low": "number",
    "high": "number",
    "routed": "integer",
    "right": "integer",
    "right_rate": "number",
    "mean_score": "number",
}


RELIABILITY_KEYS = tuple(RELIABILITY_TYPES)


def _reliability(patch: Patch, node: Node, problems: Problems) -> None:
    """``router.examples.reliability``: the examples tier's reliability table as calibration writes it (rows of
    ``low``, ``high``, ``routed``, ``right`` and, read back from an export, ``right_rate`` and ``mean_score``), each
    row's share right recomputed from its counts."""
    if node.value is None:
        patch.put("examples_reliability", node, [])
        return
    if not check(node, "list", problems):
        return
    rows, valid = [], True
    for element in node.elements():
        row = keys_of(element, problems, RELIABILITY_KEYS, required=("low", "high", "routed", "right"))
        if row is None:
            valid = False
            continue
        if not all(check(row[key], kind, problems) for key, kind in RELIABILITY_TYPES.items() if key in row):
            valid = False
            continue
        low, high = float(row["low"].value), float(row["high"].value)
        routed, right = int(row["routed"].value), int(row["right"].value)
        if not 0.0 <= low < high <= 1.0 or not 0 <= right <= routed:
            problems.add(element, ERROR_RELIABILITY_ROW)
            valid = False
            continue
        mean = float(row["mean_score"].value) if "mean_score" in row else (low + high) / 2
        rate = round(right / routed, 4) if routed else 0.0
        rows.append(
            {"low": low, "high": high, "routed": routed, "right": right, "right_rate": rate, "mean_score": mean}
        )
    if valid:
        patch.put("examples_reliability", node, rows)


def parse_agents(section: Node, problems: Problems, parsed: Parsed) -> None:
    if section.value is None or not check(section, "list", problems):
        return
    for node in section.elements():
        keys = keys_of(node, problems, PROFILE_KEYS, required=("agent_id",), ignored=IGNORED_PROFILE_KEYS)
        if keys is None or "agent_id" not in keys:
            continue
        agent_id = name_of(keys["agent_id"], problems)
        if agent_id is None:
            continue
        patch = Patch("profile", "agents", (agent_id,), keys["agent_id"])
        patch.put("agent_id", keys["agent_id"], agent_id)
        read_settings(patch, keys, "agents", problems)
        model_clean(patch, AgentProfile, problems)
        parsed.profiles.append(patch)
        if "specialists" in keys:
            _parse_specialists(keys["specialists"], agent_id, problems, parsed)


def _escalation(patch: Patch, node: Node, problems: Problems) -> None:
    """``escalation:`` — the profile's people in the loop (:class:`agents.escalation.EscalationSettings`); the keys
    not given take their defaults. Each problem is reported at its key."""
    if node.value is None:
        patch.put("escalation", node, EscalationSettings().as_json())
        return
    if not check(node, "mapping", problems):
        return
    found = escalation_problems(node.value)
    for key, message in found:
        problems.add(node.child(key) if key in node.value else node, message)
    if not found:
        patch.put("escalation", node, EscalationSettings.from_json(node.value).as_json())


def read_settings(patch: Patch, keys: dict[str, Node], block: YamlBlock, problems: Problems) -> None:
    """Read the profile settings ``block`` holds (agents.profile_settings) from its ``keys``: a mapping within it
    (``llm:``, ``examples:``) is checked for unknown keys once, and each setting is read as its kind says."""
    groups: dict[str, dict[str, Node] | None] = {}
    for path, setting in yaml_settings(block):
        found: dict[str, Node] | None = keys
        if len(path) > 1:
            group = path[0]
            if group not in groups:
                groups[group] = keys_of(keys[group], problems, yaml_keys(block, group)) if group in keys else None
            found = groups[group]
        if found is not None and path[-1] in found:
            _setting(patch, found, path[-1], setting, problems)


def _setting(patch: Patch, keys: dict[str, Node], key: str, setting: ProfileSetting, problems: Problems) -> None:
    node = keys[key]
    if setting.nullable and node.value is None:
        patch.put(setting.name, node, None)
    elif setting.kind == "name":
        if name_of(node, problems) is not None:
            patch.put(setting.name, node, node.value.strip())
    elif setting.kind == "choice":
        _choice(patch, node, setting.name, list(setting.choices), problems)
    elif setting.kind == "words":
        read_words(patch, keys, key, problems, setting.name)
    elif setting.kind == "settings":
        if node.value is None:
            patch.put(setting.name, node, {})
        elif check(node, "mapping", problems):
            patch.put(setting.name, node, node.value)
    elif setting.kind == "escalation":
        _escalation(patch, node, problems)
    elif setting.kind == "reliability":
        _reliability(patch, node, problems)
    elif setting.kind == "translations":
        read_translations(patch, keys, PROFILE_TRANSLATED, problems)
    else:
        read_scalar(patch, keys, key, "text" if setting.kind == "endpoint" else setting.kind, problems, setting.name)


def _choice(patch: Patch, node: Node, field: str, choices: list[str], problems: Problems) -> None:
    if name_of(node, problems) is None:
        return
    if node.value not in choices:
        problems.add(node, ERROR_BAD_CHOICE.format(value=node.value, choices=", ".join(choices)))
        return
    patch.put(field, node, node.value)


def _parse_specialists(section: Node, agent_id: str, problems: Problems, parsed: Parsed) -> None:
    if section.value is None or not check(section, "list", problems):
        return
    for node in section.elements():
        keys = keys_of(node, problems, SPECIALIST_KEYS, required=("name",))
        if keys is None or "name" not in keys:
            continue
        name = name_of(keys["name"], problems)
        if name is None:
            continue
        patch = Patch("specialist", "specialists", (agent_id, name), keys["name"])
        patch.put("name", keys["name"], name)
        read_scalar(patch, keys, "display_name", "text", problems)
        read_scalar(patch, keys, "description", "text", problems)
        read_translations(patch, keys, SPECIALIST_TRANSLATED, problems)
        read_scalar(patch, keys, "step_limit", "integer", problems)
        if "knowledge" in keys:  # a mapping the model's validator checks (agents.knowledge_settings)
            if keys["knowledge"].value is None:
                patch.put("knowledge", keys["knowledge"], {})
            elif check(keys["knowledge"], "mapping", problems):
                patch.put("knowledge", keys["knowledge"], keys["knowledge"].value)
        read_scalar(patch, keys, "remember_tool", "boolean", problems)
        read_scalar(patch, keys, "enabled", "boolean", problems)
        if "prompt" in keys and check(keys["prompt"], "string", problems):
            if keys["prompt"].value.strip():
                patch.refs["prompt"] = Node(node.source, keys["prompt"].path, keys["prompt"].value.strip())
            else:
                problems.add(keys["prompt"], ERROR_EMPTY)
        for ref in ("tools", "handoff_targets"):
            if ref in keys:
                names = names_of(keys[ref], problems)
                if names is not None:
                    patch.refs[ref] = names
        model_clean(patch, Specialist, problems)
        parsed.specialists.append(patch)
