"""Writes of agent data: prompt versions, MCP tools synchronised from their servers."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max

from agents.models import McpServer, McpTool, Specialist, SpecialistPrompt


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
    server: str
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        parts = [f"{len(self.created)} created", f"{len(self.updated)} updated", f"{len(self.unchanged)} unchanged"]
        return f"{self.server}: " + ", ".join(parts)


def mcp_tools_sync(*, server: McpServer) -> ToolSyncReport:
    """Create or update ``server``'s tools from its ``tools/list`` (descriptions and argument schemas).

    Tools the server no longer lists are left alone (an admin may disable
    them). A tool of the same name on another server is refused rather than
    moved. Raises :class:`agents.mcp.McpUnavailable` when the server cannot be
    reached, and :class:`ValidationError` for a schema that is not valid JSON Schema.
    """
    from agents.mcp import Endpoint, tools_list_sync

    listed = tools_list_sync(Endpoint(server.name, server.endpoint, server.timeout))
    report = ToolSyncReport(server=server.name)
    with transaction.atomic():
        existing = {tool.name: tool for tool in McpTool.objects.filter(name__in=[t.name for t in listed])}
        for info in listed:
            tool = existing.get(info.name)
            if tool is not None and tool.server_id != server.pk:
                raise ValidationError(f"Tool {info.name!r} already belongs to the server {tool.server.name!r}.")
            if tool is None:
                tool = McpTool(
                    name=info.name, server=server, description=info.description, args_schema=info.input_schema
                )
                tool.full_clean()
                tool.save()
                report.created.append(info.name)
            elif (tool.description, tool.args_schema) != (info.description, info.input_schema):
                tool.description, tool.args_schema = info.description, info.input_schema
                tool.full_clean()
                tool.save(update_fields=["description", "args_schema", "updated_at"])
                report.updated.append(info.name)
            else:
                report.unchanged.append(info.name)
    return report
