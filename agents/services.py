"""Writes of agent data: prompt versions, MCP servers synchronised (their tools, and what the layers above read)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max

from agents.mcp import Endpoint, tools_list_sync
from agents.models import McpServer, McpTool, ModelCallUsage, Specialist, SpecialistPrompt
from agents.schemas import validate_tool_output_schema
from agents.signals import SyncNotes, mcp_server_synced
from agents.usage import TurnUsage, usage_counting


@transaction.atomic
def prompt_version_create(
    *, specialist: Specialist, text: str, note: str = "", user=None, activate: bool = True
) -> SpecialistPrompt:
    """Add the next prompt version of ``specialist``; by default it becomes the active one.

    Versions are never edited in place: history is the list of versions.
    """
    Specialist.objects.select_for_update().filter(pk=specialist.pk).first()
    latest = specialist.prompts.aggregate(latest=Max("version"))["latest"] or 0
    if activate:
        specialist.prompts.filter(is_active=True).update(is_active=False)
    return SpecialistPrompt.objects.create(
        specialist=specialist,
        version=latest + 1,
        text=text,
        note=note,
        is_active=activate,
        created_by=user if getattr(user, "pk", None) else None,
    )


@transaction.atomic
def prompt_activate(*, prompt: SpecialistPrompt) -> SpecialistPrompt:
    """Make ``prompt`` the specialist's active version (a revert when it is an older one)."""
    SpecialistPrompt.objects.filter(specialist_id=prompt.specialist_id, is_active=True).exclude(pk=prompt.pk).update(
        is_active=False
    )
    if not prompt.is_active:
        prompt.is_active = True
        prompt.save(update_fields=["is_active"])
    return prompt


@dataclass
class ToolSyncReport:
    """What a sync did to one server's tools, and what the receivers of ``mcp_server_synced`` reported."""

    server: str
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    kept_edited: list[str] = field(default_factory=list)  # edited descriptions kept over the server's
    refused: list[str] = field(default_factory=list)  # the server's names of tools not imported (lines say why)
    lines: list[str] = field(default_factory=list)  # the receivers' report lines (goals and capabilities)
    errors: list[str] = field(default_factory=list)  # the receivers' problems (a bad manifest, naming the place)

    def __str__(self) -> str:
        parts = [f"{len(self.created)} created", f"{len(self.updated)} updated", f"{len(self.unchanged)} unchanged"]
        if self.refused:
            parts.append(f"{len(self.refused)} refused")
        summary = f"{self.server}: " + ", ".join(parts)
        if self.kept_edited:
            summary += f"; kept the edited description of {', '.join(self.kept_edited)}"
        return summary

    @property
    def ok(self) -> bool:
        return not self.errors


TASK_ONLY_REASON = (
    "it runs only as a background task (execution.taskSupport: required), and the platform calls tools directly, "
    "so every call would fail"
)
TOOL_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
TOOL_NAME_MAX = 64  # a function name's length for the model APIs (OpenAI's: ^[a-zA-Z0-9_-]{1,64}$)
NAMESPACE_MARK = "__"


def tool_name_for(server: str, remote: str, taken: Callable[[str], bool]) -> str:
    """The platform's name for the tool ``remote`` of ``server``: ``remote`` itself when it is a function name a model
    may call and no other tool has it; else ``<server>__<remote>``, its other characters as ``_`` (``files.read`` of
    ``docs``: ``docs__files_read``), numbered when even that is ``taken``. At most :data:`TOOL_NAME_MAX` characters
    (a longer one keeps its start and a hash of the whole)."""

    def fitted(name: str) -> str:
        if len(name) <= TOOL_NAME_MAX:
            return name
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        return f"{name[: TOOL_NAME_MAX - 9]}_{digest}"

    if not TOOL_NAME_CHARS.search(remote) and len(remote) <= TOOL_NAME_MAX and not taken(remote):
        return remote
    base = fitted(f"{server}{NAMESPACE_MARK}{TOOL_NAME_CHARS.sub('_', remote)}")
    name, number = base, 1
    while taken(name):
        number += 1
        name = fitted(f"{base}_{number}")
    return name


def mcp_tools_sync(*, server: McpServer) -> ToolSyncReport:
    """Create or update ``server``'s tools from its ``tools/list`` (descriptions, argument schemas, and whether each
    only reads: its ``readOnlyHint``, always as the server says).

    A tool is found by its name on the server (:attr:`McpTool.called_as`); a new one is named by
    :func:`tool_name_for`, so a name with a ``.`` and a name another server's tool has both arrive, each under a
    name of its own (``remote_name`` keeps the server's). A description follows the server only while nobody edited
    it (it still equals ``synced_description``, what the server said at the last sync); ``synced_description``
    always records the server's latest, and the argument schema always follows the server. Tools the server no
    longer lists are left alone (an admin may disable them). A tool that runs only as a background task
    (:attr:`agents.mcp.ToolInfo.task_only`) is refused, and disabled if it was imported before; the report's
    ``refused`` names it and its ``lines`` say why. Raises :class:`agents.mcp.McpUnavailable` when the
    server cannot be reached, and :class:`ValidationError` for a schema that is not valid JSON Schema, or an output
    schema the platform does not check results against (:func:`agents.schemas.validate_tool_output_schema`, naming
    the tool: nothing is written).
    """

    listed = tools_list_sync(Endpoint(server.name, server.endpoint, server.timeout))
    for info in listed:
        try:
            validate_tool_output_schema(info.output_schema)
        except ValidationError as exc:
            raise ValidationError(f"Tool {info.name!r}: {exc.message}") from None
    report = ToolSyncReport(server=server.name)
    with transaction.atomic():
        existing = {tool.called_as: tool for tool in McpTool.objects.select_for_update().filter(server=server)}
        chosen: set[str] = set()

        def taken(name: str) -> bool:
            return name in chosen or McpTool.objects.filter(name=name).exists()

        for info in listed:
            tool = existing.get(info.name)
            if info.task_only:
                report.refused.append(info.name)
                if tool is not None and tool.enabled:
                    tool.enabled = False
                    tool.save(update_fields=["enabled", "updated_at"])
                    report.lines.append(f"{info.name}: disabled — {TASK_ONLY_REASON}")
                else:
                    report.lines.append(f"{info.name}: not imported — {TASK_ONLY_REASON}")
                continue
            if tool is None:
                name = tool_name_for(server.name, info.name, taken)
                chosen.add(name)
                tool = McpTool(
                    name=name,
                    remote_name="" if name == info.name else info.name,
                    server=server,
                    description=info.description,
                    synced_description=info.description,
                    args_schema=info.input_schema,
                    read_only=info.read_only,
                )
                tool.full_clean()
                tool.save()
                report.created.append(name)
                continue
            edited = tool.description != tool.synced_description
            description = tool.description if edited else info.description
            if edited and description != info.description:
                report.kept_edited.append(tool.name)
            stored = (tool.description, tool.synced_description, tool.args_schema, tool.read_only)
            if stored == (description, info.description, info.input_schema, info.read_only):
                report.unchanged.append(tool.name)
                continue
            tool.description, tool.synced_description, tool.args_schema, tool.read_only = (
                description,
                info.description,
                info.input_schema,
                info.read_only,
            )
            tool.full_clean()
            tool.save(update_fields=["description", "synced_description", "args_schema", "read_only", "updated_at"])
            report.updated.append(tool.name)
    return report


def mcp_server_sync(*, server: McpServer) -> ToolSyncReport:
    """Synchronise ``server``: its tools (:func:`mcp_tools_sync`), then whatever the layers above read from it.

    Sends :data:`agents.signals.mcp_server_synced` once the tools are stored (routing reads the server's domain
    manifests into goals and capabilities); each receiver's :class:`~agents.signals.SyncNotes` lands in the
    report's ``lines`` and ``errors``. Raises what :func:`mcp_tools_sync` raises; a receiver's problems are
    reported, not raised.
    """
    report = mcp_tools_sync(server=server)
    for _receiver, notes in mcp_server_synced.send(sender=McpServer, server=server):
        if isinstance(notes, SyncNotes):
            report.lines.extend(notes.lines)
            report.errors.extend(notes.errors)
    return report


# -- model calls outside a turn ------------------------------------------------------------------------------------


def model_usage_record(
    *, usage: TurnUsage, purpose: str, profile_id: int | None = None, tenant_id: int | None = None
) -> int:
    """Store what ``usage`` counted of the model calls a piece of work outside a turn made (``purpose``, an
    :class:`agents.models.UsagePurpose`), one :class:`~agents.models.ModelCallUsage` row per kind and model; the
    number of rows (none when no model was called)."""
    rows = [
        ModelCallUsage(
            purpose=purpose,
            profile_id=profile_id,
            tenant_id=tenant_id,
            kind=kind,
            model=model,
            calls=calls,
            prompt_tokens=prompt,
            completion_tokens=completion,
        )
        for (kind, model), (calls, prompt, completion) in usage.calls.items()
    ]
    ModelCallUsage.objects.bulk_create(rows)
    return len(rows)


@contextmanager
def usage_outside_turns(
    *, purpose: str, profile_id: int | None = None, tenant_id: int | None = None
) -> Iterator[TurnUsage]:
    """Count the model calls made within the block — in coroutines it runs on an event loop of this thread or with
    ``async_to_sync`` too, which carry the context — and store them when it ends (:func:`model_usage_record`), also
    when it raises: the calls were made. For synchronous code; an async caller counts with
    :func:`agents.usage.usage_counting` and stores after."""
    usage = TurnUsage()
    try:
        with usage_counting(usage):
            yield usage
    finally:
        model_usage_record(usage=usage, purpose=purpose, profile_id=profile_id, tenant_id=tenant_id)
