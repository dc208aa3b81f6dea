"""A domain's file: its ``capabilities:`` and ``goals:`` (docs/goals.md)."""

from __future__ import annotations

from releases.configio.fields import (
    Parsed,
    Patch,
    check,
    keys_of,
    model_clean,
    name_of,
    names_of,
    optional_name,
    read_scalar,
    read_strings,
    read_translations,
)
from releases.configio.messages import ERROR_DOMAIN_ALONE, ERROR_DOMAIN_REQUIRED
from releases.configio.source import Node, Problems
from routing.models import Capability, Goal
from routing.public import GOAL_TRANSLATED

GOAL_SECTION_KEYS = ("capabilities", "goals")


DOMAIN_KEYS = ("domain", "mcp_server")


# A domain's goals and capabilities: the fields a business user may edit (docs/goals.md).
GOAL_KEYS = (
    "description",
    "translations",
    "enabled",
    "confidence_threshold",
    "examples",
    "capabilities",
    "entities_schema",
)


CAPABILITY_KEYS = ("tool", "description", "enabled", "keywords", "examples", "metadata")


def parse_domain(root: Node, sections: dict[str, Node], problems: Problems, parsed: Parsed) -> None:
    """``domain`` + ``mcp_server`` + ``capabilities``/``goals``: what one domain's manifest declares, as edited.

    Only the fields a business user may edit (the admin's); ``synced`` is never read nor written here.
    """
    present = [key for key in GOAL_SECTION_KEYS if key in sections]
    if not present:
        for key in DOMAIN_KEYS:
            if key in sections:
                problems.add(sections[key], ERROR_DOMAIN_ALONE.format(key=key))
        return
    missing = [key for key in DOMAIN_KEYS if key not in sections]
    if missing:
        for key in missing:
            problems.add(sections[present[0]], ERROR_DOMAIN_REQUIRED.format(key=key))
        return
    domain, server = sections["domain"], sections["mcp_server"]
    if name_of(domain, problems) is None or name_of(server, problems) is None:
        return
    domain = Node(domain.source, domain.path, domain.value.strip())
    server = Node(server.source, server.path, server.value.strip())
    if "capabilities" in sections:
        _parse_capabilities(sections["capabilities"], domain, server, problems, parsed)
    if "goals" in sections:
        _parse_goals(sections["goals"], domain, server, problems, parsed)


def _json_object(patch: Patch, keys: dict[str, Node], key: str, problems: Problems) -> None:
    """A JSON object (``entities_schema``, ``metadata``): ``null`` is ``{}``."""
    node = keys.get(key)
    if node is None:
        return
    if node.value is None:
        patch.put(key, node, {})
    elif check(node, "mapping", problems):
        patch.put(key, node, node.value)


def _domain_patch(kind: str, section: str, key: tuple[str, ...], node: Node, domain: Node, server: Node) -> Patch:
    patch = Patch(kind, section, key, node)
    patch.put("name", node, key[-1])
    patch.put("domain", domain, domain.value)
    patch.refs["server"] = server
    return patch


def _parse_capabilities(section: Node, domain: Node, server: Node, problems: Problems, parsed: Parsed) -> None:
    if section.value is None or not check(section, "mapping", problems):
        return
    for name, node in section.items():
        keys = keys_of(node, problems, CAPABILITY_KEYS) if node.value is not None else {}
        if keys is None:
            continue
        patch = _domain_patch("capability", "capabilities", (name,), node, domain, server)
        if "tool" in keys:
            tool = optional_name(keys["tool"], problems)
            if tool is not None:
                patch.refs["tool"] = tool
        read_scalar(patch, keys, "description", "text", problems)
        read_scalar(patch, keys, "enabled", "boolean", problems)
        read_strings(patch, keys, "keywords", problems, strip=False)
        read_strings(patch, keys, "examples", problems, strip=False)
        _json_object(patch, keys, "metadata", problems)
        model_clean(patch, Capability, problems)
        parsed.capabilities.append(patch)


def _parse_goals(section: Node, domain: Node, server: Node, problems: Problems, parsed: Parsed) -> None:
    if section.value is None or not check(section, "mapping", problems):
        return
    for name, node in section.items():
        keys = keys_of(node, problems, GOAL_KEYS) if node.value is not None else {}
        if keys is None:
            continue
        patch = _domain_patch("goal", "goals", (domain.value, name), node, domain, server)
        read_scalar(patch, keys, "description", "text", problems)
        read_translations(patch, keys, GOAL_TRANSLATED, problems)
        read_scalar(patch, keys, "enabled", "boolean", problems)
        threshold = keys.get("confidence_threshold")
        if threshold is not None:
            if threshold.value is None:
                patch.put("confidence_threshold", threshold, None)  # the profile's goal_threshold
            else:
                read_scalar(patch, keys, "confidence_threshold", "number", problems)
        read_strings(patch, keys, "examples", problems, strip=False)
        _json_object(patch, keys, "entities_schema", problems)
        if "capabilities" in keys:
            names = names_of(keys["capabilities"], problems)
            if names is not None:
                patch.put("capabilities", keys["capabilities"], [node.value for node in names])
        model_clean(patch, Goal, problems)
        parsed.goals.append(patch)
