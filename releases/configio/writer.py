"""The import's writing: a validated :class:`releases.configio.world.Plan` applied to the database, only the rows
whose values differ, each change recorded as the permission it needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

from django.db import models

from agents.models import AgentProfile, McpServer, McpTool, Specialist, SpecialistPrompt
from agents.public import expand_args_schema, prompt_version_create
from common.text import normalize
from releases.configio.fields import Patch
from releases.configio.rights import Touch, touches
from releases.configio.source import Node
from releases.configio.world import ImportReport, Plan, World
from routing.models import Capability, Goal, Intent, Keyword, StatePolicy

# A resolved relation's field → the reference of the patch that named it (for the place a change came from).
_REF_OF_FIELD = {"specialist": "agent", "server": "server", "tool": "tool", "intent": "intent"}


def _field_node(patch: Patch, name: str) -> Node:
    """The place in the files that set ``name`` (a field or a resolved relation) of ``patch``'s entity."""
    node = patch.where.get(name) or patch.refs.get(_REF_OF_FIELD.get(name, ""))
    return node if isinstance(node, Node) else patch.node


def _list_node(patch: Patch, ref: str) -> Node:
    """The place of a list ``ref`` (tools, handoff targets…): its key, from its first element's path."""
    nodes = patch.refs.get(ref) or []
    return Node(nodes[0].source, nodes[0].path[:-1], None) if nodes else patch.node


KEYWORD_REFS = frozenset({"keywords", "keyword_exclusions", "keyword_languages", "keyword_exclusion_languages"})


class Writer:
    """Applies a validated plan; touches only rows whose values differ, and records each change it makes as the
    permission it needs (:attr:`touches`, for :func:`releases.configio.rights.rights_check`)."""

    def __init__(self, world: World, plan: Plan, report: ImportReport, user) -> None:
        self.world = world
        self.plan = plan
        self.report = report
        self.user = user
        self.status: dict[tuple, str] = {}
        self.touches: list[Touch] = []

    def _touch(self, model: type[models.Model], action: str, node: Node, field: str = "") -> None:
        self.touches.extend(touches(model, action, node, field))

    def run(self) -> None:
        self._servers()
        self._tools()
        self._profiles()
        self._specialists()
        self._profile_specialists()
        self._intents()
        self._policies()
        self._capabilities()
        self._goals()

    def _upsert(self, kind: str, model, existing, create: dict[str, Any], values: dict[str, Any], patch: Patch):
        if existing is None:
            obj = model(**create, **values)
            obj.save()
            self.report.count(kind, "created")
            self._touch(model, "add", patch.node)
            for name, value in values.items():  # a field that needs more than the row's own add permission
                if value not in ("", None):
                    self.touches.extend(t for t in touches(model, "add", _field_node(patch, name), name)[1:])
            return obj, "created"
        changed = []
        for name, value in values.items():
            if model._meta.get_field(name).is_relation:
                current = getattr(existing, f"{name}_id")
                value_cmp = value.pk if value is not None else None
            else:
                current, value_cmp = getattr(existing, name), value
            if isinstance(current, str) and current.strip() == value_cmp:
                continue  # the files strip texts: one stored with whitespace around it (a server's) is unchanged
            if current != value_cmp:
                setattr(existing, name, value)
                changed.append(name)
                self._touch(model, "change", _field_node(patch, name), name)
        if changed:
            existing.save(update_fields=[*changed, "updated_at"])
            return existing, "updated"
        return existing, "unchanged"

    def _changed(self, key: tuple, changed: bool) -> None:
        """A related list (keywords, tools, targets) changed: an unchanged row counts as updated."""
        if changed and self.status[key] == "unchanged":
            self.status[key] = "updated"

    def _list_changed(self, key: tuple, changed: bool, model: type[models.Model], node: Node) -> None:
        """A list held by the row (its tools, targets, goal domains): changing it changes the row; part of a row
        the import creates."""
        if changed and self.status[key] != "created":
            self._touch(model, "change", node)
        self._changed(key, changed)

    def _count(self, kind: str, status: str) -> None:
        if status != "created":  # creations are counted as they happen
            self.report.count(kind, status)

    @staticmethod
    def _sync_m2m(manager, wanted: Sequence[models.Model]) -> bool:
        if {obj.pk for obj in manager.all()} == {obj.pk for obj in wanted}:
            return False
        manager.set(wanted)
        return True

    def _servers(self) -> None:
        for name, patch in self.plan.servers.items():
            obj, status = self._upsert("MCP server", McpServer, self.world.servers.get(name), {}, patch.values, patch)
            self.world.servers[name] = obj
            self._count("MCP server", status)

    def _tools(self) -> None:
        for name, patch in self.plan.tools.items():
            values = dict(patch.values)
            stored = self.world.tools.get(name)
            if stored is not None and values.get("args_schema") == expand_args_schema(stored.args_schema):
                del values["args_schema"]  # the export writes "no arguments" ({}) in full
            if "server" in patch.refs:
                values["server"] = self.world.servers[patch.refs["server"].value]
            obj, status = self._upsert("MCP tool", McpTool, self.world.tools.get(name), {}, values, patch)
            self.world.tools[name] = obj
            self._count("MCP tool", status)

    def _profiles(self) -> None:
        for agent_id, patch in self.plan.profiles.items():
            existing = self.world.profiles.get(agent_id)
            values = {k: v for k, v in patch.values.items() if k != "agent_id"}
            if existing is None:
                values.setdefault("name", agent_id)
            obj, status = self._upsert("profile", AgentProfile, existing, {"agent_id": agent_id}, values, patch)
            self.world.profiles[agent_id] = obj
            self.status[("profile", agent_id)] = status
            if "goal_domains" in patch.refs:
                servers = [self.world.servers[node.value] for node in patch.refs["goal_domains"]]
                changed = self._sync_m2m(obj.goal_domains, servers)
                self._list_changed(("profile", agent_id), changed, AgentProfile, _list_node(patch, "goal_domains"))

    def _specialists(self) -> None:
        for key, patch in self.plan.specialists.items():
            agent_id, name = key
            values = {k: v for k, v in patch.values.items() if k != "name"}
            create = {"profile": self.world.profiles[agent_id], "name": name}
            existing = self.world.specialists.get(key)
            obj, status = self._upsert("specialist", Specialist, existing, create, values, patch)
            self.world.specialists[key] = obj
            self.status[("specialist", key)] = status
            if "tools" in patch.refs:
                tools = [self.world.tools[node.value] for node in patch.refs["tools"]]
                changed = self._sync_m2m(obj.allowed_tools, tools)
                self._list_changed(("specialist", key), changed, Specialist, _list_node(patch, "tools"))
            if "prompt" in patch.refs:
                self._prompt(obj, patch.refs["prompt"])
        # Second pass: handoff targets may be specialists created after the one that names them.
        for key, patch in self.plan.specialists.items():
            if "handoff_targets" in patch.refs:
                targets = [self.world.specialists[(key[0], node.value)] for node in patch.refs["handoff_targets"]]
                changed = self._sync_m2m(self.world.specialists[key].handoff_targets, targets)
                self._list_changed(("specialist", key), changed, Specialist, _list_node(patch, "handoff_targets"))
        for key in self.plan.specialists:
            self._count("specialist", self.status[("specialist", key)])

    def _prompt(self, specialist: Specialist, node: Node) -> None:
        active = self.world.active_prompts.get(specialist.pk)
        if active is not None and active.text.strip() == node.value:
            self.report.count("prompt version", "unchanged")
            return
        note = f"Imported from {PurePath(node.source.name).name}"[:200]
        self.world.active_prompts[specialist.pk] = prompt_version_create(
            specialist=specialist, text=node.value, note=note, user=self.user
        )
        self.report.count("prompt version", "created")
        self._touch(SpecialistPrompt, "add", node)

    def _profile_specialists(self) -> None:
        """The profile's fallback and coordinator, once its specialists exist."""
        for agent_id, patch in self.plan.profiles.items():
            profile = self.world.profiles[agent_id]
            changed = []
            for ref, model_field in (("fallback", "fallback_specialist"), ("coordinator", "coordinator")):
                node = patch.refs.get(ref)
                if node is None:
                    continue
                target = self.world.specialists[(agent_id, node.value)] if node.value is not None else None
                if getattr(profile, f"{model_field}_id") != (target.pk if target else None):
                    setattr(profile, model_field, target)
                    changed.append(model_field)
                    if self.status[("profile", agent_id)] != "created":
                        self._touch(AgentProfile, "change", node, model_field)
            if changed:
                profile.save(update_fields=[*changed, "updated_at"])
                self._changed(("profile", agent_id), True)
            self._count("profile", self.status[("profile", agent_id)])

    def _intents(self) -> None:
        for key, patch in self.plan.intents.items():
            agent_id, name = key
            profile = self.world.profiles[agent_id]
            values = {k: v for k, v in patch.values.items() if k != "name"}
            if "agent" in patch.refs:
                values["specialist"] = self.world.specialists[(agent_id, patch.refs["agent"].value)]
            existing = self.world.intents.get(key)
            create = {"profile": profile, "name": name}
            if existing is None and "domain" not in values:
                create["domain"] = profile.domain
            obj, status = self._upsert("intent", Intent, existing, create, values, patch)
            self.world.intents[key] = obj
            self.status[("intent", key)] = status
            if KEYWORD_REFS & patch.refs.keys():
                self._changed(("intent", key), self._sync_keywords(obj, patch, status))
            if "mcp_tools" in patch.refs:
                tools = [self.world.tools[node.value] for node in patch.refs["mcp_tools"]]
                changed = self._sync_m2m(obj.mcp_tools, tools)
                self._list_changed(("intent", key), changed, Intent, _list_node(patch, "mcp_tools"))
            self._count("intent", self.status[("intent", key)])

    def _sync_keywords(self, intent: Intent, patch: Patch, status: str) -> bool:
        """Make the intent's keywords exactly the patch's (each ``(text, normalized)``), keeping rows that match, and
        their exclusions the patch's ``keyword_exclusions`` (a keyword it does not name has none); either left as
        stored when the patch does not give it. Each keyword added, removed, respelled or given other exclusions is a
        change of its own (the intent page's keyword rows)."""
        current = {} if status == "created" else {k.normalized: k for k in intent.keywords.all()}
        exclusions: dict[str, tuple[Node, list[str]]] | None = None
        if "keyword_exclusions" in patch.refs:
            exclusions = {node.value[1]: (node, node.value[2]) for node in patch.refs["keyword_exclusions"]}
        limits: dict[str, tuple[Node, list[str]]] | None = None
        if "keyword_languages" in patch.refs:
            limits = {node.value[1]: (node, node.value[2]) for node in patch.refs["keyword_languages"]}
        phrase_limits: dict[str, tuple[Node, dict[str, tuple[str, list[str]]]]] | None = None
        if "keyword_exclusion_languages" in patch.refs:
            phrase_limits = {node.value[1]: (node, node.value[2]) for node in patch.refs["keyword_exclusion_languages"]}
        changed = False
        if "keywords" in patch.refs:
            wanted: dict[str, Node | None] = {node.value[1]: node for node in patch.refs["keywords"]}
            stale = [k.pk for normalized, k in current.items() if normalized not in wanted]
            if stale:
                Keyword.objects.filter(pk__in=stale).delete()
                self._touch(Keyword, "delete", _list_node(patch, "keywords"))
                changed = True
        else:
            wanted = dict.fromkeys(current)  # the stored keywords, as they are
        for normalized, node in wanted.items():
            keyword = current.get(normalized)
            named = exclusions.get(normalized) if exclusions is not None else None
            phrases: list[str] | None = None  # None: the file leaves the stored exclusions as they are
            if exclusions is not None:
                phrases = named[1] if named is not None else []
            limited = limits.get(normalized) if limits is not None else None
            languages: list[str] | None = None  # None: the file leaves the stored languages as they are
            if limits is not None:
                languages = limited[1] if limited is not None else []
            phrase_limited = phrase_limits.get(normalized) if phrase_limits is not None else None
            kept = phrases if phrases is not None else list(keyword.exclusions or []) if keyword is not None else []
            # The exclusions' languages: the file's when it gives them, else the stored ones of the phrases kept.
            read = {} if phrase_limited is None else phrase_limited[1]
            stored = (keyword.exclusion_languages or {}) if keyword is not None and phrase_limits is None else {}
            by_phrase = {
                phrase: read[normalize(phrase)][1] if phrase_limits is not None else stored[phrase]
                for phrase in kept
                if (normalize(phrase) in read if phrase_limits is not None else phrase in stored)
            }
            if keyword is None:
                assert node is not None  # only the file's keywords are new
                Keyword.objects.create(
                    intent=intent,
                    text=node.value[0],
                    exclusions=phrases or [],
                    languages=languages or [],
                    exclusion_languages=by_phrase,
                )
                self._touch(Keyword, "add", node)
                changed = True
                continue
            fields = []
            if node is not None and keyword.text != node.value[0]:
                keyword.text = node.value[0]
                fields += ["text", "normalized"]
                self._touch(Keyword, "change", node)
            if phrases is not None and sorted(keyword.exclusions or []) != sorted(phrases):
                keyword.exclusions = phrases
                fields.append("exclusions")
                self._touch(Keyword, "change", named[0] if named else _list_node(patch, "keyword_exclusions"))
            if languages is not None and list(keyword.languages or []) != languages:
                keyword.languages = languages
                fields.append("languages")
                self._touch(Keyword, "change", limited[0] if limited else _list_node(patch, "keyword_languages"))
            if (keyword.exclusion_languages or {}) != by_phrase:
                keyword.exclusion_languages = by_phrase
                fields.append("exclusion_languages")
                where = phrase_limited[0] if phrase_limited else _list_node(patch, "keyword_exclusion_languages")
                self._touch(Keyword, "change", where)
            if fields:
                keyword.save(update_fields=fields)
                changed = True
        return changed

    def _policies(self) -> None:
        for key, patch in self.plan.policies.items():
            agent_id, state = key
            values = {k: v for k, v in patch.values.items() if k != "state"}
            if "agent" in patch.refs:
                values["specialist"] = self.world.specialists[(agent_id, patch.refs["agent"].value)]
            if "intent" in patch.refs:
                intent = patch.refs["intent"].value
                values["intent"] = self.world.intents[(agent_id, intent)] if intent is not None else None
            create = {"profile": self.world.profiles[agent_id], "state": state}
            existing = self.world.policies.get(key)
            _obj, status = self._upsert("state policy", StatePolicy, existing, create, values, patch)
            self._count("state policy", status)

    def _capabilities(self) -> None:
        for name, patch in self.plan.capabilities.items():
            existing = self.world.capabilities.get(name)
            values = _as_stored(patch, existing)
            if "tool" in patch.refs:
                tool = patch.refs["tool"].value
                values["tool"] = self.world.tools[tool] if tool is not None else None
            create = {"server": self.world.servers[patch.refs["server"].value], "name": name}
            obj, status = self._upsert("capability", Capability, existing, create, values, patch)
            self.world.capabilities[name] = obj
            self._count("capability", status)

    def _goals(self) -> None:
        for (domain, name), patch in self.plan.goals.items():
            existing = self.world.goals.get((domain, name))
            create = {"server": self.world.servers[patch.refs["server"].value], "name": name}
            obj, status = self._upsert("goal", Goal, existing, create, _as_stored(patch, existing), patch)
            self.world.goals[(domain, name)] = obj
            self._count("goal", status)


def _as_stored(patch: Patch, existing: Goal | Capability | None) -> dict[str, Any]:
    """A goal's or capability's imported values; ``synced`` is never among them (a re-sync then sees what differs
    from it as the business user's edit). A description equal to the stored one but for the whitespace around it
    keeps the stored text, so an exported manifest text imports unchanged and is not counted as edited."""
    values = {k: v for k, v in patch.values.items() if k != "name"}
    if existing is not None and "description" in values and existing.description.strip() == values["description"]:
        values["description"] = existing.description
    return values
