"""The in-memory snapshot of all routing configuration, compiled once per version.

The message path reads profiles, specialists, intents, tools and servers from
:func:`current` — plain frozen data and one :class:`~routing.router.CompiledRouter`
per profile, compiled from the profile's document (:mod:`routing.documents`) — never from
the ORM. :func:`current` costs one version check
(:func:`common.config_version.config_version`, a cache read) and rebuilds the snapshot
when the version moved or this process changed routing data itself.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field, replace

from django.conf import settings
from django.db import DatabaseError, connections

from agents.models import AgentProfile, McpServer, McpTool, RemoteBackend
from agents.public import word_lists_warm
from common.config_version import config_version, local_generation
from knowledge.public import knowledge_profiles
from routing.documents import document_complete, every_domain_goals, profile_compile, profile_documents
from routing.goals.planner import GOAL_MODE
from routing.models import LiveRollout, ProfileRelease, RolloutFlag, RolloutTenantOverride, RolloutUserOverride
from routing.rollout import FlagSpec
from routing.rollout_plans import VersionRollout, history_parse, plan_fingerprint
from routing.specs import BackendSpec, ProfileSpec, ServerSpec, ToolSpec


@dataclass(frozen=True)
class Snapshot:
    version: int
    generation: int
    profiles: dict[str, ProfileSpec]  # what customers are served: each profile's released version
    tools: dict[str, ToolSpec]
    servers: dict[str, ServerSpec]
    flags: dict[str, FlagSpec] = field(default_factory=dict)  # rollout flags by key
    # What editors try: each profile's draft (the same object as the released one when nothing changed since).
    drafts: dict[str, ProfileSpec] = field(default_factory=dict)
    released: dict[str, int] = field(default_factory=dict)  # agent_id → the version number served
    # Running (or paused) rollout plans of a version, by agent_id: which conversations the candidate serves.
    rollouts: dict[str, VersionRollout] = field(default_factory=dict)
    # The profiles (by pk) holding knowledge: a profile outside it is searched for nothing (knowledge.retrieval).
    knowledge: frozenset[int] = frozenset()

    def profile(self, agent_id: str, *, draft: bool = False) -> ProfileSpec | None:
        """The profile customers get, or with ``draft`` the one its editors are changing."""
        return (self.drafts if draft else self.profiles).get(agent_id)


logger = logging.getLogger(__name__)

_lock = threading.Lock()
_current: Snapshot | None = None


def invalidate() -> None:
    """Drop this process's snapshot; the next :func:`current` rebuilds it."""
    global _current
    with _lock:
        _current = None


def current() -> Snapshot:
    """The up-to-date snapshot (sync; call through ``sync_to_async`` from async code)."""
    global _current
    version = config_version()
    generation = local_generation()
    snapshot = _current
    if snapshot is not None and snapshot.version == version and snapshot.generation == generation:
        return snapshot
    with _lock:
        snapshot = _current
        if snapshot is None or snapshot.version != version or snapshot.generation != generation:
            snapshot = build(version=version, generation=generation)
            _current = snapshot
        return snapshot


def adopt(sent: Snapshot) -> bool:
    """Serve ``sent``, a snapshot another process built, if it is of the configuration version this process reads
    now (a suite's new processes get their parent's, sent once: compiling it again costs a new process about half a
    second of CPU). Returns whether it is served; if not, :func:`current` builds one as usual. It is kept under this
    process's own writes, so a write here makes the next :func:`current` build anew."""
    global _current
    with _lock:
        if sent.version != config_version():
            return False
        _current = replace(sent, generation=local_generation())
        return True


def snapshot_warm() -> None:
    """Compile the routing now (the demo profiles' examples index with it: about half a second of CPU), not in the
    first message that asks: for a process's start, before it serves; where a profile holds knowledge, the word
    lists its searches weigh words by are read too (:func:`agents.word_frequency.word_lists_warm`: a child process,
    which the first searched message waited for, and every search of the process with it). A database that does not
    answer yet is no error here — the first message compiles it then.

    Its connections are closed and a connection pool it opened is closed too, so that a process that forks after
    (Celery's prefork pool) leaves its children no pool whose connections and threads they would share."""
    try:
        compiled = current()
        logger.info(
            "Routing compiled at start: %d profiles, configuration version %s", len(compiled.profiles), compiled.version
        )
        if compiled.knowledge:  # the relevance bar's word lists, not in the process's first searched message
            word_lists_warm()
    except DatabaseError as exc:
        logger.warning("Routing not compiled at start (%s: %s); the first message compiles it", type(exc).__name__, exc)
    finally:
        for connection in connections.all(initialized_only=True):
            connection.close()
            close_pool = getattr(connection, "close_pool", None)  # PostgreSQL's, with the pool on or off
            if close_pool is not None:
                close_pool()


def build(*, version: int, generation: int) -> Snapshot:
    """Load every piece of configuration and compile the enabled profiles: a constant number of queries, whatever
    the sizes. A profile is compiled from a document (:mod:`routing.documents`), the one path to a
    :class:`ProfileSpec`: customers get the document of its released version (:mod:`releases.versions`), editors
    its draft — read from the models. A profile never published is served its draft, but one that needs a second
    person (``AgentProfile.release_needs_approval``) is served only a version — nothing until its first publish — so
    that no draft edit reaches its customers unreviewed. Tools, servers and rollout flags are global. While
    ``ROUTING_MODE=goal`` overrides every profile's mode, a profile that carries no goal
    (:func:`routing.documents.serves_every_domain`) is compiled with every synced domain's
    (:func:`routing.documents.with_every_domain`)."""
    drafts = profile_documents()
    # Read after the drafts: a profile deleted since is left out.
    rows = list(AgentProfile.objects.values_list("agent_id", "pk", "release_needs_approval"))
    pks = {agent_id: pk for agent_id, pk, _ in rows}
    held = {agent_id for agent_id, _, needs_second_person in rows if needs_second_person}
    backends = backends_load()
    released = {
        agent_id: (number, document)
        for agent_id, number, document in ProfileRelease.objects.values_list(
            "profile__agent_id", "version__number", "version__document"
        )
    }
    # ROUTING_MODE=goal puts every profile in goal mode: one that carries no goal serves every synced domain's.
    every = every_domain_goals() if settings.ROUTING_MODE == GOAL_MODE else None
    profiles: dict[str, ProfileSpec] = {}
    draft_specs: dict[str, ProfileSpec] = {}
    for agent_id, draft in drafts.items():
        if agent_id not in pks:
            continue
        number, live = released.get(agent_id, (None, None if agent_id in held else draft))  # held: no draft served
        if live is not None and live["profile"]["enabled"]:
            profiles[agent_id] = profile_compile(
                live, pk=pks[agent_id], version=number, backends=backends.get(pks[agent_id], {}), every_domain=every
            )
        if draft["profile"]["enabled"]:
            # A version published before a key the draft holds at its default serves what the draft would.
            same = live is not None and agent_id in profiles and (live == draft or document_complete(live) == draft)
            draft_specs[agent_id] = (
                profiles[agent_id]
                if same
                else profile_compile(
                    draft, pk=pks[agent_id], backends=backends.get(pks[agent_id], {}), every_domain=every
                )
            )
    return Snapshot(
        version=version,
        generation=generation,
        profiles=profiles,
        tools=_tools(),
        servers=_servers(),
        flags=_flags(),
        drafts=draft_specs,
        released={agent_id: number for agent_id, (number, _) in released.items()},
        rollouts=_rollouts(pks, profiles, backends),
        knowledge=knowledge_profiles(),
    )


def backends_load(profile_pks: list[int] | None = None) -> dict[int, dict[str, BackendSpec]]:
    """The enabled remote backends of every profile (or of ``profile_pks``), by profile pk and name: one query."""
    rows = RemoteBackend.objects.filter(enabled=True)
    if profile_pks is not None:
        rows = rows.filter(profile_id__in=profile_pks)
    out: dict[int, dict[str, BackendSpec]] = {}
    for row in rows.order_by("name"):
        out.setdefault(row.profile_id, {})[row.name] = BackendSpec(
            name=row.name,
            display_name=row.display_name or row.name,
            description=row.description,
            base_url=row.base_url.rstrip("/"),
            api_key=row.api_key,
            remote_agent_id=row.remote_agent_id,
            keywords=tuple(sorted(row.keywords)),
            examples=tuple(row.examples),
            priority=row.priority,
            timeout=row.timeout,
            failures_to_open=row.failures_to_open,
            open_seconds=row.open_seconds,
            kind=row.kind,
        )
    return out


def _rollouts(
    pks: dict[str, int], profiles: dict[str, ProfileSpec], backends: dict[int, dict[str, BackendSpec]]
) -> dict[str, VersionRollout]:
    """The versions rolling out (:class:`~routing.models.LiveRollout`, which the release lifecycle writes), their
    candidates compiled (one query). A plan whose candidate or settings are no longer what it started as
    (``started_as``: what a second person approved) serves no conversation its candidate — every one gets the live
    version, the control — until its next evaluation aborts it, whatever wrote the change: the check is made here,
    on the rows as read."""
    out = {}
    rows = LiveRollout.objects.values(
        "plan_id",
        "profile__agent_id",
        "candidate_id",
        "candidate__number",
        "candidate__document",
        "control_number",
        "history",
        "settings",
        "started_as",
    )
    for row in rows:
        agent_id, document = row["profile__agent_id"], row["candidate__document"]
        if plan_fingerprint({"candidate_id": row["candidate_id"], **row["settings"]}) != row["started_as"]:
            continue
        if agent_id in profiles and agent_id in pks and document["profile"]["enabled"]:
            candidate = profile_compile(
                document, pk=pks[agent_id], version=row["candidate__number"], backends=backends.get(pks[agent_id], {})
            )
            out[agent_id] = VersionRollout(
                row["plan_id"], agent_id, candidate, row["control_number"], history_parse(row["history"])
            )
    return out


def _servers() -> dict[str, ServerSpec]:
    return {
        server.name: ServerSpec(
            name=server.name,
            endpoint=server.endpoint,
            transport=server.transport,
            timeout=server.timeout,
            enabled=server.enabled,
        )
        for server in McpServer.objects.all()
    }


def _tools() -> dict[str, ToolSpec]:
    """Every tool; a tool of a disabled server is disabled too."""
    return {
        tool.name: ToolSpec(
            name=tool.name,
            server=tool.server.name,
            description=tool.description,
            args_schema=tool.args_schema or {},
            needs_permission=tool.needs_permission,
            enabled=tool.enabled and tool.server.enabled,
            read_only=tool.read_only,
            remote_name=tool.remote_name,
        )
        for tool in McpTool.objects.select_related("server")
    }


def _flags() -> dict[str, FlagSpec]:
    """Rollout flags with their overrides: three queries whatever the number of flags and overrides."""
    user_overrides: dict[int, dict[str, bool]] = {}
    for flag_id, user_id, enabled in RolloutUserOverride.objects.values_list("flag_id", "user_id", "enabled"):
        user_overrides.setdefault(flag_id, {})[user_id] = enabled
    tenant_overrides: dict[int, dict[str, bool]] = {}
    for flag_id, slug, enabled in RolloutTenantOverride.objects.values_list("flag_id", "tenant__slug", "enabled"):
        tenant_overrides.setdefault(flag_id, {})[slug] = enabled
    return {
        key: FlagSpec(
            key=key,
            kill_switch=kill_switch,
            percentage=percentage,
            stickiness=stickiness,
            user_overrides=user_overrides.get(pk, {}),
            tenant_overrides=tenant_overrides.get(pk, {}),
        )
        for pk, key, kill_switch, percentage, stickiness in RolloutFlag.objects.values_list(
            "pk", "key", "kill_switch", "percentage", "stickiness"
        )
    }
