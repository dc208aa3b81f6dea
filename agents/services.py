"""Writes of agent data: prompt versions, MCP servers synchronised (their tools, and what the layers above read)."""

from __future__ import annotations

from collections.abc import Iterator
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
    lines: list[str] = field(default_factory=list)  # the receivers' report lines (goals and capabilities)
    errors: list[str] = field(default_factory=list)  # the receivers' problems (a bad manifest, naming the place)

    def __str__(self) -> str:
        parts = [f"{len(self.created)} created", f"{len(self.updated)} updated", f"{len(self.unchanged)} unchanged"]
        summary = f"{self.server}: " + ", ".join(parts)
        if self.kept_edited:
            summary += f"; kept the edited description of {', '.join(self.kept_edited)}"
        return summary

    @property
    def ok(self) -> bool:
        return not self.errors


def mcp_tools_sync(*, server: McpServer) -> ToolSyncReport:
    """Create or update ``server``'s tools from its ``tools/list`` (descriptions, argument schemas, and whether each
    only reads: its ``readOnlyHint``, always as the server says).

    A description follows the server only while nobody edited it (it still equals ``synced_description``, what
    the server said at the last sync); ``synced_description`` always records the server's latest, and the
    argument schema always follows the server. Tools the server no longer lists are left alone (an admin may
    disable them). A tool of the same name on another server is refused rather than moved. Raises
    :class:`agents.mcp.McpUnavailable` when the server cannot be reached, and :class:`ValidationError` for a
    schema that is not valid JSON Schema, or an output schema the platform does not check results against
    (:func:`agents.schemas.validate_tool_output_schema`, naming the tool: nothing is written).
    """

    listed = tools_list_sync(Endpoint(server.name, server.endpoint, server.timeout))
    for info in listed:
        try:
            validate_tool_output_schema(info.output_schema)
        except ValidationError as exc:
            raise ValidationError(f"Tool {info.name!r}: {exc.message}") from None
    report = ToolSyncReport(server=server.name)
    with transaction.atomic():
        existing = {tool.name: tool for tool in McpTool.objects.filter(name__in=[t.name for t in listed])}
        for info in listed:
            tool = existing.get(info.name)
            if tool is not None and tool.server_id != server.pk:
                raise ValidationError(f"Tool {info.name!r} already belongs to the server {tool.server.name!r}.")
            if tool is None:
                tool = McpTool(
                    name=info.name,
                    server=server,
                    description=info.description,
                    synced_description=info.description,
                    args_schema=info.input_schema,
                    read_only=info.read_only,
                )
                tool.full_clean()
                tool.save()
                report.created.append(info.name)
                continue
            edited = tool.description != tool.synced_description
            description = tool.description if edited else info.description
            if edited and description != info.description:
                report.kept_edited.append(info.name)
            stored = (tool.description, tool.synced_description, tool.args_schema, tool.read_only)
            if stored == (description, info.description, info.input_schema, info.read_only):
                report.unchanged.append(info.name)
                continue
            tool.description, tool.synced_description, tool.args_schema, tool.read_only = (
                description,
                info.description,
                info.input_schema,
                info.read_only,
            )
            tool.full_clean()
            tool.save(update_fields=["description", "synced_description", "args_schema", "read_only", "updated_at"])
            report.updated.append(info.name)
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
