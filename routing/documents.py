"""A profile's behaviour as one document, and the one compile from a document to its runtime ProfileSpec.

:func:`profile_documents` reads every profile's document from the models (a constant number of queries);
:func:`profile_compile` turns one document into the :class:`~routing.specs.ProfileSpec` the message path
reads, without the ORM. A document is plain JSON, the same bytes for the same configuration
(``json.dumps(document, sort_keys=True)``), and holds disabled things too, with their ``enabled`` flag: what a
version stores, what a diff compares and what a draft compiles. Its shape, field by field: docs/versions.md.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from agents.models import AgentProfile, McpTool, Specialist, SpecialistPrompt
from agents.public import (
    AS_IS,
    PROFILE_SETTINGS,
    EscalationSettings,
    KnowledgeSettings,
    ProfileSetting,
    SpecialistKnowledge,
    served_before,
)
from common.translations import translations_cleaned
from knowledge.public import document_keys, document_synonyms, knowledge_held
from routing.background import background_of
from routing.examples import OFFLINE_SCORE, ExampleIndex, examples_compile
from routing.goals.planner import GOAL_MODE, CapabilitySpec, GoalCatalogue, GoalSpec, goal_examples, goal_label
from routing.models import Capability, Goal, Intent, Keyword, StatePolicy, keyword_languages_ordered
from routing.repairs import repair_words
from routing.replies import ReplyWords
from routing.router import CompiledRouter, IntentSpec, StatePolicySpec, reliability_rows
from routing.specs import BackendSpec, LoopSafety, ProfileSpec, SpecialistSpec, ToolRights

SCHEMA = 1

# The AgentProfile fields a document holds as they are stored (the relations are written by name below).
PROFILE_FIELDS = tuple(setting.name for setting in PROFILE_SETTINGS)
# Keys documents gained after versions were published without them, with the value such a version was served as (the
# model's default then): :func:`document_complete` fills them in, so an old version compiles as it always did and a
# diff against it reports no change where the draft holds that value.
PROFILE_DEFAULTS: Mapping[str, Any] = {
    setting.name: served_before(setting)
    for setting in sorted((setting for setting in PROFILE_SETTINGS if setting.added), key=lambda setting: setting.added)
}
INTENT_DEFAULTS: Mapping[str, Any] = {
    "keyword_exclusions": {},
    "escalate_to": "",
    "keyword_languages": {},
    "keyword_exclusion_languages": {},
    "translations": {},
}
SPECIALIST_DEFAULTS: Mapping[str, Any] = {"translations": {}, "knowledge": {}, "remember_tool": False}
# A specialist's fields its document holds as the row has them.
SPECIALIST_PLAIN_FIELDS = ("display_name", "description", "enabled", "step_limit", "remember_tool")
GOAL_DEFAULTS: Mapping[str, Any] = {"translations": {}}


class DocumentError(ValueError):
    """A document this code cannot compile (another schema)."""


def profile_documents(agent_ids: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """Every profile's document (or those of ``agent_ids``), by ``agent_id``, disabled profiles included.

    Fourteen queries whatever the numbers of profiles, specialists, intents, keywords, goals, tools and documents.
    """
    profiles = AgentProfile.objects.all()
    if agent_ids is not None:
        profiles = profiles.filter(agent_id__in=list(agent_ids))
    rows = list(profiles.values("pk", "fallback_specialist__name", "coordinator__name", *PROFILE_FIELDS))
    if not rows:
        return {}

    def scoped(queryset: Any, profile_field: str) -> Any:
        # Every profile: no list of them in the query.
        return queryset if agent_ids is None else queryset.filter(**{f"{profile_field}__in": [r["pk"] for r in rows]})

    domains: dict[int, dict[int, str]] = {}  # profile pk → goal domain server pk → name
    goal_domains = scoped(AgentProfile.goal_domains.through.objects, "agentprofile_id")
    for profile_id, server_id, server_name in goal_domains.values_list(
        "agentprofile_id", "mcpserver_id", "mcpserver__name"
    ):
        domains.setdefault(profile_id, {})[server_id] = server_name

    prompts = {
        specialist_id: (version, text)
        for specialist_id, version, text in scoped(
            SpecialistPrompt.objects.filter(is_active=True), "specialist__profile_id"
        ).values_list("specialist_id", "version", "text")
    }
    allowed: dict[int, list[str]] = {}
    for specialist_id, tool in scoped(Specialist.allowed_tools.through.objects, "specialist__profile_id").values_list(
        "specialist_id", "mcptool__name"
    ):
        allowed.setdefault(specialist_id, []).append(tool)
    targets: dict[int, list[str]] = {}
    for specialist_id, target in scoped(
        Specialist.handoff_targets.through.objects, "from_specialist__profile_id"
    ).values_list("from_specialist_id", "to_specialist__name"):
        targets.setdefault(specialist_id, []).append(target)
    specialists: dict[int, dict[str, dict[str, Any]]] = {}
    for row in scoped(Specialist.objects, "profile_id").values(
        "pk", "profile_id", "name", "translations", "knowledge", *SPECIALIST_PLAIN_FIELDS
    ):
        prompt_version, prompt = prompts.get(row["pk"], (None, ""))
        specialists.setdefault(row["profile_id"], {})[row["name"]] = {
            **{name: row[name] for name in SPECIALIST_PLAIN_FIELDS},
            "translations": translations_cleaned(row["translations"]),
            "knowledge": dict(row["knowledge"] or {}),
            "prompt": prompt,
            "prompt_version": prompt_version,
            "allowed_tools": sorted(allowed.get(row["pk"], ())),
            "handoff_targets": sorted(targets.get(row["pk"], ())),
        }

    keywords: dict[int, list[str]] = {}
    exclusions: dict[int, dict[str, list[str]]] = {}
    limits: dict[int, dict[str, list[str]]] = {}
    phrase_limits: dict[int, dict[str, dict[str, list[str]]]] = {}
    for intent_id, text, phrases, languages, phrase_languages in scoped(
        Keyword.objects, "intent__profile_id"
    ).values_list("intent_id", "text", "exclusions", "languages", "exclusion_languages"):
        keywords.setdefault(intent_id, []).append(text)
        if phrases:
            exclusions.setdefault(intent_id, {})[text] = sorted(str(phrase) for phrase in phrases)
        if languages:
            limits.setdefault(intent_id, {})[text] = keyword_languages_ordered(languages)
        if limited := {
            phrase: keyword_languages_ordered(codes)
            for phrase, codes in sorted((phrase_languages or {}).items())
            if codes and phrase in (phrases or ())
        }:
            phrase_limits.setdefault(intent_id, {})[text] = limited
    intent_tools: dict[int, list[str]] = {}
    for intent_id, tool in scoped(Intent.mcp_tools.through.objects, "intent__profile_id").values_list(
        "intent_id", "mcptool__name"
    ):
        intent_tools.setdefault(intent_id, []).append(tool)
    intents: dict[int, dict[str, dict[str, Any]]] = {}
    for row in scoped(Intent.objects, "profile_id").values(
        "pk",
        "profile_id",
        "name",
        "specialist__name",
        "domain",
        "description",
        "translations",
        "priority",
        "enabled",
        "examples",
        "next_state",
        "escalate_to",
    ):
        intents.setdefault(row["profile_id"], {})[row["name"]] = {
            "specialist": row["specialist__name"],
            "domain": row["domain"],
            "description": row["description"],
            "translations": translations_cleaned(row["translations"]),
            "priority": row["priority"],
            "enabled": row["enabled"],
            "keywords": sorted(keywords.get(row["pk"], ())),
            "keyword_exclusions": dict(sorted(exclusions.get(row["pk"], {}).items())),
            "keyword_languages": dict(sorted(limits.get(row["pk"], {}).items())),
            "keyword_exclusion_languages": dict(sorted(phrase_limits.get(row["pk"], {}).items())),
            "examples": [str(example) for example in row["examples"] or ()],
            "mcp_tools": sorted(intent_tools.get(row["pk"], ())),
            "next_state": row["next_state"],
            "escalate_to": row["escalate_to"],
        }

    policies: dict[int, dict[str, dict[str, Any]]] = {}
    for profile_id, state, specialist, intent, description, enabled in scoped(
        StatePolicy.objects, "profile_id"
    ).values_list("profile_id", "state", "specialist__name", "intent__name", "description", "enabled"):
        policies.setdefault(profile_id, {})[state] = {
            "specialist": specialist,
            "intent": intent or "",
            "description": description,
            "enabled": enabled,
        }

    # Goals and capabilities by their domain's server (:func:`serves_every_domain`: who carries which).
    every_domain = any(serves_every_domain(row, domains.get(row["pk"])) for row in rows)
    served = None if every_domain else {server for named in domains.values() for server in named}
    goals, capabilities = _domains_read(served)
    every_server = sorted(set(goals) | set(capabilities))
    tools = _tools_read()
    knowledge, synonyms = knowledge_held(None if agent_ids is None else [row["pk"] for row in rows])

    documents: dict[str, dict[str, Any]] = {}
    for row in sorted(rows, key=lambda row: row["agent_id"]):
        pk = row["pk"]
        named = domains.get(pk, {})
        servers = sorted(named) or (every_server if serves_every_domain(row, named) else [])
        document_goals, document_capabilities = _served(servers, goals, capabilities)
        document_specialists = dict(sorted(specialists.get(pk, {}).items()))
        document_intents = dict(sorted(intents.get(pk, {}).items()))
        used = {
            *(tool for specialist in document_specialists.values() for tool in specialist["allowed_tools"]),
            *(tool for intent in document_intents.values() for tool in intent["mcp_tools"]),
            *(capability["tool"] for capability in document_capabilities.values() if capability["tool"]),
        }
        settings = {setting.name: _stored(setting, row[setting.name]) for setting in PROFILE_SETTINGS}
        settings.update(
            fallback_specialist=row["fallback_specialist__name"] or "",
            coordinator=row["coordinator__name"] or "",
            goal_domains=sorted(named.values()),
            examples_score=OFFLINE_SCORE,
        )
        # Deep copies: documents share no mutable part with each other (a caller may edit one as a draft).
        documents[row["agent_id"]] = copy.deepcopy(
            {
                "schema": SCHEMA,
                "profile": dict(sorted(settings.items())),
                "specialists": document_specialists,
                "intents": document_intents,
                "state_policies": dict(sorted(policies.get(pk, {}).items())),
                "goals": document_goals,
                "capabilities": document_capabilities,
                "tools": {name: tools[name] for name in sorted(used) if name in tools},
                "knowledge": knowledge.get(pk, {}),
                "knowledge_synonyms": synonyms.get(pk, {}),
            }
        )
    return documents


def _stored(setting: ProfileSetting, value: Any) -> Any:
    """A setting's value as a document holds it: a word list a list, JSON settings a mapping (never null),
    translations as the admin stores them (common.translations)."""
    if setting.kind == "words":
        return list(value or ())
    if setting.kind == "settings":
        return value or {}
    if setting.kind == "translations":
        return translations_cleaned(value)
    return value


_GoalRows = dict[int, list[tuple[str, str, dict[str, Any]]]]  # server pk → (domain, goal name, goal)
_CapabilityRows = dict[int, list[tuple[str, dict[str, Any]]]]  # server pk → (capability name, capability)


def _domains_read(served: set[int] | None) -> tuple[_GoalRows, _CapabilityRows]:
    """The goals and capabilities of the ``served`` servers (``None``: every server), by server: two queries."""
    goal_rows = Goal.objects.order_by("domain", "name")
    capability_rows = Capability.objects.order_by("name")
    if served is not None:
        goal_rows, capability_rows = goal_rows.filter(server__in=served), capability_rows.filter(server__in=served)
    goals: _GoalRows = {}
    for row in goal_rows.values(
        "server_id",
        "domain",
        "name",
        "description",
        "translations",
        "examples",
        "entities_schema",
        "capabilities",
        "confidence_threshold",
        "enabled",
    ):
        goals.setdefault(row["server_id"], []).append(
            (
                row["domain"],
                row["name"],
                {
                    "description": row["description"],
                    "translations": translations_cleaned(row["translations"]),
                    "examples": [str(example) for example in row["examples"] or ()],
                    "entities_schema": row["entities_schema"] or {},
                    "capabilities": list(row["capabilities"] or ()),
                    "confidence_threshold": row["confidence_threshold"],
                    "enabled": row["enabled"],
                },
            )
        )
    capabilities: _CapabilityRows = {}
    for capability in capability_rows.values(
        "server_id",
        "domain",
        "name",
        "tool__name",
        "tool__description",
        "description",
        "keywords",
        "examples",
        "metadata",
        "enabled",
    ):
        capabilities.setdefault(capability["server_id"], []).append(
            (
                capability["name"],
                {
                    "domain": capability["domain"],
                    "tool": capability["tool__name"] or "",
                    # Without a description of its own a capability reads its tool's.
                    "description": capability["description"] or capability["tool__description"] or "",
                    "keywords": list(capability["keywords"] or ()),
                    "examples": list(capability["examples"] or ()),
                    "metadata": capability["metadata"] or {},
                    "enabled": capability["enabled"],
                },
            )
        )
    return goals, capabilities


def _tools_read() -> dict[str, dict[str, Any]]:
    """Every MCP tool's rights in a document's shape, by name: one query."""
    return {
        name: {"server": server, "needs_permission": needs_permission, "enabled": enabled, "server_enabled": up}
        for name, server, needs_permission, enabled, up in McpTool.objects.values_list(
            "name", "server__name", "needs_permission", "enabled", "server__enabled"
        )
    }


def _served(
    servers: Iterable[int], goals: _GoalRows, capabilities: _CapabilityRows
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """The goals (by domain, then name) and capabilities (by name) of ``servers``, in a document's order."""
    document_goals: dict[str, dict[str, Any]] = {}
    document_capabilities: dict[str, Any] = {}
    for server in servers:
        for domain, name, goal in goals.get(server, ()):
            document_goals.setdefault(domain, {})[name] = goal
        document_capabilities.update(capabilities.get(server, ()))
    return (
        {domain: dict(sorted(by_name.items())) for domain, by_name in sorted(document_goals.items())},
        dict(sorted(document_capabilities.items())),
    )


def every_domain_goals() -> dict[str, Any]:
    """Every synced domain's goals, capabilities and their tools, as a document holds them: what a profile that carries
    none serves while ``ROUTING_MODE=goal`` puts every profile in goal mode (:func:`with_every_domain`). Read when the
    snapshot is built, like a profile's remote backends: no document holds it, so no version changes with it."""
    goals, capabilities = _domains_read(None)
    document_goals, document_capabilities = _served(sorted(set(goals) | set(capabilities)), goals, capabilities)
    tools = _tools_read()
    used = {capability["tool"] for capability in document_capabilities.values() if capability["tool"]}
    return {
        "goals": document_goals,
        "capabilities": document_capabilities,
        "tools": {name: tools[name] for name in sorted(used) if name in tools},
    }


def with_every_domain(document: Mapping[str, Any], every: Mapping[str, Any]) -> Mapping[str, Any]:
    """``document`` serving ``every`` domain (:func:`every_domain_goals`) when it carries no goal and names no goal
    domain; else ``document`` itself."""
    if document.get("goals") or document.get("capabilities") or document["profile"].get("goal_domains"):
        return document
    return {
        **document,
        "goals": every["goals"],
        "capabilities": every["capabilities"],
        "tools": {**every["tools"], **document["tools"]},
    }


def serves_every_domain(profile: Mapping[str, Any], goal_domains: Any) -> bool:
    """Whether a profile (its settings: ``routing_mode``) that names ``goal_domains`` carries every synced domain's
    goals: a goal-mode profile naming none. A profile naming some carries theirs; any other profile carries none, so
    that syncing a domain changes only the drafts of the profiles that serve it."""
    return not goal_domains and profile.get("routing_mode") == GOAL_MODE


def _goals_dropped(document: dict[str, Any]) -> None:
    """``document`` (a copy) without the goals a version published before :func:`serves_every_domain` carried for a
    profile that serves none: its goals, capabilities, and the tools only those capabilities used."""
    kept_tools = {
        *(tool for specialist in document.get("specialists", {}).values() for tool in specialist["allowed_tools"]),
        *(tool for intent in document.get("intents", {}).values() for tool in intent["mcp_tools"]),
    }
    capability_tools = {capability.get("tool") for capability in document.get("capabilities", {}).values()}
    document["goals"], document["capabilities"] = {}, {}
    document["tools"] = {
        name: tool
        for name, tool in document.get("tools", {}).items()
        if name in kept_tools or name not in capability_tools
    }


def _filled(rows: Any, defaults: Mapping[str, Any]) -> Any:
    """``rows`` (name → row) with ``defaults`` under each row that lacks one; ``rows`` itself when none does."""
    if not isinstance(rows, Mapping) or all(
        key in row for row in rows.values() if isinstance(row, Mapping) for key in defaults
    ):
        return rows
    return {
        name: {**copy.deepcopy(dict(defaults)), **row} if isinstance(row, Mapping) else row
        for name, row in rows.items()
    }


def document_complete(document: Mapping[str, Any]) -> dict[str, Any]:
    """``document`` with the keys added since it may have been published filled in (:data:`PROFILE_DEFAULTS`,
    :data:`INTENT_DEFAULTS`, :data:`SPECIALIST_DEFAULTS`, :data:`GOAL_DEFAULTS`): what the compile reads and what a
    diff compares. A copy where something was missing; the parts it did not fill in are shared with ``document``. A
    version published when every profile naming no goal domain carried every domain's goals is read without them where
    its profile serves none (:func:`_goals_dropped`).
    """
    completed = dict(document)
    # A version published before documents were versioned: compared as holding none, served the current ones
    # (profile_compile reads its knowledge before completing it).
    completed.setdefault("knowledge", {})
    profile = completed.get("profile")
    if isinstance(profile, Mapping) and any(key not in profile for key in PROFILE_DEFAULTS):
        completed["profile"] = {**copy.deepcopy(dict(PROFILE_DEFAULTS)), **profile}
    if (
        isinstance(profile, Mapping)
        and not profile.get("goal_domains")
        and not serves_every_domain(profile, ())
        and (completed.get("goals") or completed.get("capabilities"))
    ):
        _goals_dropped(completed)
    for kind, defaults in (("intents", INTENT_DEFAULTS), ("specialists", SPECIALIST_DEFAULTS)):
        if kind in completed:
            completed[kind] = _filled(completed[kind], defaults)
    goals = completed.get("goals")
    if isinstance(goals, Mapping):
        filled = {domain: _filled(by_name, GOAL_DEFAULTS) for domain, by_name in goals.items()}
        if any(filled[domain] is not goals[domain] for domain in goals):
            completed["goals"] = filled
    return completed


def _examples_vectoriser(profile: Mapping[str, Any]) -> str | None:
    """The vectoriser of the profile's examples tier, or ``None`` when the tier is off. A version published before the
    tier existed has no ``examples_enabled`` and keeps routing as it did: off. A version published before the offline
    score was naive Bayes (no ``examples_score``) leaves its offline tier off too: its threshold and margin were chosen
    for a score this code no longer computes, and would let most messages through; recalibrate and publish."""
    if not profile.get("examples_enabled", False):
        return None
    vectoriser = str(profile.get("examples_vectoriser", "offline"))
    if vectoriser != "embeddings" and profile.get("examples_score") != OFFLINE_SCORE:
        return None
    return vectoriser


def examples_index(
    intents: tuple[IntentSpec, ...], profile: Mapping[str, Any], state_only: set[str]
) -> ExampleIndex | None:
    """The profile's examples tier, or ``None`` when it is off (:func:`_examples_vectoriser`). Intents reached only
    through a state policy (``state_only``: a policy's intent with no keyword, such as a confirmation's "sim") are left
    out: their examples mean something only in that state, which the state policy already routes. The intents compete
    with "none of these" (:mod:`routing.background`: the shipped corpus and the profile's out-of-scope examples)."""
    vectoriser = _examples_vectoriser(profile)
    if vectoriser is None:
        return None
    examples = tuple((intent.name, intent.examples) for intent in intents if intent.name not in state_only)
    return examples_compile(examples, vectoriser, _background(profile))


def flow_examples_index(
    intents: tuple[IntentSpec, ...], profile: Mapping[str, Any], state_only: set[str]
) -> ExampleIndex | None:
    """The examples of the intents reached only through a state policy (a flow's replies: "sim", "já paguei"),
    against "none of these": what tells a flow's reply from chat inside the flow (:mod:`routing.stack`). ``None`` when
    the examples tier is off or no such intent has examples."""
    vectoriser = _examples_vectoriser(profile)
    examples = tuple(
        (intent.name, intent.examples) for intent in intents if intent.name in state_only and intent.examples
    )
    if vectoriser is None or not examples:
        return None
    return examples_compile(examples, vectoriser, _background(profile))


def _background(profile: Mapping[str, Any]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The profile's "none of these" (a version published before out-of-scope examples existed has none of its own)."""
    return background_of([str(text) for text in profile.get("out_of_scope_examples") or ()])


def goals_examples_index(catalogue: GoalCatalogue, profile: Mapping[str, Any]) -> ExampleIndex | None:
    """The examples tier of the profile's goals: each enabled goal's examples and its enabled capabilities'
    (:func:`~routing.goals.planner.goal_examples`), labelled by :func:`~routing.goals.planner.goal_label`, with the
    intents' tier's switch and vectoriser, competing with the profile's "none of these" as the intents do (a message
    that merely shares a word with a goal's examples is not read as it). ``None`` when the tier is off or no enabled
    goal has examples. Compiled whatever the routing mode: ``ROUTING_MODE=goal`` and ``/api/debug/plan`` read any
    profile's
    goals (memoised, so profiles that serve the same goals share one index)."""
    vectoriser = _examples_vectoriser(profile)
    if vectoriser is None:
        return None
    examples = tuple((goal_label(goal), goal_examples(goal, catalogue)) for goal in catalogue.enabled_goals())
    if not any(own for _, own in examples):
        return None
    return examples_compile(examples, vectoriser, _background(profile))


def profile_compile(
    document: Mapping[str, Any],
    *,
    pk: int,
    version: int | None = None,
    backends: Mapping[str, BackendSpec] | None = None,
    every_domain: Mapping[str, Any] | None = None,
) -> ProfileSpec:
    """The runtime profile of ``document`` (pure: no ORM): what the snapshot serves for the profile ``pk``.

    Only enabled specialists are compiled; an intent or state policy only when it and its specialist are enabled;
    a tool is usable when it and its server are enabled, and only usable tools reach intents; handoff targets are
    the enabled ones; the fallback is the fallback specialist when enabled, else the first enabled specialist by
    name; the coordinator only when it is an enabled specialist; a capability is enabled only with a usable tool.
    ``version`` is the released version number the document is, if any. ``backends`` (the profile's enabled remote
    backends, :func:`routing.snapshot.backends_load`: not part of the document, they are not versioned) join the
    intents as one intent-like entry each (:func:`backend_intents`), so every tier routes to them. ``every_domain``
    (:func:`every_domain_goals`, while ``ROUTING_MODE=goal``) is served by a document that carries no goal
    (:func:`with_every_domain`). Raises :class:`DocumentError` for a document of another schema.
    """
    if document.get("schema") != SCHEMA:
        raise DocumentError(f"schema: {document.get('schema')!r}, this code compiles schema {SCHEMA}")
    knowledge_documents = document_keys(document.get("knowledge"))  # None: published before, the current ones
    document = document_complete(document)
    if every_domain is not None:
        document = with_every_domain(document, every_domain)
    profile = document["profile"]
    rights = {
        name: ToolRights(needs_permission=tool["needs_permission"], enabled=tool["enabled"] and tool["server_enabled"])
        for name, tool in document["tools"].items()
    }
    usable = {name for name, right in rights.items() if right.enabled}

    specialists = {
        name: SpecialistSpec(
            name=name,
            display_name=specialist["display_name"] or name,
            description=specialist["description"],
            translations=copy.deepcopy(dict(specialist["translations"])),
            prompt=specialist["prompt"],
            prompt_version=specialist["prompt_version"],
            allowed_tools=frozenset(specialist["allowed_tools"]),
            handoff_targets=tuple(
                sorted(to for to in specialist["handoff_targets"] if document["specialists"].get(to, {}).get("enabled"))
            ),
            step_limit=specialist["step_limit"],
            knowledge=SpecialistKnowledge.from_json(specialist["knowledge"]),
            remember_tool=specialist["remember_tool"],
        )
        for name, specialist in sorted(document["specialists"].items())
        if specialist["enabled"]
    }
    intents = tuple(
        sorted(
            (
                IntentSpec(
                    name=name,
                    agent=intent["specialist"],
                    domain=intent["domain"],
                    description=intent["description"],
                    translations=copy.deepcopy(dict(intent["translations"])),
                    priority=intent["priority"],
                    keywords=tuple(sorted(intent["keywords"])),
                    keyword_exclusions=tuple(
                        (keyword, tuple(phrases))
                        for keyword, phrases in sorted(intent["keyword_exclusions"].items())
                        if keyword in intent["keywords"] and phrases
                    ),
                    keyword_languages=tuple(
                        (keyword, tuple(languages))
                        for keyword, languages in sorted(intent["keyword_languages"].items())
                        if keyword in intent["keywords"] and languages
                    ),
                    exclusion_languages=tuple(
                        (keyword, phrase, tuple(languages))
                        for keyword, limited in sorted(intent["keyword_exclusion_languages"].items())
                        if keyword in intent["keywords"]
                        for phrase, languages in sorted(limited.items())
                        if phrase in intent["keyword_exclusions"].get(keyword, ()) and languages
                    ),
                    examples=tuple(intent["examples"]),
                    mcp_tools=tuple(tool for tool in intent["mcp_tools"] if tool in usable),
                    next_state=intent["next_state"],
                    escalate_to=intent["escalate_to"],
                )
                for name, intent in document["intents"].items()
                if intent["enabled"] and intent["specialist"] in specialists
            ),
            key=lambda intent: (intent.priority, intent.name),
        )
    )
    backends = {name: backend for name, backend in (backends or {}).items() if name not in specialists}
    if backends:
        intents = tuple(sorted(intents + backend_intents(backends), key=lambda intent: (intent.priority, intent.name)))
    intent_of = {intent.name: intent for intent in intents}
    policies = []
    for state, policy in sorted(document["state_policies"].items()):
        if not policy["enabled"] or policy["specialist"] not in specialists:
            continue
        # A policy's intent (enabled, of an enabled specialist) lends it its domain, tools and next state.
        intent = intent_of.get(policy["intent"])
        policies.append(
            StatePolicySpec(
                state=state,
                agent=policy["specialist"],
                intent=intent.name if intent else "",
                domain=intent.domain if intent else "",
                mcp_tools=intent.mcp_tools if intent else (),
                next_state=intent.next_state if intent else "",
            )
        )

    # A state policy's intent with no keyword of its own is reached only in that state.
    state_only = {policy.intent for policy in policies if policy.intent and not intent_of[policy.intent].keywords}
    fallback = profile["fallback_specialist"]
    fallback_agent = fallback if fallback in specialists else min(specialists, default="")
    # The plain settings go to the spec as they are (agents.profile_settings: compiled AS_IS; a version published before
    # one existed holds the default document_complete gave it); the explicit steps below build the rest.
    plain = {setting.name: profile[setting.name] for setting in PROFILE_SETTINGS if setting.compiled == AS_IS}
    return ProfileSpec(
        pk=pk,
        version=version,
        **plain,
        fallback_agent=fallback_agent,
        # Copies and tuples: a spec shares no mutable part with its document.
        guardrails=copy.deepcopy(dict(profile["guardrails"])),
        judges=copy.deepcopy(dict(profile["judges"])),
        specialists=specialists,
        intents=intents,
        router=CompiledRouter(
            intents=intents,
            state_policies=tuple(policies),
            fallback_agent=fallback_agent,
            llm_enabled=profile["llm_router_enabled"],
            llm_threshold=profile["llm_router_threshold"],
            examples=examples_index(intents, profile, state_only),
            examples_threshold=profile.get("examples_threshold", 1.0),
            examples_margin=profile.get("examples_margin", 0.0),
            examples_state_threshold=profile["examples_state_threshold"],
            examples_reliability=reliability_rows(profile["examples_reliability"]),
            keyword_check=profile["examples_keyword_check"],
            reply_words=ReplyWords(yes=tuple(profile["confirmation_words"]), no=tuple(profile["denial_words"])),
            flow_examples=flow_examples_index(intents, profile, state_only),
        ),
        coordinator=profile["coordinator"] if profile["coordinator"] in specialists else "",
        loop_safety=LoopSafety(
            max_handoffs_per_turn=profile["max_handoffs_per_turn"],
            max_steps_per_agent=profile["max_steps_per_agent"],
            block_ping_pong=profile["block_ping_pong"],
            window=profile["loop_window"],
            max_repeats=profile["loop_max_repeats"],
        ),
        confirmation_words=tuple(profile["confirmation_words"]),
        denial_words=tuple(profile["denial_words"]),
        closing_words=tuple(profile["closing_words"]),
        repair_words=repair_words(profile),
        goals=_catalogue(document, usable),
        tool_rights=rights,
        backends=dict(backends),
        escalation=EscalationSettings.from_json(profile["escalation"]),
        knowledge=KnowledgeSettings.from_json(profile["knowledge"]),
        knowledge_documents=knowledge_documents,
        knowledge_synonyms=document_synonyms(document.get("knowledge_synonyms")),  # None: as for its documents
    )


def backend_intents(backends: Mapping[str, BackendSpec]) -> tuple[IntentSpec, ...]:
    """Each remote backend as an intent of the router: ``backend:<name>``, its agent the backend's name, with its
    keywords, examples, description and priority; no tools and no next state (the remote keeps its own). Marked
    ``remote``: no supervisor plan runs it."""
    return tuple(
        IntentSpec(
            name=backend.intent_name,
            agent=name,
            description=backend.description or backend.display_name,
            priority=backend.priority,
            keywords=backend.keywords,
            examples=backend.examples,
            remote=True,
        )
        for name, backend in sorted(backends.items())
    )


def _catalogue(document: Mapping[str, Any], usable: set[str]) -> GoalCatalogue:
    goals = {
        (domain, name): GoalSpec(
            domain=domain,
            name=name,
            entities_schema=copy.deepcopy(dict(goal["entities_schema"])),
            capabilities=tuple(goal["capabilities"]),
            description=goal["description"],
            translations=copy.deepcopy(dict(goal["translations"])),
            examples=tuple(goal["examples"]),
            confidence_threshold=goal["confidence_threshold"],
            enabled=goal["enabled"],
        )
        for domain, by_name in sorted(document["goals"].items())
        for name, goal in sorted(by_name.items())
    }
    capabilities = {}
    for name, capability in sorted(document["capabilities"].items()):
        metadata = copy.deepcopy(dict(capability["metadata"]))
        # The manifest's intent_hints, its keywords and examples kept in their own fields by the models.
        hints = dict(metadata.get("intent_hints") or {})
        hints.update(keywords=list(capability["keywords"]), examples=list(capability["examples"]))
        capabilities[name] = CapabilitySpec(
            domain=capability["domain"],
            name=name,
            metadata={**metadata, "intent_hints": hints},
            enabled=capability["enabled"] and capability["tool"] in usable,
            tool=capability["tool"],
            description=capability["description"],
        )
    catalogue = GoalCatalogue(goals=goals, capabilities=capabilities)
    return replace(catalogue, examples=goals_examples_index(catalogue, document["profile"]))
