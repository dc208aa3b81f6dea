"""MCP servers and their tools."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypedDict

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from agents.admin.parts import EnableDisableActions
from agents.mcp import McpUnavailable
from agents.models import AgentProfile, McpServer, McpTool
from agents.schemas import ERROR_ARGS_SCHEMA_STORED, endpoint_exported, expand_args_schema, tool_args_schema_problem
from agents.services import mcp_server_sync
from common.adminkit import EndpointSecretsAdminMixin, ReadOnlyInlineMixin
from common.forms import PrettyJSONField
from common.history.admin import FieldHistoryAdminMixin

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class _ServerTotals(TypedDict):
    tool_total: int


class _ToolTotals(TypedDict):
    intent_total: int
    specialist_total: int


class McpToolInline(ReadOnlyInlineMixin, admin.TabularInline):
    model = McpTool
    fields = ["name", "remote_name", "enabled", "needs_permission", "description"]


def servers_sync_messages(
    model_admin: admin.ModelAdmin[Any], request: HttpRequest, servers: Iterable[McpServer]
) -> None:
    """Synchronise ``servers`` (:func:`agents.services.mcp_server_sync`) and say everything the reports hold."""
    for server in servers:
        try:
            report = mcp_server_sync(server=server)
        except (McpUnavailable, ValidationError) as exc:
            model_admin.message_user(request, f"{server.name}: {exc}", messages.ERROR)
            continue
        ok = report.ok and not report.refused
        model_admin.message_user(request, str(report), messages.SUCCESS if ok else messages.WARNING)
        for line in report.lines:
            model_admin.message_user(request, line, messages.INFO)
        for error in report.errors:
            model_admin.message_user(request, error, messages.ERROR)


@admin.register(McpServer)
class McpServerAdmin(EndpointSecretsAdminMixin, FieldHistoryAdminMixin, EnableDisableActions, admin.ModelAdmin):
    endpoint_fields = ["endpoint"]
    list_display = ["name", "transport", "endpoint", "enabled", "timeout", "tool_count", "updated_at"]
    list_filter = ["enabled", "transport"]
    search_fields = ["name", "endpoint", "description"]
    inlines = [McpToolInline]
    fields = ["name", "description", "transport", "endpoint", "exported_as", "timeout", "enabled"]
    readonly_fields = ["exported_as"]
    actions = [*EnableDisableActions.actions, "sync_tools"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[McpServer]:
        return super().get_queryset(request).annotate(tool_total=Count("tools"))

    @admin.display(description="exported as")
    def exported_as(self, obj: McpServer) -> str:
        """What the configuration export writes for the endpoint: the template it was imported as, or the endpoint
        masked (docs/configuration.md)."""
        return endpoint_exported(obj.endpoint, obj.endpoint_template) if obj.endpoint else "—"

    def save_model(self, request: HttpRequest, obj: McpServer, form: Any, change: bool) -> None:
        if "endpoint" in form.changed_data:
            obj.endpoint_template = ""  # an address typed here is no longer what the imported file wrote
        super().save_model(request, obj, form, change)

    @admin.action(description="Sync tools and domain manifests from the server", permissions=["change"])
    def sync_tools(self, request: HttpRequest, queryset: QuerySet[McpServer]) -> None:
        """Create or update each selected server's tools, goals and capabilities from what the server lists and
        serves; what was edited here is kept."""
        servers_sync_messages(self, request, queryset)

    @admin.display(description="tools", ordering="tool_total")
    def tool_count(self, obj: WithAnnotations[McpServer, _ServerTotals]) -> int:
        return obj.tool_total


class McpToolAdminForm(forms.ModelForm):
    args_schema = PrettyJSONField(
        required=False,
        label="Argument schema",
        help_text='A JSON Schema of an object, e.g. {"type": "object", "properties": {"msisdn": {"type": "string"}}, '
        '"required": ["msisdn"]}. The short form {"msisdn": "string"} is expanded on save.',
    )

    class Meta:
        model = McpTool
        fields = ["name", "server", "description", "args_schema", "enabled", "needs_permission"]
        help_texts = {
            "description": "What the model reads about the tool. Once edited here, a sync keeps it (the server's "
            "own description is shown below); make it equal to the server's again to let syncs update it.",
        }

    def clean_args_schema(self) -> dict[str, Any]:
        value = self.cleaned_data.get("args_schema")
        if value in (None, "", {}):
            return {}
        # Shorthand errors are raised here; JSON Schema errors by the model field's validator,
        # which the form reports on this same field.
        return expand_args_schema(value)


@admin.register(McpTool)
class McpToolAdmin(FieldHistoryAdminMixin, EnableDisableActions, admin.ModelAdmin):
    form = McpToolAdminForm
    list_display = [
        "name",
        "remote_name",
        "server",
        "enabled",
        "needs_permission",
        "read_only",
        "intent_count",
        "specialist_count",
        "updated_at",
    ]
    list_filter = ["server", "enabled", "needs_permission", "read_only"]
    list_select_related = ["server"]
    search_fields = ["name", "remote_name", "description", "server__name"]
    fields = [
        "name",
        "remote_name",
        "server",
        "description",
        "synced_description",
        "args_schema",
        "args_schema_check",
        "enabled",
        "needs_permission",
        "read_only",
    ]
    readonly_fields = ["remote_name", "synced_description", "args_schema_check", "read_only"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[McpTool]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                intent_total=Count("intents", distinct=True), specialist_total=Count("specialists", distinct=True)
            )
        )

    @admin.display(description="intents", ordering="intent_total")
    def intent_count(self, obj: WithAnnotations[McpTool, _ToolTotals]) -> int:
        return obj.intent_total

    @admin.display(description="argument schema check")
    def args_schema_check(self, obj: McpTool | None) -> str:
        """Why every call of the tool is refused, when its stored schema predates the platform's bounds (the system
        check ``agents.W005`` lists these tools)."""
        problem = tool_args_schema_problem(obj.args_schema) if obj is not None and obj.pk else None
        return "—" if problem is None else ERROR_ARGS_SCHEMA_STORED.format(tool="This tool", problem=problem)

    @admin.display(description="coordinator", ordering="coordinator__name")
    def coordinator_name(self, obj: AgentProfile) -> str:
        return obj.coordinator.name if obj.coordinator else "—"

    @admin.display(description="specialists", ordering="specialist_total")
    def specialist_count(self, obj: WithAnnotations[McpTool, _ToolTotals]) -> int:
        return obj.specialist_total
