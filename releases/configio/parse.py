"""One YAML file → :class:`Patch` values, checked on their own (types, keys, model validators).

Nothing here reads the database: references between entities (a tool's
server, an intent's specialist) are checked in :mod:`releases.configio.importer`
once every file of the import has been parsed, which is what makes the order
of the files irrelevant.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from agents.escalation import EscalationSettings, escalation_problems
from agents.models import (
    PROFILE_TRANSLATED,
    SPECIALIST_TRANSLATED,
    AgentProfile,
    McpServer,
    McpTool,
    McpTransport,
    Specialist,
)
from agents.profile_settings import Block, ProfileSetting, yaml_keys, yaml_settings
from agents.schemas import SHORTHAND_TYPES, expand_args_schema, expand_env, validate_tool_args_schema
from common.endpoints import env_template
from common.text import normalize
from common.translations import translations_cleaned, translations_problems
from releases.configio.messages import (
    ERROR_AGENT_ID_ALONE,
    ERROR_BAD_CHOICE,
    ERROR_DOMAIN_ALONE,
    ERROR_DOMAIN_REQUIRED,
    ERROR_EMPTY,
    ERROR_ENV_SECRET,
    ERROR_ENV_UNSET,
    ERROR_KEYWORD_EMPTY,
    ERROR_KEYWORD_REPEATED,
    ERROR_NO_PROFILE,
    ERROR_NOT_A_MAPPING,
    ERROR_NOTHING_TO_IMPORT,
    ERROR_PROFILE_MISMATCH,
    ERROR_PROFILE_NAMED,
    ERROR_RELIABILITY_ROW,
    ERROR_REQUIRED,
    ERROR_ROUTING_PATH_AMBIGUOUS,
    ERROR_ROUTING_PATH_OTHER_PROFILE,
    ERROR_SHORTHAND_TYPE,
    ERROR_TYPE,
    ERROR_UNKNOWN_KEY,
    ERROR_UNKNOWN_TOP_KEY,
    ERROR_WORD_BOOLEAN,
    WARNING_DEFAULT_AGENT,
    WARNING_IGNORED_KEY,
    WARNING_ROUTING_PATH_ABSENT,
)
from releases.configio.source import Node, Problems, Source
from routing.goals.planner import GOAL_TRANSLATED
from routing.models import (
    ERROR_EXCLUSION_EMPTY,
    INTENT_TRANSLATED,
    Capability,
    Goal,
    Intent,
    Keyword,
    StatePolicy,
    keyword_exclusion_problems,
    keyword_language_problems,
    keyword_languages_ordered,
)

ROUTING_KEYS = ("router", "state_policies", "intents")
GOAL_SECTION_KEYS = ("capabilities", "goals")
DOMAIN_KEYS = ("domain", "mcp_server")
TOP_KEYS = (
    "default_agent_id",
    "agents",
    "servers",
    "tools",
    "agent_id",
    *ROUTING_KEYS,
    *DOMAIN_KEYS,
    *GOAL_SECTION_KEYS,
)

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
SERVER_KEYS = ("transport", "endpoint", "enabled", "description", "timeout")
TOOL_KEYS = ("description", "mcp_server", "remote_name", "enabled", "needs_permission", "args_schema")
# A routing.yaml's ``router:`` block: the profile settings (agents.profile_settings), and after the setting named the
# keys that name other rows (the fallback and the coordinator, specialists; the goal domains, MCP servers).
ROUTER_REFERENCES = {"mode": ("fallback_agent", "coordinator"), "goal_threshold": ("goal_domains",)}
ROUTER_KEYS = tuple(name for key in yaml_keys("routing") for name in (key, *ROUTER_REFERENCES.get(key, ())))
POLICY_KEYS = ("agent", "intent", "description", "enabled")
INTENT_KEYS = (
    "name",
    "domain",
    "agent",
    "description",
    "translations",
    "priority",
    "enabled",
    "keywords",
    "keyword_exclusions",
    "keyword_languages",
    "keyword_exclusion_languages",
    "examples",
    "mcp_tools",
    "next_state",
    "escalate_to",
)
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

# ``http`` is the seeds' name for MCP's streamable HTTP transport.
TRANSPORT_ALIASES = {"http": McpTransport.STREAMABLE_HTTP, "streamable-http": McpTransport.STREAMABLE_HTTP}
TRANSPORTS = {choice.value for choice in McpTransport}


@dataclass(eq=False)
class Patch:
    """What one file says about one entity: only the fields it names (the rest stay as they are).

    ``values`` maps model field names to new values and ``where`` to the node
    each came from. ``refs`` holds names of other entities, still unresolved:
    a single :class:`Node` (``server``, ``agent``, ``intent``, ``fallback``, ``coordinator``, ``tool``) or
    a list of them (``tools``, ``handoff_targets``, ``mcp_tools``, ``keywords``, ``goal_domains``).
    """

    kind: str
    section: str
    key: tuple[str, ...]
    node: Node
    values: dict[str, Any] = field(default_factory=dict)
    where: dict[str, Node] = field(default_factory=dict)
    refs: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.key[-1]

    def put(self, model_field: str, node: Node, value: Any) -> None:
        self.values[model_field] = value
        self.where[model_field] = node


@dataclass
class Parsed:
    """Everything the files of one import say, before references are resolved."""

    servers: list[Patch] = field(default_factory=list)
    tools: list[Patch] = field(default_factory=list)
    profiles: list[Patch] = field(default_factory=list)
    specialists: list[Patch] = field(default_factory=list)
    intents: list[Patch] = field(default_factory=list)
    policies: list[Patch] = field(default_factory=list)
    capabilities: list[Patch] = field(default_factory=list)
    goals: list[Patch] = field(default_factory=list)
    default_agents: list[Node] = field(default_factory=list)


# -- small type checks ---------------------------------------------------------

_TYPE_NAMES = {
    "string": "a string",
    "text": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "mapping": "a mapping",
    "list": "a list",
}


def _actual(value: Any) -> str:
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _is(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "text":
        return value is None or isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "mapping":
        return isinstance(value, dict)
    if kind == "list":
        return isinstance(value, list)
    raise ValueError(kind)


def check(node: Node, kind: str, problems: Problems) -> bool:
    """Record a type error unless ``node`` holds a value of ``kind``."""
    if _is(node.value, kind):
        return True
    problems.add(node, ERROR_TYPE.format(expected=_TYPE_NAMES[kind], actual=_actual(node.value)))
    return False


def keys_of(
    node: Node,
    problems: Problems,
    known: Iterable[str],
    *,
    required: Iterable[str] = (),
    ignored: Iterable[str] = (),
) -> dict[str, Node] | None:
    """The known keys of a mapping node; unknown keys are errors, ``ignored`` ones warnings."""
    if not check(node, "mapping", problems):
        return None
    known = tuple(known)
    ignored = tuple(ignored)
    out: dict[str, Node] = {}
    for key, child in node.items():
        if key in known:
            out[key] = child
        elif key in ignored:
            problems.warn(child, WARNING_IGNORED_KEY)
        else:
            problems.add(child, ERROR_UNKNOWN_KEY.format(key=key, expected=", ".join(known)))
    for key in required:
        if key not in node.value:
            problems.add(node, ERROR_REQUIRED.format(key=key))
    return out


def name_of(node: Node, problems: Problems) -> str | None:
    """A non-empty string naming something (a reference or an identity)."""
    if not check(node, "string", problems):
        return None
    if not node.value.strip():
        problems.add(node, ERROR_EMPTY)
        return None
    return node.value.strip()


def names_of(node: Node, problems: Problems) -> list[Node] | None:
    """A list of names, each as its own node (so each can be reported on its line)."""
    if node.value is None:
        return []
    if not check(node, "list", problems):
        return None
    out = []
    for element in node.elements():
        name = name_of(element, problems)
        if name is not None:
            out.append(Node(element.source, element.path, name))
    return out


def _scalar(
    patch: Patch, keys: dict[str, Node], key: str, kind: str, problems: Problems, model_field: str = ""
) -> None:
    node = keys.get(key)
    if node is None or not check(node, kind, problems):
        return
    value = node.value
    if kind == "text":
        value = (value or "").strip()
    elif kind == "number":
        value = float(value)
    patch.put(model_field or key, node, value)


def _strings(patch: Patch, keys: dict[str, Node], key: str, problems: Problems, *, strip: bool = True) -> None:
    """A list of free-text strings stored as a JSON list (intent and goal examples, a capability's keywords):
    ``null`` is ``[]``; ``strip=False`` keeps them as written (what a manifest sync compares them with)."""
    node = keys.get(key)
    if node is None:
        return
    if node.value is None:
        patch.put(key, node, [])
        return
    if not check(node, "list", problems):
        return
    values, valid = [], True
    for element in node.elements():
        if isinstance(element.value, bool):  # YAML reads an unquoted yes/no as a boolean
            problems.add(element, ERROR_WORD_BOOLEAN)
            valid = False
        elif check(element, "string", problems):
            values.append(element.value.strip() if strip else element.value)
        else:
            valid = False
    if valid:
        patch.put(key, node, values)


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


def _words(patch: Patch, keys: dict[str, Node], key: str, problems: Problems, model_field: str = "") -> None:
    """A list of non-empty words or phrases (a profile's confirmation, denial and closing words, its out-of-scope
    examples), kept as written."""
    node = keys.get(key)
    if node is None:
        return
    if node.value is None:
        patch.put(model_field or key, node, [])
        return
    if not check(node, "list", problems):
        return
    values, valid = [], True
    for element in node.elements():
        if isinstance(element.value, bool):
            problems.add(element, ERROR_WORD_BOOLEAN)
            valid = False
        elif not check(element, "string", problems):
            valid = False
        elif not element.value.strip():
            problems.add(element, ERROR_EMPTY)
            valid = False
        else:
            values.append(element.value)
    if valid:
        patch.put(model_field or key, node, values)


def _translations(patch: Patch, keys: dict[str, Node], fields: Iterable[str], problems: Problems) -> None:
    """``translations: {language: {field: text}}`` (common.translations), each problem on its language's line, stored
    as the admin stores it; ``null`` is none. The file's translations replace the stored ones."""
    node = keys.get("translations")
    if node is None:
        return
    if node.value is None:
        patch.put("translations", node, {})
        return
    if not check(node, "mapping", problems):
        return
    found = translations_problems(node.value, fields)
    for language, message in found:
        problems.add(node.child(language) if language in node.value else node, message)
    if not found:
        patch.put("translations", node, translations_cleaned(node.value))


def _optional_name(node: Node, problems: Problems) -> Node | None:
    """A reference that may be cleared: ``null`` or ``""`` give a node holding ``None``."""
    if node.value in (None, ""):
        return Node(node.source, node.path, None)
    if name_of(node, problems) is None:
        return None
    return Node(node.source, node.path, node.value.strip())


def model_clean(patch: Patch, model: type[models.Model], problems: Problems, *, skip: Iterable[str] = ()) -> None:
    """Run the model's own field validators (lengths, ranges, slugs, URLs, JSON settings) on the given values."""
    values = {name: value for name, value in patch.values.items() if name not in skip}
    if not values:
        return
    instance = model(**values)
    exclude = [f.name for f in model._meta.get_fields() if f.concrete and f.name not in values]
    try:
        instance.clean_fields(exclude=exclude)
    except ValidationError as exc:
        for name, errors in exc.message_dict.items():
            node = patch.where.get(name, patch.node)
            for error in errors:
                problems.add(node, error.rstrip("."))


# -- sections --------------------------------------------------------------------


def routing_files_named(roots: Sequence[Node], problems: Problems) -> dict[Source, list[Node]]:
    """The profiles whose ``routing_config_path`` (agents.yaml) names each routing file of the import, by file: a node
    at that key holding the profile's agent_id. Two profiles may name one shared ``routing.yaml``.

    A path names the file whose name ends with the path's last part; when several do, the one sharing the most
    trailing parts with it (``./config/routing.yaml`` names ``config/routing.yaml`` rather than
    ``old/routing.yaml``), and a tie is refused. A path naming no file of the import is a warning (the profile's
    routing stays as it is), and one naming a file whose ``agent_id`` is another profile's an error. The rest of each
    entry is checked by :func:`parse_source`."""
    routing_files = [
        root for root in roots if isinstance(root.value, dict) and any(key in root.value for key in ROUTING_KEYS)
    ]
    named: dict[Source, list[Node]] = {}
    for root in roots:
        if not isinstance(root.value, dict) or not isinstance(root.value.get("agents"), list):
            continue
        for entry in root.child("agents").elements():
            if not isinstance(entry.value, dict) or ROUTING_PATH_KEY not in entry.value:
                continue
            agent_id = entry.value.get("agent_id")
            reference = entry.child(ROUTING_PATH_KEY)
            path = name_of(reference, problems)
            if path is None or not isinstance(agent_id, str) or not agent_id.strip():
                continue
            target = _named_file(reference, path, routing_files, problems)
            if target is None:
                continue
            file_profile = target.value.get("agent_id")
            if isinstance(file_profile, str) and file_profile.strip() not in ("", agent_id.strip()):
                message = ERROR_ROUTING_PATH_OTHER_PROFILE.format(
                    file=target.source.name, file_profile=file_profile.strip()
                )
                problems.add(reference, message)
                continue
            named.setdefault(target.source, []).append(Node(reference.source, reference.path, agent_id.strip()))
    return named


def _path_parts(path: str) -> tuple[str, ...]:
    return tuple(part for part in PurePosixPath(path.replace("\\", "/")).parts if part not in (".", "/"))


def _named_file(reference: Node, path: str, files: Sequence[Node], problems: Problems) -> Node | None:
    """The routing file of the import that ``path`` names (see :func:`routing_files_named`), or ``None``."""
    wanted = _path_parts(path)

    def shared(file: Node) -> int:
        parts = _path_parts(file.source.name)
        count = 0
        while count < min(len(parts), len(wanted)) and parts[-1 - count] == wanted[-1 - count]:
            count += 1
        return count

    scored = [(shared(file), file) for file in files]
    best = max((score for score, _ in scored), default=0)
    chosen = [file for score, file in scored if score == best and score > 0]
    if not chosen:
        problems.warn(reference, WARNING_ROUTING_PATH_ABSENT.format(name=wanted[-1] if wanted else path))
        return None
    if len(chosen) > 1:
        files_named = ", ".join(sorted(file.source.name for file in chosen))
        problems.add(reference, ERROR_ROUTING_PATH_AMBIGUOUS.format(path=path, files=files_named))
        return None
    return chosen[0]


def parse_source(
    root: Node,
    problems: Problems,
    parsed: Parsed,
    *,
    profile_option: str | None,
    named_by: Sequence[Node] = (),
) -> None:
    """Add what one file says to ``parsed``; its kind follows from its top-level keys. ``named_by``: the profiles
    whose ``routing_config_path`` names this file (:func:`routing_files_named`); its routing applies to each."""
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
        _parse_servers(sections["servers"], problems, parsed)
    if "tools" in sections:
        _parse_tools(sections["tools"], problems, parsed)
    if "agents" in sections:
        _parse_agents(sections["agents"], problems, parsed)
    _parse_domain(root, sections, problems, parsed)

    routing = [key for key in ROUTING_KEYS if key in sections]
    if not routing:
        if "agent_id" in sections:
            problems.add(sections["agent_id"], ERROR_AGENT_ID_ALONE)
        return
    for profile_node in _routing_profiles(source, sections, routing, problems, profile_option, named_by):
        if "router" in sections:
            _parse_router(sections["router"], profile_node, problems, parsed)
        if "state_policies" in sections:
            _parse_policies(sections["state_policies"], profile_node, problems, parsed)
        if "intents" in sections:
            _parse_intents(sections["intents"], profile_node, problems, parsed)


def _routing_profiles(
    source: Source,
    sections: dict[str, Node],
    routing: list[str],
    problems: Problems,
    option: str | None,
    named_by: Sequence[Node],
) -> list[Node]:
    """The nodes naming the profiles whose routing this file holds: its ``agent_id:``, else the profiles whose
    ``routing_config_path`` names it, else ``--profile``. ``--profile`` must agree with the file: with its
    ``agent_id``, or be the one profile naming it."""
    if "agent_id" in sections:
        node = sections["agent_id"]
        agent_id = name_of(node, problems)
        if agent_id is None:
            return []
        if option and option != agent_id:
            problems.add(node, ERROR_PROFILE_MISMATCH.format(file_profile=agent_id, option=option))
            return []
        return [Node(source, node.path, agent_id)]
    # Not in the file: messages about the profile point at the first routing section.
    if named_by:
        profiles = list(dict.fromkeys(node.value for node in named_by))
        if option and profiles != [option]:
            message = ERROR_PROFILE_NAMED.format(
                profiles=", ".join(profiles), where=named_by[0].source.name, option=option
            )
            problems.add(sections[routing[0]], message)
            return []
        return [Node(source, (routing[0],), agent_id) for agent_id in profiles]
    if option:
        return [Node(source, (routing[0],), option)]
    problems.add(sections[routing[0]], ERROR_NO_PROFILE)
    return []


def _parse_servers(section: Node, problems: Problems, parsed: Parsed) -> None:
    if section.value is None or not check(section, "mapping", problems):
        return
    for name, node in section.items():
        keys = keys_of(node, problems, SERVER_KEYS, required=("endpoint",))
        if keys is None:
            continue
        patch = Patch("MCP server", "servers", (name,), node)
        patch.where["name"] = node
        patch.values["name"] = name
        if "transport" in keys and name_of(keys["transport"], problems) is not None:
            raw = keys["transport"].value.strip()
            transport = TRANSPORT_ALIASES.get(raw, raw)
            if transport in TRANSPORTS:
                patch.put("transport", keys["transport"], str(transport))
            else:
                choices = ", ".join(sorted({*TRANSPORTS, *TRANSPORT_ALIASES}))
                problems.add(keys["transport"], ERROR_BAD_CHOICE.format(value=raw, choices=choices))
        if "endpoint" in keys and name_of(keys["endpoint"], problems) is not None:
            written = keys["endpoint"].value.strip()
            endpoint, missing, refused = expand_env(written)
            for variable in missing:
                problems.add(keys["endpoint"], ERROR_ENV_UNSET.format(name=variable))
            for variable in refused:
                problems.add(keys["endpoint"], ERROR_ENV_SECRET.format(name=variable))
            patch.put("endpoint", keys["endpoint"], endpoint)
            # Kept as written, so that an export gives the references back, not this environment's values.
            patch.put("endpoint_template", keys["endpoint"], env_template(written))
        _scalar(patch, keys, "enabled", "boolean", problems)
        _scalar(patch, keys, "description", "text", problems)
        _scalar(patch, keys, "timeout", "number", problems)
        model_clean(patch, McpServer, problems)
        parsed.servers.append(patch)


def _parse_tools(section: Node, problems: Problems, parsed: Parsed) -> None:
    if section.value is None or not check(section, "mapping", problems):
        return
    for name, node in section.items():
        keys = keys_of(node, problems, TOOL_KEYS, required=("mcp_server",))
        if keys is None:
            continue
        patch = Patch("MCP tool", "tools", (name,), node)
        patch.put("name", node, name)
        if "mcp_server" in keys and name_of(keys["mcp_server"], problems) is not None:
            patch.refs["server"] = Node(node.source, keys["mcp_server"].path, keys["mcp_server"].value.strip())
        _scalar(patch, keys, "description", "text", problems)
        _scalar(patch, keys, "remote_name", "text", problems)
        _scalar(patch, keys, "enabled", "boolean", problems)
        _scalar(patch, keys, "needs_permission", "boolean", problems)
        if "args_schema" in keys:
            schema = _args_schema(keys["args_schema"], problems)
            if schema is not None:
                patch.put("args_schema", keys["args_schema"], schema)
        model_clean(patch, McpTool, problems, skip=("args_schema",))
        parsed.tools.append(patch)


def _args_schema(node: Node, problems: Problems) -> dict[str, Any] | None:
    """Expand the seed's ``{arg: type}`` shorthand, then validate it as JSON Schema (agents.schemas)."""
    if node.value is not None and not check(node, "mapping", problems):
        return None
    value = node.value or {}
    shorthand = not ({"type", "properties", "$schema"} & set(value))
    if shorthand:
        bad = False
        for _arg, child in node.items() if value else []:
            if child.value not in SHORTHAND_TYPES:
                choices = ", ".join(sorted(SHORTHAND_TYPES))
                problems.add(child, ERROR_SHORTHAND_TYPE.format(value=child.value, choices=choices))
                bad = True
        if bad:
            return None
    try:
        schema = expand_args_schema(value)
        validate_tool_args_schema(schema)
    except ValidationError as exc:
        problems.add(_schema_error_node(node, value), "; ".join(m.rstrip(".") for m in exc.messages))
        return None
    return schema


def _schema_error_node(node: Node, value: Any) -> Node:
    """The node nearest to where the JSON Schema is wrong, for the line number."""
    try:
        Draft202012Validator.check_schema(value)
    except SchemaError as exc:
        return Node(node.source, (*node.path, *exc.absolute_path), None)
    return node


def _parse_agents(section: Node, problems: Problems, parsed: Parsed) -> None:
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
        _settings(patch, keys, "agents", problems)
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


def _settings(patch: Patch, keys: dict[str, Node], block: Block, problems: Problems) -> None:
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
        _words(patch, keys, key, problems, setting.name)
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
        _translations(patch, keys, PROFILE_TRANSLATED, problems)
    else:
        _scalar(patch, keys, key, "text" if setting.kind == "endpoint" else setting.kind, problems, setting.name)


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
        _scalar(patch, keys, "display_name", "text", problems)
        _scalar(patch, keys, "description", "text", problems)
        _translations(patch, keys, SPECIALIST_TRANSLATED, problems)
        _scalar(patch, keys, "step_limit", "integer", problems)
        if "knowledge" in keys:  # a mapping the model's validator checks (agents.knowledge_settings)
            if keys["knowledge"].value is None:
                patch.put("knowledge", keys["knowledge"], {})
            elif check(keys["knowledge"], "mapping", problems):
                patch.put("knowledge", keys["knowledge"], keys["knowledge"].value)
        _scalar(patch, keys, "remember_tool", "boolean", problems)
        _scalar(patch, keys, "enabled", "boolean", problems)
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


def _parse_router(section: Node, profile: Node, problems: Problems, parsed: Parsed) -> None:
    keys = keys_of(section, problems, ROUTER_KEYS)
    if keys is None:
        return
    patch = Patch("router block of profile", "router", (profile.value,), profile)
    patch.refs["profile"] = profile
    _settings(patch, keys, "routing", problems)
    for key, ref in (("fallback_agent", "fallback"), ("coordinator", "coordinator")):
        if key in keys:
            node = _optional_name(keys[key], problems)
            if node is not None:
                patch.refs[ref] = node
    if "goal_domains" in keys:
        names = names_of(keys["goal_domains"], problems)
        if names is not None:
            patch.refs["goal_domains"] = names
    window, repeats = patch.values.get("loop_window"), patch.values.get("loop_max_repeats")
    if isinstance(window, int) and isinstance(repeats, int) and repeats > window:
        problems.add(patch.where["loop_max_repeats"], f"must not exceed window ({window})")
    model_clean(patch, AgentProfile, problems)
    parsed.profiles.append(patch)


def _parse_policies(section: Node, profile: Node, problems: Problems, parsed: Parsed) -> None:
    if section.value is None or not check(section, "mapping", problems):
        return
    for state, node in section.items():
        patch = Patch("state policy", "state_policies", (profile.value, state), node)
        patch.refs["profile"] = profile
        patch.put("state", node, state)
        if isinstance(node.value, str):
            # Shorthand ``STATE: specialist``.
            if name_of(node, problems) is not None:
                patch.refs["agent"] = Node(node.source, node.path, node.value.strip())
        else:
            keys = keys_of(node, problems, POLICY_KEYS, required=("agent",))
            if keys is None:
                continue
            if "agent" in keys and name_of(keys["agent"], problems) is not None:
                patch.refs["agent"] = Node(node.source, keys["agent"].path, keys["agent"].value.strip())
            if "intent" in keys:
                intent = keys["intent"]
                if intent.value in (None, ""):
                    patch.refs["intent"] = Node(node.source, intent.path, None)
                elif name_of(intent, problems) is not None:
                    patch.refs["intent"] = Node(node.source, intent.path, intent.value.strip())
            _scalar(patch, keys, "description", "text", problems)
            _scalar(patch, keys, "enabled", "boolean", problems)
        model_clean(patch, StatePolicy, problems)
        parsed.policies.append(patch)


def _parse_intents(section: Node, profile: Node, problems: Problems, parsed: Parsed) -> None:
    if section.value is None or not check(section, "list", problems):
        return
    for node in section.elements():
        keys = keys_of(node, problems, INTENT_KEYS, required=("name", "agent"))
        if keys is None or "name" not in keys:
            continue
        name = name_of(keys["name"], problems)
        if name is None:
            continue
        patch = Patch("intent", "intents", (profile.value, name), keys["name"])
        patch.refs["profile"] = profile
        patch.put("name", keys["name"], name)
        if "agent" in keys and name_of(keys["agent"], problems) is not None:
            patch.refs["agent"] = Node(node.source, keys["agent"].path, keys["agent"].value.strip())
        _scalar(patch, keys, "domain", "text", problems)
        _scalar(patch, keys, "description", "text", problems)
        _translations(patch, keys, INTENT_TRANSLATED, problems)
        _scalar(patch, keys, "priority", "integer", problems)
        _scalar(patch, keys, "enabled", "boolean", problems)
        _scalar(patch, keys, "next_state", "text", problems)
        _scalar(patch, keys, "escalate_to", "text", problems)
        _strings(patch, keys, "examples", problems)
        if "mcp_tools" in keys:
            names = names_of(keys["mcp_tools"], problems)
            if names is not None:
                patch.refs["mcp_tools"] = names
        if "keywords" in keys:
            keywords = _keywords(keys["keywords"], problems)
            if keywords is not None:
                patch.refs["keywords"] = keywords
        if "keyword_exclusions" in keys:
            exclusions = _keyword_exclusions(keys["keyword_exclusions"], problems)
            if exclusions is not None:
                patch.refs["keyword_exclusions"] = exclusions
        if "keyword_languages" in keys:
            limits = _keyword_languages(keys["keyword_languages"], problems)
            if limits is not None:
                patch.refs["keyword_languages"] = limits
        if "keyword_exclusion_languages" in keys:
            phrase_limits = _exclusion_languages(keys["keyword_exclusion_languages"], problems)
            if phrase_limits is not None:
                patch.refs["keyword_exclusion_languages"] = phrase_limits
        model_clean(patch, Intent, problems)
        parsed.intents.append(patch)


def _keywords(node: Node, problems: Problems) -> list[Node] | None:
    """Keyword texts, each checked on its own line; values are ``(text, normalized)``."""
    names = names_of(node, problems)
    if names is None:
        return None
    max_length = Keyword._meta.get_field("text").max_length
    seen: dict[str, Node] = {}
    out = []
    for keyword in names:
        normalized = normalize(keyword.value)
        if not normalized:
            problems.add(keyword, ERROR_KEYWORD_EMPTY)
            continue
        if max_length is not None and len(keyword.value) > max_length:
            problems.add(keyword, f"Ensure this value has at most {max_length} characters")
            continue
        if normalized in seen:
            problems.add(keyword, ERROR_KEYWORD_REPEATED.format(keyword=keyword.value, where=seen[normalized].where))
            continue
        seen[normalized] = keyword
        out.append(Node(keyword.source, keyword.path, (keyword.value, normalized)))
    return out


def _keyword_exclusions(node: Node, problems: Problems) -> list[Node] | None:
    """``keyword_exclusions: {keyword: [phrase, ...]}``: one node per keyword (its place the keyword's key), valued
    ``(keyword, normalized, phrases)``; each phrase checked on its own line by the keyword rule
    (:func:`routing.models.keyword_exclusion_problems`). Whether the intent lists the keyword is the importer's to
    check (the file may leave the keywords as stored). ``null`` is no exclusions."""

    def phrases_of(keyword: str, entry: Node) -> list[str] | None:
        texts: list[Node] = []
        valid = True
        for element in entry.elements():
            if isinstance(element.value, bool):  # YAML reads an unquoted yes/no as a boolean
                problems.add(element, ERROR_WORD_BOOLEAN)
                valid = False
            elif check(element, "string", problems):
                texts.append(element)
            else:
                valid = False
        phrases = [element.value.strip() for element in texts]
        for index, message in keyword_exclusion_problems(keyword, phrases):
            problems.add(texts[index] if index is not None else entry, message.rstrip("."))
            valid = False
        return phrases if valid else None

    return _per_keyword(node, problems, phrases_of)


def _keyword_languages(node: Node, problems: Problems) -> list[Node] | None:
    """``keyword_languages: {keyword: [language, ...]}``: one node per keyword (its place the keyword's key), valued
    ``(keyword, normalized, languages)`` in the platform's order; each language checked on its own line
    (:func:`routing.models.keyword_language_problems`). Whether the intent lists the keyword is the importer's to
    check. ``null`` — for the whole mapping or a keyword — is every language."""

    return _per_keyword(node, problems, lambda _keyword, entry: _languages_read(entry, problems))


def _languages_read(entry: Node, problems: Problems) -> list[str] | None:
    """A list of language codes, each checked on its own line, in the platform's order; ``None`` after a problem."""
    elements = list(entry.elements())
    languages = [element.value for element in elements]
    found = keyword_language_problems(languages)
    for index, message in found:
        problems.add(elements[index] if index is not None else entry, message.rstrip("."))
    return None if found else keyword_languages_ordered(languages)


def _exclusion_languages(node: Node, problems: Problems) -> list[Node] | None:
    """``keyword_exclusion_languages: {keyword: {phrase: [language, ...]}}``: one node per keyword, valued ``(keyword,
    normalized, {normalized phrase: (phrase, languages)})``; each language checked on its own line. Whether the
    keyword and its exclusion are the intent's is the importer's to check. ``null`` is every language."""

    def limits_of(_keyword: str, entry: Node) -> dict[str, tuple[str, list[str]]] | None:
        limits: dict[str, tuple[str, list[str]]] = {}
        valid = True
        for key, languages in entry.items():
            phrase = str(key)
            normalized = normalize(phrase)
            if not normalized:
                problems.add(languages, ERROR_EXCLUSION_EMPTY.format(phrase=phrase).rstrip("."))
                valid = False
                continue
            if languages.value is None:
                continue
            read = _languages_read(languages, problems) if check(languages, "list", problems) else None
            if read is None:
                valid = False
            elif read:
                limits[normalized] = (phrase.strip(), read)
        return limits if valid else None

    return _per_keyword(node, problems, limits_of, shape="mapping")


def _per_keyword(
    node: Node, problems: Problems, values_of: Callable[[str, Node], Any], shape: str = "list"
) -> list[Node] | None:
    """A mapping of an intent's keywords to lists (``keyword_exclusions``, ``keyword_languages``) or mappings
    (``keyword_exclusion_languages``; ``shape``): one node per keyword, valued ``(keyword, normalized,
    values_of(keyword, its value))`` — ``values_of`` gives ``None`` when it added a problem —, a ``null`` value as an
    empty one; ``None`` when anything was wrong."""
    if node.value is None:
        return []
    if not check(node, "mapping", problems):
        return None
    out: list[Node] = []
    seen: dict[str, Node] = {}
    valid = True
    for keyword, entry in node.items():
        normalized = normalize(keyword)
        if not normalized:
            problems.add(entry, ERROR_KEYWORD_EMPTY)
            valid = False
            continue
        if normalized in seen:
            problems.add(entry, ERROR_KEYWORD_REPEATED.format(keyword=keyword, where=seen[normalized].where))
            valid = False
            continue
        seen[normalized] = entry
        if entry.value is None:
            out.append(Node(entry.source, entry.path, (keyword, normalized, [] if shape == "list" else {})))
            continue
        if not check(entry, shape, problems):
            valid = False
            continue
        values = values_of(keyword, entry)
        if values is None:
            valid = False
            continue
        out.append(Node(entry.source, entry.path, (keyword, normalized, values)))
    return out if valid else None


# -- a domain's goals and capabilities ----------------------------------------------------


def _parse_domain(root: Node, sections: dict[str, Node], problems: Problems, parsed: Parsed) -> None:
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
            tool = _optional_name(keys["tool"], problems)
            if tool is not None:
                patch.refs["tool"] = tool
        _scalar(patch, keys, "description", "text", problems)
        _scalar(patch, keys, "enabled", "boolean", problems)
        _strings(patch, keys, "keywords", problems, strip=False)
        _strings(patch, keys, "examples", problems, strip=False)
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
        _scalar(patch, keys, "description", "text", problems)
        _translations(patch, keys, GOAL_TRANSLATED, problems)
        _scalar(patch, keys, "enabled", "boolean", problems)
        threshold = keys.get("confidence_threshold")
        if threshold is not None:
            if threshold.value is None:
                patch.put("confidence_threshold", threshold, None)  # the profile's goal_threshold
            else:
                _scalar(patch, keys, "confidence_threshold", "number", problems)
        _strings(patch, keys, "examples", problems, strip=False)
        _json_object(patch, keys, "entities_schema", problems)
        if "capabilities" in keys:
            names = names_of(keys["capabilities"], problems)
            if names is not None:
                patch.put("capabilities", keys["capabilities"], [node.value for node in names])
        model_clean(patch, Goal, problems)
        parsed.goals.append(patch)
