"""Domain manifests read into goals and capabilities (docs/goals.md), keeping what business users edited.

:func:`goals_sync` reads every ``manifest://<domain>`` resource an MCP server serves, checks each manifest
(:func:`routing.goals.manifest.manifest_read`) and upserts the domain's :class:`~routing.models.Goal` and
:class:`~routing.models.Capability` rows in one transaction per domain, by a three-way merge: a field takes the
manifest's value only while it still holds what the last sync wrote (``synced[field]``: nobody edited it
since); ``synced[field]`` always becomes the manifest's value. ``enabled`` and ``confidence_threshold`` are the
business user's alone. What a manifest no longer lists is left alone and reported; a bad manifest changes
nothing and is reported with the place (a ``flow.pre`` or ``composition`` cycle, a count or time that is not
one, among the rest); a value the platform will bound (a ``max_concurrency`` over ``GOAL_PLAN_MAX_CONCURRENCY``,
a ``timeout_seconds`` over the server's timeout) is synced as written and reported as bounded.
:func:`on_mcp_server_synced` runs it when ``agents`` synchronised a server (``routing/apps.py`` connects it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.utils import timezone

from agents.models import McpServer, McpTool
from agents.public import MANIFEST_SCHEME, Endpoint, McpUnavailable, SyncNotes, manifests_read_sync
from common.config_version import config_batch
from routing.goals.manifest import Manifest, ManifestError, manifest_bounds, manifest_read
from routing.goals.planner import plan_limits
from routing.models import Capability, Goal

NOTHING_CHANGED = "nothing changed"


class SyncConflict(ValueError):
    """A manifest that would break what is stored (a name another server owns, an edit it invalidates)."""


@dataclass(frozen=True)
class _Row:
    """What a manifest says about one goal or capability: its synced fields' values, and the tool it names."""

    name: str
    values: Mapping[str, Any]
    tool: str = ""


@dataclass
class _Tally:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    kept_edited: list[str] = field(default_factory=list)  # "TOP_MOVERS (description)"
    missing: list[str] = field(default_factory=list)  # stored, no longer in the manifest: left alone

    def summary(self, kind: str) -> str:
        return f"{kind} {len(self.created)} created, {len(self.updated)} updated, {len(self.unchanged)} unchanged"


def _strings(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ManifestError(f"{where}: must be a list of strings")
    return list(value)


def _rows(manifest: Manifest, data: Mapping[str, Any]) -> tuple[list[_Row], list[_Row]]:
    """The manifest's goals and capabilities as the models store them (hints apart from the rest of the
    metadata); raises :class:`ManifestError` for what :func:`manifest_read` does not check."""
    goals: list[_Row] = []
    for index, raw in enumerate(data.get("goals") or []):
        spec = manifest.goals[raw["goal"]]
        if any(row.name == spec.name for row in goals):
            raise ManifestError(f"goals[{index}]: goal {spec.name!r} is declared twice")
        values = {
            "description": spec.description,
            "translations": dict(spec.translations),
            "examples": _strings(raw.get("examples"), f"goals[{index}].examples"),
            "entities_schema": {name: dict(entity) for name, entity in spec.entities_schema.items()},
            "capabilities": list(spec.capabilities),
        }
        goals.append(_Row(spec.name, values))
    capabilities = []
    for index, raw in enumerate(data.get("capabilities") or []):
        capability = manifest.capabilities[raw["capability"]]
        metadata = dict(capability.metadata)
        hints = metadata.pop("intent_hints", None) or {}
        at = f"capabilities[{index}].metadata.intent_hints"
        if not isinstance(hints, Mapping):
            raise ManifestError(f"{at}: must be an object")
        rest = {key: value for key, value in hints.items() if key not in ("keywords", "examples")}
        if rest:
            metadata["intent_hints"] = rest
        description = raw.get("description") or ""
        if not isinstance(description, str):
            raise ManifestError(f"capabilities[{index}].description: must be a string")
        values = {
            "description": description,
            "keywords": _strings(hints.get("keywords"), f"{at}.keywords"),
            "examples": _strings(hints.get("examples"), f"{at}.examples"),
            "metadata": metadata,
        }
        capabilities.append(_Row(capability.name, values, tool=manifest.tools[capability.name]))
    return goals, capabilities


def _merge(obj: Goal | Capability, values: Mapping[str, Any], *, creating: bool) -> tuple[list[str], list[str]]:
    """Three-way merge of ``values`` into ``obj``: the fields it changed (``synced`` among them) and the edited
    fields it kept although the manifest says otherwise."""
    changed: list[str] = []
    kept: list[str] = []
    synced = dict(obj.synced or {})
    for name, new in values.items():
        current = getattr(obj, name)
        # A field the last sync did not write (a row made by hand) counts as edited unless it is empty.
        unedited = creating or (current == synced[name] if name in synced else not current)
        if unedited and current != new:
            setattr(obj, name, new)
            changed.append(name)
        elif not unedited and current != new:
            kept.append(name)
        synced[name] = new
    if synced != obj.synced:
        obj.synced = synced
        changed.append("synced")
    return changed, kept


def _checked(obj: Goal | Capability, where: str) -> None:
    try:
        obj.full_clean(exclude=["server", "tool"], validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        problems = "; ".join(message for messages in exc.message_dict.values() for message in messages)
        raise SyncConflict(f"{where}: {problems}") from exc


def _upsert(
    model: type[Goal] | type[Capability],
    rows: list[_Row],
    *,
    server: McpServer,
    domain: str,
    now: Any,
    tools: Mapping[str, McpTool],
    tally: _Tally,
) -> None:
    kind = model._meta.verbose_name
    existing = {obj.name: obj for obj in model.objects.select_for_update().filter(server=server, domain=domain)}
    touched: list[int] = []
    for row in rows:
        obj = existing.pop(row.name, None)
        creating = obj is None
        if obj is None:
            obj = model(server=server, domain=domain, name=row.name)
        changed, kept = _merge(obj, row.values, creating=creating)
        if isinstance(obj, Capability):
            tool = tools.get(row.tool)
            if obj.tool_id != (tool.pk if tool else None):
                obj.tool = tool
                changed.append("tool")
        if kept:
            tally.kept_edited.append(f"{kind} {row.name} ({', '.join(kept)})")
        if creating:
            _checked(obj, f"{kind} {row.name}")
            obj.synced_at = now
            obj.save()
            tally.created.append(row.name)
        elif changed:
            _checked(obj, f"{kind} {row.name}")
            obj.synced_at = now
            obj.save(update_fields=[*changed, "synced_at", "updated_at"])
            tally.updated.append(row.name)
        else:
            touched.append(obj.pk)
            tally.unchanged.append(row.name)
    # Not configuration the snapshot reads: no version bump for the time of a sync that changed nothing.
    model.objects.filter(pk__in=touched).update(synced_at=now)
    tally.missing.extend(f"{kind} {name}" for name in sorted(existing))


def _conflicts(server: McpServer, manifest: Manifest) -> None:
    other = Goal.objects.filter(domain=manifest.domain).exclude(server=server).values_list("server__name").first()
    if other is not None:
        raise SyncConflict(f"domain: {manifest.domain!r} is already the domain of the server {other[0]!r}")
    taken = dict(
        Capability.objects.filter(name__in=list(manifest.capabilities))
        .exclude(server=server, domain=manifest.domain)
        .values_list("name", "server__name")
    )
    for index, name in enumerate(manifest.capabilities):
        if name in taken:
            raise SyncConflict(f"capabilities[{index}]: {name!r} already belongs to the server {taken[name]!r}")


def _domain_sync(server: McpServer, manifest: Manifest, data: Mapping[str, Any]) -> list[str]:
    """Upsert one manifest's goals and capabilities; raises :class:`SyncConflict` (the caller's transaction
    then changes nothing)."""
    goal_rows, capability_rows = _rows(manifest, data)
    _conflicts(server, manifest)
    now = timezone.now()
    # A manifest names its server's tools as the server does (a tool the platform renamed has its remote_name).
    named = set(manifest.tools.values())
    tools = {tool.called_as: tool for tool in McpTool.objects.filter(server=server) if tool.called_as in named}
    capabilities, goals = _Tally(), _Tally()
    _upsert(
        Capability, capability_rows, server=server, domain=manifest.domain, now=now, tools=tools, tally=capabilities
    )
    _upsert(Goal, goal_rows, server=server, domain=manifest.domain, now=now, tools=tools, tally=goals)
    lines = [
        f"{server.name} manifest://{manifest.domain}: {goals.summary('goals')}; {capabilities.summary('capabilities')}"
    ]
    kept = goals.kept_edited + capabilities.kept_edited
    if kept:
        lines.append(f"  kept as edited (the manifest says otherwise): {', '.join(kept)}")
    missing = goals.missing + capabilities.missing
    if missing:
        lines.append(f"  no longer in the manifest (left alone; disable them if they should go): {', '.join(missing)}")
    toolless = [f"{row.name} → {row.tool}" for row in capability_rows if row.tool not in tools]
    if toolless:
        lines.append(f"  capabilities without that tool on the server (they cannot run): {', '.join(toolless)}")
    return lines


def goals_sync(*, server: McpServer) -> SyncNotes:
    """Read ``server``'s domain manifests into goals and capabilities (see the module's docstring).

    Never raises for what the server serves: a server that cannot be reached, a manifest that is not JSON or
    that the platform cannot serve, or one that conflicts with what is stored is an error of the returned
    :class:`~agents.signals.SyncNotes`, naming the place, and changes nothing of its domain.
    """
    notes = SyncNotes()
    try:
        served = manifests_read_sync(Endpoint(server.name, server.endpoint, server.timeout))
    except McpUnavailable as exc:
        notes.errors.append(f"{server.name}: the domain manifests could not be read: {exc}")
        return notes
    for uri, text in served:
        where = f"{server.name} {uri}"
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            notes.errors.append(
                f"{where}: not JSON ({exc.msg}, line {exc.lineno} column {exc.colno}); {NOTHING_CHANGED}"
            )
            continue
        try:
            manifest = manifest_read(data)
            if uri != f"{MANIFEST_SCHEME}{manifest.domain}":
                raise ManifestError(f"domain: {manifest.domain!r}, but served as {uri}")
            with config_batch(), transaction.atomic():
                notes.lines.extend(_domain_sync(server, manifest, data))
            bounded = manifest_bounds(manifest, limits=plan_limits(), step_seconds=server.timeout)
            notes.lines.extend(f"  bounded by the platform: {note}" for note in bounded)
        except (ManifestError, SyncConflict) as exc:
            notes.errors.append(f"{where}: {exc}; {NOTHING_CHANGED}")
    return notes


def on_mcp_server_synced(sender: type[models.Model], *, server: McpServer, **kwargs: Any) -> SyncNotes:
    """The receiver of :data:`agents.signals.mcp_server_synced`."""
    return goals_sync(server=server)
