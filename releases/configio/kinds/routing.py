"""A ``routing.yaml``: the ``router:`` block, ``state_policies:`` and ``intents:`` of the profiles it applies to (its
``agent_id:``, the profiles whose ``routing_config_path`` names it, or ``--profile``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import PurePosixPath
from typing import Any

from agents.models import AgentProfile
from agents.public import yaml_keys
from common.text import normalize
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
from releases.configio.kinds.agents import ROUTING_PATH_KEY, read_settings
from releases.configio.messages import (
    ERROR_KEYWORD_EMPTY,
    ERROR_KEYWORD_REPEATED,
    ERROR_NO_PROFILE,
    ERROR_PROFILE_MISMATCH,
    ERROR_PROFILE_NAMED,
    ERROR_ROUTING_PATH_AMBIGUOUS,
    ERROR_ROUTING_PATH_OTHER_PROFILE,
    ERROR_WORD_BOOLEAN,
    WARNING_ROUTING_PATH_ABSENT,
)
from releases.configio.source import Node, Problems, Source
from routing.models import (
    ERROR_EXCLUSION_EMPTY,
    INTENT_TRANSLATED,
    Intent,
    Keyword,
    StatePolicy,
    keyword_exclusion_problems,
    keyword_language_problems,
    keyword_languages_ordered,
)

ROUTING_KEYS = ("router", "state_policies", "intents")


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


def routing_profiles(
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


def parse_router(section: Node, profile: Node, problems: Problems, parsed: Parsed) -> None:
    keys = keys_of(section, problems, ROUTER_KEYS)
    if keys is None:
        return
    patch = Patch("router block of profile", "router", (profile.value,), profile)
    patch.refs["profile"] = profile
    read_settings(patch, keys, "routing", problems)
    for key, ref in (("fallback_agent", "fallback"), ("coordinator", "coordinator")):
        if key in keys:
            node = optional_name(keys[key], problems)
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


def parse_policies(section: Node, profile: Node, problems: Problems, parsed: Parsed) -> None:
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
            read_scalar(patch, keys, "description", "text", problems)
            read_scalar(patch, keys, "enabled", "boolean", problems)
        model_clean(patch, StatePolicy, problems)
        parsed.policies.append(patch)


def parse_intents(section: Node, profile: Node, problems: Problems, parsed: Parsed) -> None:
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
        read_scalar(patch, keys, "domain", "text", problems)
        read_scalar(patch, keys, "description", "text", problems)
        read_translations(patch, keys, INTENT_TRANSLATED, problems)
        read_scalar(patch, keys, "priority", "integer", problems)
        read_scalar(patch, keys, "enabled", "boolean", problems)
        read_scalar(patch, keys, "next_state", "text", problems)
        read_scalar(patch, keys, "escalate_to", "text", problems)
        read_strings(patch, keys, "examples", problems)
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
