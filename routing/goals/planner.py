"""Goal-based orchestration's deterministic core: goal → capabilities → an execution plan, from metadata.

The model only reads a message's goal and human-friendly entities (:class:`IntentOutput`). Everything after that is
decided here, by the metadata the domains publish in their manifests — never by naming a capability in code:

* :func:`goal_resolve` — ``IntentOutput`` → one :class:`ExecutionIntent` per capability, through the goal's
  ``capability_map`` (an enum entity's value names one capability or a list of them; a missing value takes the
  entity's ``default``, else its first value) or, for a goal with one capability, the goal's own ``capabilities``;
* :func:`plan_build` — intents → :class:`ExecutionPlan`: ``decomposition.array_params`` fans a list parameter out
  into one step per element (under the parameter's ``max_concurrency``), ``composition`` adds follow-up steps of
  the capabilities that play a ``followup_roles`` role when ``enabled_if`` holds, with params from ``param_map``;
  ``flow.pre`` puts pre-steps before a step, such as a ``resolve`` of ``symbol_text`` into ``symbol`` through a
  search capability (:func:`pre_entries`) — all within the platform's :class:`PlanLimits`, whatever a manifest
  asks (each limit that bites is a :func:`limit_hit` on the plan); what the user wrote stays text: a ``${…}`` in
  an entity is written ``$${…}`` in the plan and sent as the user wrote it, never resolved;
* :func:`plan_check` — refuses, with a clear error, a cycle, a reference to no earlier step, and an unknown or
  disabled capability, before anything runs;
* :func:`refs_resolve` — ``${1.explanation}`` and ``${<output_key>.result.<field>}`` from the outputs of earlier
  steps;
* :func:`candidate_choose` — which of an ambiguous resolve's candidates the user's reply picks.

A domain's manifest is checked and read into the specs above by :mod:`routing.goals.manifest`.

Pure functions over frozen dataclasses: no model, no database, no domain call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from django.conf import settings

from common import sizes
from common.text import normalize
from common.translations import Translations
from routing.goals.words import sentence_problem

if TYPE_CHECKING:
    from routing.examples import ExampleIndex

SEQUENTIAL, PARALLEL, DAG = "sequential", "parallel", "dag"
SUCCESS, FAILURE, CLARIFICATION = "success", "failure", "clarification"  # DomainOutput and turn statuses
GOAL_TRANSLATED = ("description",)  # the texts of a goal that have a value per language (common.translations)
GENERAL_DOMAIN = "general"  # small talk and what no goal covers: exempt from the confidence gate
GOAL_MODE = "goal"  # the routing mode of a profile that serves goals (agents.models.RoutingMode.GOAL)
# What the engine records for a goal decision (conversations.goals.turn's GOAL_AGENT and method): a layer below it,
# the saved routing tests' runner (releases.routing_tests) and the test form report the same values.
GOAL_AGENT, GOAL_METHOD = "goal_planner", "goal"
DEFAULT_CONFIDENCE_THRESHOLD = 0.94
LAST, REPORT, MERGE = "last", "report", "merge"
DEFAULT_MAX_CONCURRENCY = 4
EXPLANATION_PARAM = "_step_explanation"  # what a param_map's from_parameters names for the step's explanation
# Among an intent's parameters: the values the user chose among a search's candidates, by the param they are
# (``{"symbol": ["NDA-FI.HE"]}``). A text that is one of them is that param's value, with no search again.
CHOSEN_PARAM = "_chosen"
RESOLVE = "resolve"  # the pre-step that resolves a human-friendly entity through a search capability (flow.pre)
PRE_STEP_TYPES = {RESOLVE: RESOLVE, "resolve_symbol": RESOLVE}  # a flow.pre entry's type → its kind (seed's alias)

# A step's reference to an earlier step's output; ``$${`` is a ``${`` the user wrote (never a reference).
REF_RE = re.compile(r"(?<!\$)\$\{([A-Za-z0-9_]+)\.([A-Za-z0-9_.]+)\}")
_LITERAL = "$${"
_REF_OR_LITERAL = re.compile(r"\$\$\{|" + REF_RE.pattern)

# The limits a plan is built and run within (PlanLimits, the engine's): their names in metadata.goal.limits and
# the settings that set them.
LIMIT_STEPS, LIMIT_FANOUT, LIMIT_TURN_CONCURRENCY = "plan_steps", "fanout_items", "turn_concurrency"
LIMIT_PROCESS_CONCURRENCY, LIMIT_PLAN_SECONDS = "process_concurrency", "plan_seconds"
LIMIT_STEP_SECONDS = "step_seconds"
LIMIT_SETTINGS = {
    LIMIT_STEPS: "GOAL_PLAN_MAX_STEPS",
    LIMIT_FANOUT: "GOAL_FANOUT_MAX_ITEMS",
    LIMIT_TURN_CONCURRENCY: "GOAL_PLAN_MAX_CONCURRENCY",
    LIMIT_PROCESS_CONCURRENCY: "GOAL_PROCESS_MAX_CONCURRENCY",
    LIMIT_PLAN_SECONDS: "GOAL_PLAN_TIMEOUT_SECONDS",
    LIMIT_STEP_SECONDS: "the MCP server's timeout",
}


class PlanError(ValueError):
    """A plan that cannot run: a cycle, a reference to no earlier step, an unknown or disabled capability."""


@dataclass(frozen=True)
class PlanLimits:
    """What a plan may ask for, whatever its manifests say: steps, items one list fans out into, steps at once."""

    max_steps: int = 40
    max_fanout: int = 10
    max_concurrency: int = 8


def plan_limits() -> PlanLimits:
    """The limits the settings set (``GOAL_PLAN_MAX_STEPS``, ``GOAL_FANOUT_MAX_ITEMS``, ``…_MAX_CONCURRENCY``)."""
    return PlanLimits(
        max_steps=max(1, settings.GOAL_PLAN_MAX_STEPS),
        max_fanout=max(1, settings.GOAL_FANOUT_MAX_ITEMS),
        max_concurrency=max(1, settings.GOAL_PLAN_MAX_CONCURRENCY),
    )


def limit_hit(limit: str, value: float, asked: float, ran: float, **more: Any) -> dict[str, Any]:
    """A plan's limit that bit (:func:`common.sizes.limit_hit`, with its setting): asked and ran count steps,
    items, steps at once or seconds."""
    return sizes.limit_hit(limit, LIMIT_SETTINGS[limit], value, asked, ran, **more)


@dataclass(frozen=True)
class GoalSpec:
    domain: str
    name: str
    entities_schema: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    capabilities: Sequence[str] = ()  # a goal served by one capability whatever its entities say
    description: str = ""
    examples: tuple[str, ...] = ()
    confidence_threshold: float | None = None  # None: the profile's
    enabled: bool = True
    # The description in other languages than the profile's (common.translations): what the confirmation names.
    translations: Translations = field(default_factory=dict)


@dataclass(frozen=True)
class CapabilitySpec:
    domain: str
    name: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    enabled: bool = True
    tool: str = ""  # the MCP tool that serves it ("" = the capability's name)
    description: str = ""

    @property
    def tool_name(self) -> str:
        return self.tool or self.name

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(self.metadata.get("roles") or ())


@dataclass(frozen=True)
class GoalCatalogue:
    """The goals and capabilities a goal-mode profile serves, compiled into the routing snapshot."""

    goals: Mapping[tuple[str, str], GoalSpec] = field(default_factory=dict)  # (domain, goal name) → goal
    capabilities: Mapping[str, CapabilitySpec] = field(default_factory=dict)  # capability name → capability
    # The enabled goals' examples vectorised (labelled by goal_label), when the profile's examples tier is on: what
    # the offline intent adapter reads a paraphrase by. Compiled from the rest, so it takes no part in comparisons.
    examples: ExampleIndex | None = field(default=None, compare=False, repr=False)

    def goal(self, domain: str, name: str) -> GoalSpec | None:
        return self.goals.get((domain, name))

    def enabled_goals(self) -> list[GoalSpec]:
        return [goal for goal in self.goals.values() if goal.enabled]

    def labelled(self, label: str) -> GoalSpec | None:
        """The enabled goal :func:`goal_label` names ``label``, if any."""
        return next((goal for goal in self.enabled_goals() if goal_label(goal) == label), None)

    def __bool__(self) -> bool:
        return bool(self.goals)


def goal_label(goal: GoalSpec) -> str:
    """A goal's name outside its catalogue, as a goal turn's route and a routing test write it ("finance.GET_QUOTE"):
    the goals' examples tier labels its goals so, and its evidence names them so."""
    return f"{goal.domain}.{goal.name}"


def goal_capabilities(goal: GoalSpec) -> list[str]:
    """Every capability the goal may use: its own, then those its entities' ``capability_map`` names, once each."""
    names = list(goal.capabilities)
    for schema in goal.entities_schema.values():
        for named in (schema.get("capability_map") or {}).values():
            names.extend([named] if isinstance(named, str) else named)
    return list(dict.fromkeys(names))


def goal_examples(goal: GoalSpec, catalogue: GoalCatalogue) -> tuple[str, ...]:
    """The messages that exemplify ``goal``: its own ``examples``, then its enabled capabilities'
    ``intent_hints.examples``, once each (what the offline intent adapter matches and vectorises)."""
    examples = list(goal.examples)
    for name in goal_capabilities(goal):
        capability = catalogue.capabilities.get(name)
        if capability is not None and capability.enabled:
            examples.extend((capability.metadata.get("intent_hints") or {}).get("examples") or ())
    return tuple(dict.fromkeys(examples))


@dataclass(frozen=True)
class DomainOutput:
    """What one plan step produced: ``status`` success, failure or clarification."""

    status: str
    result: Any = None
    explanation: str = ""
    confidence: float = 1.0
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "result": self.result,
            "explanation": self.explanation,
            "confidence": self.confidence,
            "metadata": dict(self.metadata),
        }


@dataclass(frozen=True)
class IntentOutput:
    primary_domain: str
    goal: str
    entities: Mapping[str, Any]
    confidence: float
    original_query: str
    # How the reader came to it (``{"method": …}``, with the examples tier's evidence when it was consulted): recorded
    # with the turn for operators, never part of the step's output (``as_dict``) nor of the goal state.
    reading: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def as_dict(self) -> dict[str, Any]:
        return {
            "primary_domain": self.primary_domain,
            "goal": self.goal,
            "entities": dict(self.entities),
            "confidence": self.confidence,
            "original_query": self.original_query,
        }


@dataclass(frozen=True)
class ExecutionIntent:
    domain: str
    capability: str
    parameters: Mapping[str, Any]
    confidence: float
    original_query: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "domain": self.domain,
            "capability": self.capability,
            "parameters": dict(self.parameters),
            "confidence": self.confidence,
            "original_query": self.original_query,
        }


@dataclass(frozen=True)
class ExecutionStep:
    id: int
    domain: str
    capability: str
    params: Mapping[str, Any]
    depends_on: tuple[int, ...] = ()
    required: bool = True
    output_key: str = ""
    kind: str = ""  # "" = the capability's own call; RESOLVE = a pre-step from ``flow.pre`` (its entry in ``pre``)
    pre: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        data = {
            "id": self.id,
            "domain": self.domain,
            "capability": self.capability,
            "params": dict(self.params),
            "depends_on": list(self.depends_on),
            "required": self.required,
            "output_key": self.output_key,
        }
        if self.kind:
            data.update(kind=self.kind, pre=dict(self.pre))
        return data


@dataclass(frozen=True)
class ExecutionPlan:
    execution_mode: str
    combine_mode: str
    max_concurrency: int
    steps: tuple[ExecutionStep, ...]
    limits: tuple[Mapping[str, Any], ...] = ()  # the PlanLimits that bit while it was built (limit_hit)

    def as_dict(self) -> dict[str, Any]:
        return {
            "execution_mode": self.execution_mode,
            "combine_mode": self.combine_mode,
            "max_concurrency": self.max_concurrency,
            "steps": [step.as_dict() for step in self.steps],
        }


# -- goal → capabilities -----------------------------------------------------------------------------------------


def goal_map(goal: GoalSpec, entities: Mapping[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """The capabilities the goal's ``capability_map`` names for ``entities``, and the entities with the enum's
    chosen value filled in."""
    for name, schema in goal.entities_schema.items():
        mapping = schema.get("capability_map")
        if not mapping:
            continue
        values = list(schema.get("values") or mapping)
        value = entities.get(name)
        if value not in mapping:
            value = schema.get("default") if schema.get("default") in mapping else values[0]
        named = mapping[value]
        return ([named] if isinstance(named, str) else list(named)), {**entities, name: value}
    return list(goal.capabilities), dict(entities)


def goal_resolve(intent: IntentOutput, goal: GoalSpec) -> list[ExecutionIntent]:
    """``intent`` → one :class:`ExecutionIntent` per capability the goal's metadata names (deterministic)."""
    capabilities, parameters = goal_map(goal, intent.entities)
    if not capabilities:
        raise PlanError(f"Goal {goal.domain}.{goal.name} names no capability (capability_map or capabilities).")
    return [
        ExecutionIntent(
            domain=goal.domain,
            capability=capability,
            parameters=parameters,
            confidence=intent.confidence,
            original_query=intent.original_query,
        )
        for capability in capabilities
    ]


# -- capabilities → plan -----------------------------------------------------------------------------------------


def _path_value(path: str, scope: Mapping[str, Any]) -> Any:
    value: Any = scope
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _enabled(condition: Mapping[str, Any] | None, intent: ExecutionIntent) -> bool:
    if not condition:
        return True
    value = _path_value(str(condition.get("path", "")), {"parameters": intent.parameters})
    if "equals" in condition:
        return value == condition["equals"]
    return bool(value)


def whole_count(value: Any) -> int | None:
    """A manifest's count (``max_concurrency``) when it is a whole number of 1 or more, else ``None``."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def _fanned(intent: ExecutionIntent, capability: CapabilitySpec) -> tuple[list[dict[str, Any]], int | None]:
    """The params of each step ``intent`` becomes (one per element of an ``array_params`` list), and the bound."""
    params = {key: value for key, value in intent.parameters.items()}
    for spec in (capability.metadata.get("decomposition") or {}).get("array_params") or ():
        many = params.get(spec["param_name"])
        if isinstance(many, list) and many:
            rest = {key: value for key, value in params.items() if key != spec["param_name"]}
            single = spec.get("single_param_name", spec["param_name"])
            return [{**rest, single: element} for element in many], whole_count(spec.get("max_concurrency"))
    return [params], None


def _literal(value: Any) -> Any:
    """``value`` (what the user's entities hold) with every ``${`` written ``$${``: text, never a reference."""
    if isinstance(value, str):
        return value.replace("${", _LITERAL)
    if isinstance(value, Mapping):
        return {key: _literal(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_literal(item) for item in value]
    return value


def _followups(
    intent: ExecutionIntent, capability: CapabilitySpec, catalogue: Mapping[str, CapabilitySpec]
) -> list[tuple[CapabilitySpec, dict[str, Any]]]:
    """The follow-up capabilities ``composition`` asks for, each with its param map (values are source names)."""
    composition = capability.metadata.get("composition") or {}
    if not composition or not _enabled(composition.get("enabled_if"), intent):
        return []
    roles = set(composition.get("followup_roles") or ())
    found = [spec for spec in catalogue.values() if spec.enabled and roles.intersection(spec.roles)]
    return [(spec, dict(composition.get("param_map") or {})) for spec in sorted(found, key=lambda s: s.name)]


def _mapped_params(param_map: Mapping[str, Any], source_id: int, intent: ExecutionIntent) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for name, rule in param_map.items():
        for source in rule.get("from_parameters") or ():
            if source == EXPLANATION_PARAM:
                params[name] = f"${{{source_id}.explanation}}"
                break
            if source in intent.parameters:
                params[name] = intent.parameters[source]
                break
    return params


def pre_entries(capability: CapabilitySpec) -> list[dict[str, Any]]:
    """The capability's ``flow.pre`` entries with their defaults filled in; raises :class:`PlanError` for an
    entry of an unknown type or without its ``param`` and ``search_capability``.

    A ``resolve`` entry (``resolve_symbol`` is an alias) turns the human-friendly ``from_param``
    (default ``<param>_text``) into ``param`` through ``search_capability`` called with ``query_param`` (default
    ``query``): the search result's ``candidates`` list (default ``matches``) gives the value (the candidate's
    ``value`` field, default ``param``) and the ``label`` fields shown when several match (default ``name``). Its
    ``question`` (several match) and ``not_found`` (none) are sentences: one string, or one per language
    (:func:`routing.goals.words.in_language`).
    """
    entries = []
    for index, entry in enumerate((capability.metadata.get("flow") or {}).get("pre") or ()):
        where = f"{capability.name}: flow.pre[{index}]"
        kind = PRE_STEP_TYPES.get(str(entry.get("type", "")) if isinstance(entry, Mapping) else "")
        if kind is None:
            raise PlanError(f"{where} has an unknown type (known: {', '.join(sorted(PRE_STEP_TYPES))}).")
        if not entry.get("param") or not entry.get("search_capability"):
            raise PlanError(f"{where} needs a param and a search_capability.")
        for sentence in ("question", "not_found"):
            problem = sentence_problem(entry[sentence]) if entry.get(sentence) is not None else ""
            if problem:
                raise PlanError(f"{where}.{sentence} {problem}.")
        param = str(entry["param"])
        label = entry.get("label") or ["name"]
        entries.append(
            {
                **entry,
                "type": kind,
                "param": param,
                "from_param": str(entry.get("from_param") or f"{param}_text"),
                "search_capability": str(entry["search_capability"]),
                "query_param": str(entry.get("query_param") or "query"),
                "candidates": str(entry.get("candidates") or "matches"),
                "value": str(entry.get("value") or param),
                "label": [label] if isinstance(label, str) else [str(name) for name in label],
            }
        )
    return entries


def _with_pre_steps(
    params: dict[str, Any],
    capability: CapabilitySpec,
    catalogue: Mapping[str, CapabilitySpec],
    steps: list[ExecutionStep],
) -> tuple[dict[str, Any], tuple[int, ...]]:
    """Append to ``steps`` the pre-steps ``params`` needs; the params that read their results, and their ids.

    No pre-step for a param the params already hold or whose ``from_param`` they lack; none either when the
    ``from_param`` is a value the user chose among the candidates of an earlier search (:data:`CHOSEN_PARAM`): it
    is the param's value.
    """
    ids: list[int] = []
    recorded = params.get(CHOSEN_PARAM)
    chosen: Mapping[str, Any] = recorded if isinstance(recorded, Mapping) else {}
    for entry in pre_entries(capability):
        text = params.get(entry["from_param"])
        if params.get(entry["param"]) not in (None, "") or text in (None, ""):
            continue
        if text in (chosen.get(entry["param"]) or ()):
            params = {key: value for key, value in params.items() if key != entry["from_param"]}
            params[entry["param"]] = text
            continue
        search = catalogue.get(entry["search_capability"])
        step_id = len(steps) + 1
        steps.append(
            ExecutionStep(
                id=step_id,
                domain=search.domain if search is not None else capability.domain,
                capability=entry["search_capability"],
                params={entry["query_param"]: text},
                output_key=f"{entry['search_capability']}_{step_id}",
                kind=entry["type"],
                pre=entry,
            )
        )
        params = {key: value for key, value in params.items() if key != entry["from_param"]}
        params[entry["param"]] = f"${{{step_id}.result.resolved}}"
        ids.append(step_id)
    return params, tuple(ids)


def _steps(
    intents: Sequence[ExecutionIntent],
    fanned: Sequence[list[dict[str, Any]]],
    catalogue: Mapping[str, CapabilitySpec],
) -> list[ExecutionStep]:
    """The steps of ``intents`` fanned out into ``fanned`` params each, numbered from 1: each step after its
    pre-steps, then every follow-up."""
    steps: list[ExecutionStep] = []
    followups: list[ExecutionStep] = []
    for intent, params_list in zip(intents, fanned, strict=True):
        capability = catalogue[intent.capability]
        primary_ids = []
        for fanned_params in params_list:
            first = not any(not step.kind for step in steps)
            params, pre_ids = _with_pre_steps(fanned_params, capability, catalogue, steps)
            params = {key: value for key, value in params.items() if key != CHOSEN_PARAM}
            step = ExecutionStep(
                id=len(steps) + 1,
                domain=intent.domain,
                capability=intent.capability,
                params=params,
                depends_on=pre_ids,
                output_key="primary" if first and len(params_list) == 1 else f"{intent.capability}_{len(steps) + 1}",
            )
            steps.append(step)
            primary_ids.append(step.id)
        for spec, param_map in _followups(intent, capability, catalogue):
            for source_id in primary_ids:
                followups.append(
                    ExecutionStep(
                        id=0,  # numbered below, after every primary step
                        domain=spec.domain,
                        capability=spec.name,
                        params=_mapped_params(param_map, source_id, intent),
                        depends_on=(source_id,),
                        required=False,
                        output_key=f"{spec.name}_{source_id}",
                    )
                )
    for followup in followups:
        steps.append(replace(followup, id=len(steps) + 1))
    return steps


def _prefix(steps: list[ExecutionStep], count: int) -> list[ExecutionStep]:
    """The first ``count`` steps, less the pre-steps at their end that no step kept needs (every step depends on
    earlier ones only, so a prefix keeps what its steps need)."""
    kept = steps[:count]
    while kept and kept[-1].kind and not any(kept[-1].id in step.depends_on for step in kept):
        kept.pop()
    return kept


def plan_build(
    intents: Sequence[ExecutionIntent],
    catalogue: Mapping[str, CapabilitySpec],
    *,
    max_concurrency: int | None = None,
    limits: PlanLimits | None = None,
) -> ExecutionPlan:
    """The plan for ``intents``, from the capabilities' metadata alone, within ``limits`` (default
    :class:`PlanLimits`'); checked by :func:`plan_check`.

    A list that fans out into more than ``max_fanout`` items plans its first ``max_fanout``; a plan over
    ``max_steps`` plans fewer of the fanned-out items (the list with the most first, from its end), and, when
    there are none left to drop, its first ``max_steps`` steps (:class:`PlanError` when they would call no
    capability but searches); ``max_concurrency`` bounds the manifests'. Each limit that bites is on the plan's
    ``limits``.
    """
    limits = limits or PlanLimits()
    intents = [replace(intent, parameters=_literal(intent.parameters)) for intent in intents]
    for intent in intents:
        if catalogue.get(intent.capability) is None:
            raise PlanError(f"Unknown capability {intent.capability!r}.")
    fanned_bounds = [_fanned(intent, catalogue[intent.capability]) for intent in intents]
    fanned = [params for params, _ in fanned_bounds]
    hits: list[dict[str, Any]] = []
    items = max(len(params) for params in fanned) if fanned else 0
    if items > limits.max_fanout:
        hits.append(limit_hit(LIMIT_FANOUT, limits.max_fanout, items, limits.max_fanout))
        fanned = [params[: limits.max_fanout] for params in fanned]
    steps = _steps(intents, fanned, catalogue)
    asked = len(steps)
    while len(steps) > limits.max_steps and any(len(params) > 1 for params in fanned):
        longest = max(range(len(fanned)), key=lambda index: (len(fanned[index]), index))
        fanned[longest] = fanned[longest][:-1]
        steps = _steps(intents, fanned, catalogue)
    if len(steps) > limits.max_steps:
        steps = _prefix(steps, limits.max_steps)
        if not any(not step.kind for step in steps):
            raise PlanError(
                f"The plan needs more steps than {LIMIT_SETTINGS[LIMIT_STEPS]} ({limits.max_steps}) for one call."
            )
    if len(steps) < asked:
        hits.append(limit_hit(LIMIT_STEPS, limits.max_steps, asked, len(steps)))
    bounds = [bound for _, bound in fanned_bounds if bound]
    concurrency = max_concurrency or min(bounds, default=DEFAULT_MAX_CONCURRENCY)
    if concurrency > limits.max_concurrency:
        hits.append(limit_hit(LIMIT_TURN_CONCURRENCY, limits.max_concurrency, concurrency, limits.max_concurrency))
        concurrency = limits.max_concurrency
    mode = DAG if any(step.depends_on for step in steps) else PARALLEL if len(steps) > 1 else SEQUENTIAL
    plan = ExecutionPlan(
        execution_mode=mode,
        combine_mode=LAST if sum(not step.kind for step in steps) == 1 else REPORT,
        max_concurrency=concurrency,
        steps=tuple(steps),
        limits=tuple(hits),
    )
    plan_check(plan, catalogue)
    return plan


# -- checking and references -------------------------------------------------------------------------------------


def _refs(value: Any) -> list[str]:
    if isinstance(value, str):
        return [match.group(1) for match in REF_RE.finditer(value)]
    if isinstance(value, Mapping):
        return [ref for item in value.values() for ref in _refs(item)]
    if isinstance(value, list | tuple):
        return [ref for item in value for ref in _refs(item)]
    return []


def plan_check(plan: ExecutionPlan, catalogue: Mapping[str, CapabilitySpec]) -> None:
    """Raise :class:`PlanError` for what would fail at run time: checked before any step runs."""
    by_id = {step.id: step for step in plan.steps}
    if len(by_id) != len(plan.steps):
        raise PlanError("Two steps share an id.")
    keys = {step.output_key: step.id for step in plan.steps if step.output_key}
    for step in plan.steps:
        capability = catalogue.get(step.capability)
        if capability is None:
            raise PlanError(f"Step {step.id}: unknown capability {step.capability!r}.")
        if not capability.enabled:
            raise PlanError(f"Step {step.id}: capability {step.capability!r} is disabled.")
        for dependency in step.depends_on:
            if dependency not in by_id:
                raise PlanError(f"Step {step.id} depends on step {dependency}, which is not in the plan.")
        for ref in _refs(step.params):
            target = int(ref) if ref.isdigit() else keys.get(ref)
            if target is None or target not in by_id:
                raise PlanError(f"Step {step.id} refers to ${{{ref}…}}, which no step of the plan produces.")
            if target not in _ancestors(step.id, by_id):
                raise PlanError(f"Step {step.id} refers to step {target} without depending on it.")
    _acyclic(by_id)


def _ancestors(step_id: int, by_id: Mapping[int, ExecutionStep]) -> set[int]:
    seen: set[int] = set()
    stack = list(by_id[step_id].depends_on)
    while stack:
        current = stack.pop()
        if current in seen or current not in by_id:
            continue
        seen.add(current)
        stack.extend(by_id[current].depends_on)
    return seen


def _acyclic(by_id: Mapping[int, ExecutionStep]) -> None:
    state: dict[int, int] = {}  # 1: on the path being walked, 2: done
    for start in by_id:
        stack: list[tuple[int, int]] = [(start, 0)]
        while stack:
            node, index = stack.pop()
            if index == 0:
                if state.get(node) == 2:
                    continue
                if state.get(node) == 1:
                    raise PlanError(f"The plan's steps depend on each other in a cycle (through step {node}).")
                state[node] = 1
            dependencies = by_id[node].depends_on
            if index < len(dependencies):
                stack.append((node, index + 1))
                child = dependencies[index]
                if state.get(child) == 1:
                    raise PlanError(f"The plan's steps depend on each other in a cycle (through step {child}).")
                if state.get(child) != 2 and child in by_id:
                    stack.append((child, 0))
            else:
                state[node] = 2


def refs_resolve(params: Any, outputs: Mapping[str, Mapping[str, Any]]) -> Any:
    """``params`` with each ``${<step id or output_key>.<path>}`` replaced from ``outputs`` (keyed both ways), and
    each ``$${`` (a ``${`` the user wrote) written back as ``${``, in one pass: what is put in is never read again.

    A whole-string reference keeps the referenced value's type; one inside a longer string is written in as text.
    """
    if isinstance(params, Mapping):
        return {key: refs_resolve(value, outputs) for key, value in params.items()}
    if isinstance(params, list):
        return [refs_resolve(value, outputs) for value in params]
    if not isinstance(params, str):
        return params
    whole = REF_RE.fullmatch(params)
    if whole:
        return _path_value(whole.group(2), outputs.get(whole.group(1)) or {})

    def put(match: re.Match[str]) -> str:
        if match.group(0) == _LITERAL:
            return "${"
        return str(_path_value(match.group(2), outputs.get(match.group(1)) or {}) or "")

    return _REF_OR_LITERAL.sub(put, params)


# -- choosing among candidates -----------------------------------------------------------------------------------

_ORDINALS = {
    **dict.fromkeys(("primeira", "primeiro", "primera", "primero", "first", "1st"), 1),
    **dict.fromkeys(("segunda", "segundo", "second", "2nd"), 2),
    **dict.fromkeys(("terceira", "terceiro", "tercera", "tercero", "third", "3rd"), 3),
    **dict.fromkeys(("quarta", "quarto", "cuarta", "cuarto", "fourth", "4th"), 4),
    **dict.fromkeys(("quinta", "quinto", "fifth", "5th"), 5),
}
_LAST_WORDS = frozenset({"ultima", "ultimo", "last"})
_NUMBERED = re.compile(r"(\d{1,2})(?:a|o|st|nd|rd|th)?")  # "2", "2a" (2ª), "2o" (2º), "2nd", once folded
# Words that say nothing about which candidate: never a label word, even where a label holds them.
_FILLER = frozenset({"a", "o", "as", "os", "de", "da", "do", "das", "dos", "em", "na", "the", "of", "in", "la", "el"})


def candidate_choose(
    text: str, candidates: Sequence[Mapping[str, Any]], label_fields: Sequence[str], value_field: str
) -> int | None:
    """The index of the candidate the user's ``text`` picks, or ``None`` when it picks none or several.

    A reply picks by ordinal ("a segunda", "2", "the second", "la segunda", "primeira", "última"), by the
    candidate's value ("NDA-FI.HE", case and punctuation ignored) or by a word of the ``label_fields`` that only
    one candidate has ("Helsinki"); words that all the picked-from candidates share ("Nordea") pick nothing.
    """
    words = normalize(text).split()
    if not words or not candidates:
        return None
    picks: set[int] = set()
    haystack = f" {' '.join(words)} "
    for index, candidate in enumerate(candidates):
        value = normalize(str(candidate.get(value_field) or ""))
        if value and f" {value} " in haystack:
            picks.add(index)
    for word in words:
        numbered = _NUMBERED.fullmatch(word)
        position = int(numbered.group(1)) if numbered else _ORDINALS.get(word)
        if word in _LAST_WORDS:
            position = len(candidates)
        if position is not None and 1 <= position <= len(candidates):
            picks.add(position - 1)
    labels = [
        {word for name in label_fields for word in normalize(str(candidate.get(name) or "")).split()} - _FILLER
        for candidate in candidates
    ]
    for word in set(words):
        having = [index for index, label in enumerate(labels) if word in label]
        if len(having) == 1:
            picks.add(having[0])
    return picks.pop() if len(picks) == 1 else None
