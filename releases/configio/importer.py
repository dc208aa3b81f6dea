"""Import YAML configuration: validate everything, then write it in one transaction.

The import is an *upsert*: entities named in the files are created or
updated, fields a file leaves out keep their value, and entities the files do
not name are left alone. Lists a file gives (an intent's keywords and tools, a
specialist's tools and handoff targets) replace the stored list.

Goals and capabilities are written by the same rules; their ``synced`` values (what the last manifest sync
wrote) are never touched, so a later sync sees what an import changed as the business user's edit and keeps it.

Nothing is written unless every file is valid, and writing changes only rows
whose values differ, so importing the same files twice changes nothing (no
new prompt version, no ``updated_at`` moved, no routing-version bump).

An import applies only what its user may change (:mod:`releases.configio.rights`): what the writer changed is
checked against the user's permissions before the transaction commits, and a change they may not make refuses the
whole import. Endpoints exported masked (:func:`common.endpoints.endpoint_mask`) import as the stored endpoint.

The rows compared with, the resolved plan and the report are :mod:`releases.configio.world`'s; the writing is
:mod:`releases.configio.writer`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from agents.models import AgentProfile, RoutingMode
from agents.public import EscalationSettings, endpoint_exported, endpoint_kept, external_desk_refusal
from common.config_version import config_batch
from common.text import normalize
from releases.configio.fields import Parsed, Patch
from releases.configio.kinds.knowledge import knowledge_write
from releases.configio.kinds.routing import routing_files_named
from releases.configio.messages import (
    ERROR_CAPABILITY_DOMAIN,
    ERROR_CONFLICT,
    ERROR_DOMAIN_SERVER,
    ERROR_DUPLICATE,
    ERROR_EXCLUSION_LANGUAGES_UNKNOWN_PHRASE,
    ERROR_EXCLUSION_UNKNOWN_KEYWORD,
    ERROR_LANGUAGES_UNKNOWN_KEYWORD,
    ERROR_SELF_HANDOFF,
    ERROR_TOOL_SERVER,
    ERROR_UNKNOWN_INTENT,
    ERROR_UNKNOWN_PROFILE,
    ERROR_UNKNOWN_SERVER,
    ERROR_UNKNOWN_SPECIALIST,
    ERROR_UNKNOWN_TOOL,
    WARNING_COORDINATOR_UNUSED,
    WARNING_TOOL_NOT_ALLOWED,
)
from releases.configio.parse import parse_source
from releases.configio.rights import rights_check
from releases.configio.source import Node, Problems, Source, format_path, load
from releases.configio.world import ImportReport, Plan, World
from releases.configio.writer import Writer
from routing.models import Intent, Keyword
from routing.public import ERROR_KEYWORD_TAKEN, ManifestError, goal_check


class ConfigImportError(Exception):
    """The files were refused; ``messages`` lists every problem as ``file:line: path: message``."""

    def __init__(self, errors: list[str], warnings: list[str] | None = None) -> None:
        super().__init__(f"{len(errors)} problem(s) in the configuration; nothing was imported.")
        self.messages = errors
        self.warnings = warnings or []


def config_import(
    *,
    sources: list[Source],
    profile: str | None = None,
    user=None,
    dry_run: bool = False,
    written: Callable[[], None] | None = None,
) -> ImportReport:
    """Validate ``sources`` together and write them in one transaction, as ``user``.

    ``profile`` is the agent_id for routing files without an ``agent_id:`` key that no profile's
    ``routing_config_path`` names (a routing file that profiles of the import name applies to each of them).
    ``user`` makes what the import changes: it must hold the permission each change needs
    (:func:`releases.configio.rights.rights_check`); ``None`` is the operator at the shell, who may change
    everything (the allow-list of model key variables applies to everyone: it is the field's own rule).
    Raises :class:`ConfigImportError` with every problem found (nothing is
    written then). With ``dry_run`` everything is validated and written, then
    rolled back, so the report shows what would change. Compiled routing is
    invalidated once, after the transaction, and only when something changed.
    ``written`` is called inside the transaction once everything is written (a
    dry run's changes are still there): the command reads the profiles' drafts then.
    """
    problems = Problems()
    parsed = Parsed()
    roots = [load(source, problems) for source in sources]
    loaded = all(root is not None for root in roots)
    read = [root for root in roots if root is not None]
    named = routing_files_named(read, problems)
    for root in read:
        parse_source(root, problems, parsed, profile_option=profile, named_by=named.get(root.source, ()))
    # A file that did not parse leaves holes that would show up as a cascade of unknown references.
    if not loaded:
        _refuse(problems)

    report = ImportReport(dry_run=dry_run)

    def validate_and_write() -> None:
        world = World.load(parsed)
        plan = _resolve(parsed, world, problems)
        if problems:
            _refuse(problems)
        writer = Writer(world, plan, report, user)
        writer.run()
        knowledge_write(parsed.knowledge, report, user, problems, writer.touches)
        rights_check(writer.touches, user, problems)
        if problems:  # the savepoint below undoes what the writer did
            _refuse(problems)
        if written is not None:  # the caller reads what the import wrote, before a dry run rolls it back
            written()

    # The batch's one version bump happens inside the transaction, so a dry run or a refusal rolls it back with
    # the rest. The writes have a savepoint of their own: a refused or failed write is undone before the batch
    # bumps, which it then does in a usable transaction.
    with transaction.atomic():
        with config_batch(), transaction.atomic():
            validate_and_write()
        if dry_run:
            transaction.set_rollback(True)
    report.warnings = _unique(str(p) for p in problems.warnings)
    return report


def _refuse(problems: Problems) -> None:
    errors = sorted(problems.errors, key=lambda p: (p.source.name if p.source else "", p.line))
    raise ConfigImportError(_unique(str(p) for p in errors), _unique(str(p) for p in problems.warnings))


def _unique(items) -> list[str]:
    return list(dict.fromkeys(items))


def _by_key(patches: list[Patch], problems: Problems) -> dict[Any, Patch]:
    """Index patches by identity; a second one with the same identity is a duplicate."""
    out: dict[Any, Patch] = {}
    for patch in patches:
        first = out.get(patch.key)
        if first is not None:
            problems.add(patch.node, ERROR_DUPLICATE.format(what=patch.kind, name=patch.name, where=first.node.where))
            continue
        out[patch.key] = patch
    return out


def _merge_profiles(patches: list[Patch], problems: Problems) -> dict[str, Patch]:
    """One patch per profile from agents.yaml entries and routing files' ``router`` blocks.

    Both may set the routing mode, the LLM-router switch and threshold and the
    handoff switch; they must agree.
    """
    by_section: dict[str, dict[Any, Patch]] = {}
    for section in ("agents", "router"):
        by_section[section] = _by_key([p for p in patches if p.section == section], problems)
    merged: dict[str, Patch] = {}
    for section in ("agents", "router"):
        for key, patch in by_section[section].items():
            target = merged.get(key[0])
            if target is None:
                merged[key[0]] = Patch("profile", section, key, patch.node, dict(patch.values), dict(patch.where))
                merged[key[0]].refs = dict(patch.refs)
                continue
            for name, value in patch.values.items():
                if name in target.values and target.values[name] != value:
                    other = target.where[name]
                    problems.add(
                        patch.where[name],
                        ERROR_CONFLICT.format(
                            value=value,
                            other=target.values[name],
                            other_path=format_path(other.path),
                            where=other.where,
                        ),
                    )
                    continue
                target.put(name, patch.where[name], value)
            target.refs.update(patch.refs)
    return merged


def _resolve(parsed: Parsed, world: World, problems: Problems) -> Plan:
    plan = Plan(
        servers={key[0]: patch for key, patch in _by_key(parsed.servers, problems).items()},
        tools={key[0]: patch for key, patch in _by_key(parsed.tools, problems).items()},
        profiles=_merge_profiles(parsed.profiles, problems),
        specialists=_by_key(parsed.specialists, problems),
        intents=_by_key(parsed.intents, problems),
        policies=_by_key(parsed.policies, problems),
        capabilities={key[0]: patch for key, patch in _by_key(parsed.capabilities, problems).items()},
        goals=_by_key(parsed.goals, problems),
    )
    _keep_masked_endpoints(plan, world, problems)
    servers = set(world.servers) | set(plan.servers)
    tools = set(world.tools) | set(plan.tools)
    defined_profiles = set(world.profiles) | {p.key[0] for p in parsed.profiles if p.section == "agents"}
    specialists = set(world.specialists) | set(plan.specialists)
    intents = set(world.intents) | set(plan.intents)

    def require(node: Node, known: bool, message: str, **kwargs: Any) -> None:
        if not known:
            problems.add(node, message.format(name=node.value, **kwargs))

    for node in parsed.default_agents:
        require(node, node.value in defined_profiles, ERROR_UNKNOWN_PROFILE)
    for patch in plan.tools.values():
        if "server" in patch.refs:
            require(patch.refs["server"], patch.refs["server"].value in servers, ERROR_UNKNOWN_SERVER)

    # Routing for a profile that does not exist: one message per file, not one per intent.
    known_routed: set[str] = set()
    for patch in (*plan.profiles.values(), *plan.intents.values(), *plan.policies.values()):
        profile = patch.refs.get("profile")
        if profile is None:
            continue
        if profile.value in defined_profiles:
            known_routed.add(profile.value)
        else:
            require(profile, False, ERROR_UNKNOWN_PROFILE)

    for (agent_id, name), patch in plan.specialists.items():
        for tool in patch.refs.get("tools", []):
            require(tool, tool.value in tools, ERROR_UNKNOWN_TOOL)
        for target in patch.refs.get("handoff_targets", []):
            if target.value == name:
                problems.add(target, ERROR_SELF_HANDOFF)
            else:
                require(target, (agent_id, target.value) in specialists, ERROR_UNKNOWN_SPECIALIST, profile=agent_id)

    for agent_id, patch in plan.profiles.items():
        if agent_id not in defined_profiles:
            continue
        for ref in ("fallback", "coordinator"):
            named = patch.refs.get(ref)
            if named is not None and named.value is not None:
                require(named, (agent_id, named.value) in specialists, ERROR_UNKNOWN_SPECIALIST, profile=agent_id)
        _warn_coordinator_mode(agent_id, patch, world, problems)
        for server in patch.refs.get("goal_domains", []):
            require(server, server.value in servers, ERROR_UNKNOWN_SERVER)
        _check_desk(patch, world.profiles.get(agent_id), problems)

    for (agent_id, name), patch in plan.intents.items():
        if agent_id not in known_routed:
            continue
        if "agent" in patch.refs:
            agent = patch.refs["agent"]
            require(agent, (agent_id, agent.value) in specialists, ERROR_UNKNOWN_SPECIALIST, profile=agent_id)
        for tool in patch.refs.get("mcp_tools", []):
            require(tool, tool.value in tools, ERROR_UNKNOWN_TOOL)
        _check_exclusions(patch, world.intents.get((agent_id, name)), problems)

    for (agent_id, _state), patch in plan.policies.items():
        if agent_id not in known_routed:
            continue
        if "agent" in patch.refs:
            agent = patch.refs["agent"]
            require(agent, (agent_id, agent.value) in specialists, ERROR_UNKNOWN_SPECIALIST, profile=agent_id)
        intent = patch.refs.get("intent")
        if intent is not None and intent.value is not None:
            require(intent, (agent_id, intent.value) in intents, ERROR_UNKNOWN_INTENT, profile=agent_id)

    for agent_id in sorted(known_routed):
        _check_keywords(agent_id, plan, world, problems)
    _warn_unusable_tools(plan, world, problems)
    _check_domains(plan, world, problems, servers)
    return plan


def _check_desk(patch: Patch, stored: AgentProfile | None, problems: Problems) -> None:
    """``escalation.desk`` names the platform's desk (blank), an enabled external desk, or the one the profile names
    already (:func:`agents.selectors.external_desk_refusal`)."""
    if "escalation" not in patch.values:
        return
    desk = patch.values["escalation"].get("desk", "")
    was = EscalationSettings.from_json(stored.escalation).desk if stored is not None else ""
    refusal = external_desk_refusal(desk=desk, stored=was)
    if refusal is not None:
        node = patch.where["escalation"]
        problems.add(node.child("desk") if isinstance(node.value, dict) and "desk" in node.value else node, refusal)


def _keep_masked_endpoints(plan: Plan, world: World, problems: Problems) -> None:
    """An exported endpoint is masked (credentials, query values): its mask stands for the stored endpoint (the
    file changes nothing there), any other masked value is refused (:func:`agents.schemas.endpoint_kept`). A server's
    endpoint written as the export writes it (:func:`agents.schemas.endpoint_exported`) keeps its template
    too."""
    for agent_id, patch in plan.profiles.items():
        stored = world.profiles.get(agent_id)
        _keep_masked(patch, "llm_base_url", stored.llm_base_url if stored else "", problems)
    for name, patch in plan.servers.items():
        server = world.servers.get(name)
        given = patch.values.get("endpoint")
        if (
            server is not None
            and not patch.values.get("endpoint_template")
            and given == endpoint_exported(server.endpoint, server.endpoint_template)
        ):
            patch.values.update(endpoint=server.endpoint, endpoint_template=server.endpoint_template)
            continue
        _keep_masked(patch, "endpoint", server.endpoint if server else "", problems)


def _keep_masked(patch: Patch, field: str, stored: str, problems: Problems) -> None:
    """Make ``patch``'s masked address whole against the ``stored`` one."""
    if field not in patch.values:
        return
    try:
        patch.values[field] = endpoint_kept(patch.values[field], stored)
    except ValidationError as exc:
        problems.add(patch.where[field], exc.messages[0])


def _check_domains(plan: Plan, world: World, problems: Problems, servers: set[str]) -> None:
    """Goals and capabilities: a domain belongs to one MCP server, a capability name to one domain, a
    capability's tool to its domain's server, and every goal passes :func:`routing.goals.manifest.goal_check` (the
    admin's and the manifest's rules) against its domain's capabilities, stored and imported."""
    domain_server: dict[str, Node] = {}
    reported: set[tuple[str, Any]] = set()

    def once(node: Node, message: str) -> None:
        if (node.source.name, node.path) not in reported:
            reported.add((node.source.name, node.path))
            problems.add(node, message)

    patches = [*plan.capabilities.values(), *plan.goals.values()]
    for patch in patches:
        domain, server = patch.values["domain"], patch.refs["server"]
        if server.value not in servers:
            once(server, ERROR_UNKNOWN_SERVER.format(name=server.value))
            continue
        others = sorted(world.domain_servers.get(domain, set()) - {server.value})
        if others:
            once(server, ERROR_DOMAIN_SERVER.format(domain=domain, other=others[0]))
        first = domain_server.setdefault(domain, server)
        if first.value != server.value:
            once(
                server,
                ERROR_CONFLICT.format(
                    value=server.value, other=first.value, other_path=format_path(first.path), where=first.where
                ),
            )

    for name, patch in plan.capabilities.items():
        domain, server = patch.values["domain"], patch.refs["server"].value
        stored = world.capabilities.get(name)
        if stored is not None and stored.domain != domain:
            problems.add(
                patch.node,
                ERROR_CAPABILITY_DOMAIN.format(name=name, domain=stored.domain, server=stored.server.name),
            )
        tool = patch.refs.get("tool")
        if tool is None or tool.value is None or server not in servers:
            continue
        if tool.value not in plan.tools and tool.value not in world.tools:
            problems.add(tool, ERROR_UNKNOWN_TOOL.format(name=tool.value))
            continue
        tool_patch = plan.tools.get(tool.value)
        if tool_patch is not None and "server" in tool_patch.refs:
            tool_server = tool_patch.refs["server"].value
        else:
            tool_server = world.tools[tool.value].server.name
        if tool_server != server:
            problems.add(tool, ERROR_TOOL_SERVER.format(name=tool.value, server=tool_server, expected=server))

    names: dict[str, set[str]] = {}
    for capability in world.capabilities.values():
        names.setdefault(capability.domain, set()).add(capability.name)
    for name, patch in plan.capabilities.items():
        names.setdefault(patch.values["domain"], set()).add(name)
    for (domain, name), patch in plan.goals.items():
        goal = world.goals.get((domain, name))
        try:
            goal_check(
                name,
                entities_schema=patch.values.get("entities_schema", goal.entities_schema if goal else {}),
                capabilities=patch.values.get("capabilities", goal.capabilities if goal else []),
                capability_names=names.get(domain, set()),
            )
        except ManifestError as exc:
            _goal_problem(patch, name, str(exc), problems)


def _goal_problem(patch: Patch, name: str, message: str, problems: Problems) -> None:
    """Report ``goal_check``'s ``<name>.entities_schema.direction: problem`` at that place of the file."""
    place, problem = "", message
    if message.startswith(name):
        place, separator, problem = message[len(name) :].partition(": ")
        if not separator:
            place, problem = "", message
    path = (*patch.node.path, *(part for part in place.split(".") if part))
    problems.add(Node(patch.node.source, path, None), problem)


def _check_exclusions(patch: Patch, stored: Intent | None, problems: Problems) -> None:
    """An intent's ``keyword_exclusions``, ``keyword_languages`` and ``keyword_exclusion_languages`` name its
    keywords: the file's, or the stored ones when the file leaves them as they are; and the last its keywords'
    exclusions, likewise."""
    refs = ("keyword_exclusions", "keyword_languages", "keyword_exclusion_languages")
    if not any(ref in patch.refs for ref in refs):
        return
    rows = list(stored.keywords.all()) if stored is not None else []
    if "keywords" in patch.refs:
        keywords = {node.value[1]: node.value[0] for node in patch.refs["keywords"]}
    else:
        keywords = {k.normalized: k.text for k in rows}
    listed = ", ".join(repr(text) for text in sorted(keywords.values())) or "it has none"
    errors = (ERROR_EXCLUSION_UNKNOWN_KEYWORD, ERROR_LANGUAGES_UNKNOWN_KEYWORD, ERROR_LANGUAGES_UNKNOWN_KEYWORD)
    for ref, error in zip(refs, errors, strict=True):
        for node in patch.refs.get(ref, ()):
            keyword, normalized, _values = node.value
            if normalized not in keywords:
                problems.add(node, error.format(keyword=keyword, keywords=listed))
    if "keyword_exclusion_languages" in patch.refs:
        phrases = _exclusions_of(patch, rows)
        for node in patch.refs["keyword_exclusion_languages"]:
            keyword, normalized, limits = node.value
            known = {normalize(phrase) for phrase in phrases.get(normalized, ())}
            for phrase, _languages in (limit for key, limit in limits.items() if key not in known):
                said = ", ".join(repr(text) for text in phrases.get(normalized, ())) or "it has none"
                problems.add(
                    node, ERROR_EXCLUSION_LANGUAGES_UNKNOWN_PHRASE.format(phrase=phrase, keyword=keyword, phrases=said)
                )


def _exclusions_of(patch: Patch, rows: list[Keyword]) -> dict[str, list[str]]:
    """The exclusions of each of an intent's keywords (by normalised keyword) once ``patch`` is written: the file's
    ``keyword_exclusions`` when it gives them (a keyword it does not name has none), else the stored ones."""
    if "keyword_exclusions" in patch.refs:
        return {node.value[1]: list(node.value[2]) for node in patch.refs["keyword_exclusions"]}
    return {k.normalized: list(k.exclusions or ()) for k in rows}


def _check_keywords(agent_id: str, plan: Plan, world: World, problems: Problems) -> None:
    """No keyword may belong to two enabled intents of one profile (routing.services.keywords_validate_unique).

    Checked on the result of the import: stored intents the files do not name
    keep their keywords and claim them first; then the files' intents in order.
    """
    claimed: dict[str, str] = {}
    for (profile, name), intent in world.intents.items():
        if profile == agent_id and (profile, name) not in plan.intents and intent.enabled:
            for keyword in intent.keywords.all():
                claimed.setdefault(keyword.normalized, name)
    for (profile, name), patch in plan.intents.items():
        if profile != agent_id:
            continue
        stored = world.intents.get((profile, name))
        enabled = patch.values.get("enabled", stored.enabled if stored else True)
        if not enabled:
            continue
        if "keywords" in patch.refs:
            keywords = patch.refs["keywords"]
        elif stored is not None:
            keywords = [Node(patch.node.source, patch.node.path, (k.text, k.normalized)) for k in stored.keywords.all()]
        else:
            keywords = []
        for keyword in keywords:
            text, normalized = keyword.value
            other = claimed.get(normalized)
            if other is not None and other != name:
                problems.add(keyword, ERROR_KEYWORD_TAKEN.format(keyword=text, intent=other).rstrip("."))
            else:
                claimed[normalized] = name


def _warn_coordinator_mode(agent_id: str, patch: Patch, world: World, problems: Problems) -> None:
    """A coordinator takes part in router and hybrid modes only; in supervisor mode it is stored but unused."""
    coordinator = patch.refs.get("coordinator")
    if coordinator is None or coordinator.value is None:
        return
    stored = world.profiles.get(agent_id)
    default = AgentProfile._meta.get_field("routing_mode").default
    mode = patch.values.get("routing_mode", stored.routing_mode if stored else default)
    if mode == RoutingMode.SUPERVISOR:
        problems.warn(coordinator, WARNING_COORDINATOR_UNUSED.format(mode=mode))


def _warn_unusable_tools(plan: Plan, world: World, problems: Problems) -> None:
    def allowed(agent_id: str, specialist: str) -> set[str] | None:
        patch = plan.specialists.get((agent_id, specialist))
        if patch is not None and "tools" in patch.refs:
            return {node.value for node in patch.refs["tools"]}
        stored = world.specialists.get((agent_id, specialist))
        return {tool.name for tool in stored.allowed_tools.all()} if stored else None

    for (agent_id, _name), patch in plan.intents.items():
        if "agent" not in patch.refs or "mcp_tools" not in patch.refs:
            continue
        specialist = patch.refs["agent"].value
        usable = allowed(agent_id, specialist)
        if usable is None:
            continue
        for tool in patch.refs["mcp_tools"]:
            if tool.value not in usable:
                problems.warn(tool, WARNING_TOOL_NOT_ALLOWED.format(tool=tool.value, specialist=specialist))
