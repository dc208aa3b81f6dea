"""A domain's goal manifest (the JSON an MCP server serves as ``manifest://<domain>``), checked and read into the
planner's specs (:mod:`routing.goals.planner`):

* :func:`manifest_read` — the whole manifest: its capabilities' metadata (counts, times, ``flow.pre`` entries a plan
  can be made of, no capability that comes back to itself), its goals' ``entities_schema`` and translations; a
  :class:`ManifestError` names the place (``goals[1].entities_schema.direction``);
* :func:`manifest_bounds` — what the platform will bound in a manifest it reads (the sync's report);
* :func:`goal_check` — a goal edited in the admin or imported from YAML, by the same rules.

Pure functions over frozen dataclasses: no model, no database, no domain call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from common.patterns import pattern_problem
from common.translations import translations_cleaned, translations_problems
from routing.goals.planner import (
    GOAL_TRANSLATED,
    LIMIT_SETTINGS,
    LIMIT_TURN_CONCURRENCY,
    CapabilitySpec,
    GoalSpec,
    PlanError,
    PlanLimits,
    goal_map,
    pre_entries,
    whole_count,
)
from routing.goals.words import sentence_problem

ENTITY_TYPES = frozenset({"string", "enum", "list", "boolean"})  # string and enum, and two extensions


class ManifestError(ValueError):
    """A manifest the platform cannot serve; the message names the place (``goals[1].entities_schema.direction``)."""


@dataclass(frozen=True)
class Manifest:
    domain: str
    goals: Mapping[str, GoalSpec]
    capabilities: Mapping[str, CapabilitySpec]
    tools: Mapping[str, str]  # capability → the MCP tool that serves it


def _need(condition: bool, where: str, problem: str) -> None:
    if not condition:
        raise ManifestError(f"{where}: {problem}")


def _entities(where: str, schema: Any, capabilities: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    _need(isinstance(schema, Mapping), where, "must be an object of entities")
    for name, entity in schema.items():
        at = f"{where}.{name}"
        _need(isinstance(entity, Mapping), at, "must be an object")
        kind = entity.get("type", "string")
        _need(kind in ENTITY_TYPES, at, f"type must be one of {', '.join(sorted(ENTITY_TYPES))}, not {kind!r}")
        if entity.get("label") is not None:
            problem = sentence_problem(entity["label"])
            _need(not problem, f"{at}.label", problem)
        if "pattern" in entity:
            _need(isinstance(entity["pattern"], str), f"{at}.pattern", "must be text (a regular expression)")
            problem = pattern_problem(entity["pattern"])
            _need(not problem, f"{at}.pattern", problem)
        if kind == "enum":
            values = entity.get("values")
            _need(isinstance(values, list) and bool(values), at, "an enum needs its values")
            _need("default" not in entity or entity["default"] in values, at, "default must be one of the values")
        for value, named in (entity.get("capability_map") or {}).items():
            _need(kind != "enum" or value in entity["values"], at, f"capability_map names {value!r}, not a value")
            for capability in [named] if isinstance(named, str) else list(named):
                _need(capability in capabilities, at, f"capability_map names unknown capability {capability!r}")
    return {name: dict(entity) for name, entity in schema.items()}


def _metadata_check(where: str, metadata: Mapping[str, Any]) -> None:
    """A capability's counts and times are what they say (the platform bounds them: :func:`manifest_bounds`),
    and its ``flow.pre`` entries are ones a plan can be made of."""
    language_param = metadata.get("language_param")
    _need(
        language_param is None or (isinstance(language_param, str) and bool(language_param.strip())),
        f"{where}.language_param",
        "must name the tool's argument that takes the customer's language",
    )
    timeout = metadata.get("timeout_seconds")
    if timeout is not None:
        _need(
            isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0,
            f"{where}.timeout_seconds",
            f"must be a number of seconds above 0, not {timeout!r}",
        )
    decomposition = metadata.get("decomposition") or {}
    _need(isinstance(decomposition, Mapping), f"{where}.decomposition", "must be an object")
    array_params = decomposition.get("array_params") or []
    _need(isinstance(array_params, list), f"{where}.decomposition.array_params", "must be a list")
    for index, spec in enumerate(array_params):
        at = f"{where}.decomposition.array_params[{index}]"
        _need(isinstance(spec, Mapping) and isinstance(spec.get("param_name"), str), at, "needs a param_name")
        if "max_concurrency" in spec:
            _need(
                whole_count(spec["max_concurrency"]) is not None,
                f"{at}.max_concurrency",
                f"must be a whole number of 1 or more, not {spec['max_concurrency']!r}",
            )
    composition = metadata.get("composition") or {}
    _need(isinstance(composition, Mapping), f"{where}.composition", "must be an object")
    roles = composition.get("followup_roles") or []
    _need(
        isinstance(roles, list) and all(isinstance(role, str) for role in roles),
        f"{where}.composition.followup_roles",
        "must be a list of role names",
    )
    flow = metadata.get("flow") or {}
    _need(isinstance(flow, Mapping), f"{where}.flow", "must be an object")
    _need(isinstance(flow.get("pre") or [], list), f"{where}.flow.pre", "must be a list")
    try:
        pre_entries(CapabilitySpec(domain="", name=where, metadata=metadata))
    except PlanError as exc:
        raise ManifestError(str(exc).replace(f"{where}: ", f"{where}.", 1)) from exc


def _acyclic_capabilities(capabilities: Mapping[str, CapabilitySpec]) -> None:
    """Refuse a capability that comes back to itself through ``flow.pre`` (its search needs a search that needs
    it) or ``composition`` (it follows itself up, or a follow-up follows it up again): a plan expands each one
    level only, so the manifest would not do what it says."""
    names = list(capabilities)

    def pre_edges(name: str) -> list[str]:
        found = (capabilities[name].metadata.get("flow") or {}).get("pre") or ()
        return [str(entry.get("search_capability")) for entry in found if isinstance(entry, Mapping)]

    def followup_edges(name: str) -> list[str]:
        roles = set((capabilities[name].metadata.get("composition") or {}).get("followup_roles") or ())
        return [other for other in names if roles.intersection(capabilities[other].roles)]

    for kind, edges in (("flow.pre", pre_edges), ("composition", followup_edges)):
        for start in names:
            path = _cycle_from(start, edges, capabilities)
            if path:
                index = names.index(start)
                _need(False, f"capabilities[{index}].metadata.{kind}", f"{' → '.join(path)} is a cycle")


def _cycle_from(start: str, edges: Any, capabilities: Mapping[str, CapabilitySpec]) -> list[str]:
    """The shortest path from ``start`` back to it along ``edges`` within ``capabilities`` (``[]``: none)."""
    paths = [[start]]
    seen = {start}
    while paths:
        path = paths.pop(0)
        for following in edges(path[-1]):
            if following == start:
                return [*path, start]
            if following in capabilities and following not in seen:
                seen.add(following)
                paths.append([*path, following])
    return []


def manifest_bounds(manifest: Manifest, *, limits: PlanLimits, step_seconds: float) -> list[str]:
    """What the platform will bound in ``manifest``, in the sync's report: a ``max_concurrency`` over
    ``limits.max_concurrency`` and a ``timeout_seconds`` over ``step_seconds`` (the server's timeout)."""
    notes = []
    for index, capability in enumerate(manifest.capabilities.values()):
        at = f"capabilities[{index}].metadata"
        for number, spec in enumerate((capability.metadata.get("decomposition") or {}).get("array_params") or ()):
            asked = whole_count(spec.get("max_concurrency"))
            if asked is not None and asked > limits.max_concurrency:
                notes.append(
                    f"{at}.decomposition.array_params[{number}]: max_concurrency {asked} is bounded by "
                    f"{LIMIT_SETTINGS[LIMIT_TURN_CONCURRENCY]} ({limits.max_concurrency})"
                )
        timeout = capability.metadata.get("timeout_seconds")
        if isinstance(timeout, int | float) and timeout > step_seconds:
            notes.append(f"{at}: timeout_seconds {timeout:g} is bounded by the server's timeout ({step_seconds:g} s)")
    return notes


def manifest_read(data: Any) -> Manifest:
    """Check a domain's manifest and read it into specs; raises :class:`ManifestError` naming what is wrong."""
    _need(isinstance(data, Mapping), "manifest", "must be a JSON object")
    domain = data.get("domain")
    _need(isinstance(domain, str) and bool(domain.strip()), "domain", "must be a non-empty string")
    raw_capabilities = data.get("capabilities") or []
    _need(isinstance(raw_capabilities, list), "capabilities", "must be a list")
    capabilities: dict[str, CapabilitySpec] = {}
    tools: dict[str, str] = {}
    for index, raw in enumerate(raw_capabilities):
        at = f"capabilities[{index}]"
        _need(isinstance(raw, Mapping) and isinstance(raw.get("capability"), str), at, "needs a capability name")
        name = raw["capability"]
        _need(name not in capabilities, at, f"capability {name!r} is declared twice")
        metadata = raw.get("metadata") or {}
        _need(isinstance(metadata, Mapping), f"{at}.metadata", "must be an object")
        _metadata_check(f"{at}.metadata", metadata)
        capabilities[name] = CapabilitySpec(domain=domain, name=name, metadata=dict(metadata))
        tools[name] = str(raw.get("tool") or name)
    _acyclic_capabilities(capabilities)
    raw_goals = data.get("goals") or []
    _need(isinstance(raw_goals, list) and bool(raw_goals), "goals", "must be a non-empty list")
    goals: dict[str, GoalSpec] = {}
    for index, raw in enumerate(raw_goals):
        at = f"goals[{index}]"
        _need(isinstance(raw, Mapping) and isinstance(raw.get("goal"), str), at, "needs a goal name")
        entities = _entities(f"{at}.entities_schema", raw.get("entities_schema") or {}, capabilities)
        named = list(raw.get("capabilities") or [])
        for capability in named:
            _need(capability in capabilities, f"{at}.capabilities", f"unknown capability {capability!r}")
        translations = raw.get("translations") or {}
        if problems := translations_problems(translations, GOAL_TRANSLATED):
            raise ManifestError(f"{at}.translations: {problems[0][1]}")
        goal = GoalSpec(
            domain=domain,
            name=raw["goal"],
            entities_schema=entities,
            capabilities=tuple(named),
            description=str(raw.get("description") or ""),
            translations=translations_cleaned(translations),
        )
        _need(bool(goal_map(goal, {})[0]), at, "names no capability (capability_map or capabilities)")
        goals[goal.name] = goal
    return Manifest(domain=domain, goals=goals, capabilities=capabilities, tools=tools)


def goal_check(
    where: str, *, entities_schema: Any, capabilities: Any, capability_names: Sequence[str] | set[str] | frozenset[str]
) -> dict[str, Mapping[str, Any]]:
    """A goal edited in the admin, checked by the manifest's rules against its domain's ``capability_names``:
    the ``entities_schema`` (unknown type, enum without values, default or map key not a value, a map naming an
    unknown capability), the goal's own ``capabilities``, and that it names some capability. Raises
    :class:`ManifestError` naming the place (``where.entities_schema.direction``); returns the entities."""
    known = dict.fromkeys(capability_names)
    entities = _entities(f"{where}.entities_schema", entities_schema if entities_schema is not None else {}, known)
    _need(isinstance(capabilities, list | tuple), f"{where}.capabilities", "must be a list of capability names")
    for capability in capabilities:
        _need(capability in known, f"{where}.capabilities", f"unknown capability {capability!r}")
    goal = GoalSpec(domain="", name=where, entities_schema=entities, capabilities=tuple(capabilities))
    _need(bool(goal_map(goal, {})[0]), where, "names no capability (capability_map or capabilities)")
    return entities
