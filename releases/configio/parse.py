"""One YAML file → :class:`Patch` values, checked on their own (types, keys, model validators).

Nothing here reads the database: references between entities (a tool's
server, an intent's specialist) are checked in :mod:`releases.configio.importer`
once every file of the import has been parsed, which is what makes the order
of the files irrelevant. The readers of each kind of file are in :mod:`releases.configio.kinds`, what they share
in :mod:`releases.configio.fields`.
"""

from __future__ import annotations

from collections.abc import Sequence

from releases.configio.fields import Parsed, name_of
from releases.configio.kinds.agents import parse_agents
from releases.configio.kinds.domains import DOMAIN_KEYS, GOAL_SECTION_KEYS, parse_domain
from releases.configio.kinds.knowledge import KNOWLEDGE_KEYS, parse_knowledge
from releases.configio.kinds.mcp import parse_servers, parse_tools
from releases.configio.kinds.routing import ROUTING_KEYS, parse_intents, parse_policies, parse_router, routing_profiles
from releases.configio.messages import (
    ERROR_AGENT_ID_ALONE,
    ERROR_NOT_A_MAPPING,
    ERROR_NOTHING_TO_IMPORT,
    ERROR_UNKNOWN_TOP_KEY,
    WARNING_DEFAULT_AGENT,
)
from releases.configio.source import Node, Problems

TOP_KEYS = (
    "default_agent_id",
    "agents",
    "servers",
    "tools",
    "agent_id",
    *ROUTING_KEYS,
    *DOMAIN_KEYS,
    *GOAL_SECTION_KEYS,
    *KNOWLEDGE_KEYS,
)


def parse_source(
    root: Node,
    problems: Problems,
    parsed: Parsed,
    *,
    profile_option: str | None,
    named_by: Sequence[Node] = (),
) -> None:
    """Add what one file says to ``parsed``; its kind follows from its top-level keys. ``named_by``: the profiles
    whose ``routing_config_path`` names this file
    (:func:`releases.configio.kinds.routing.routing_files_named`); its routing applies to each."""
    source = root.source
    if not isinstance(root.value, dict):
        problems.add(root, ERROR_NOT_A_MAPPING.format(expected=", ".join(TOP_KEYS)))
        return
    for key, child in root.items():
        if key not in TOP_KEYS:
            problems.add(child, ERROR_UNKNOWN_TOP_KEY.format(key=key, expected=", ".join(TOP_KEYS)))
    sections = {key: root.child(key) for key in root.value if key in TOP_KEYS}
    if not sections:
        if not root.value:
            problems.add(root, ERROR_NOTHING_TO_IMPORT.format(expected=", ".join(TOP_KEYS)))
        return

    if "default_agent_id" in sections:
        node = sections["default_agent_id"]
        if name_of(node, problems) is not None:
            parsed.default_agents.append(node)
            problems.warn(node, WARNING_DEFAULT_AGENT)
    if "servers" in sections:
        parse_servers(sections["servers"], problems, parsed)
    if "tools" in sections:
        parse_tools(sections["tools"], problems, parsed)
    if "agents" in sections:
        parse_agents(sections["agents"], problems, parsed)
    parse_domain(root, sections, problems, parsed)
    if "knowledge_sources" in sections:
        agent_node = sections.get("agent_id")
        parse_knowledge(sections["knowledge_sources"], agent_node, problems, parsed.knowledge, profile_option)

    routing = [key for key in ROUTING_KEYS if key in sections]
    if not routing:
        if "agent_id" in sections and "knowledge_sources" not in sections:
            problems.add(sections["agent_id"], ERROR_AGENT_ID_ALONE)
        return
    for profile_node in routing_profiles(source, sections, routing, problems, profile_option, named_by):
        if "router" in sections:
            parse_router(sections["router"], profile_node, problems, parsed)
        if "state_policies" in sections:
            parse_policies(sections["state_policies"], profile_node, problems, parsed)
        if "intents" in sections:
            parse_intents(sections["intents"], profile_node, problems, parsed)
