"""The business users' workspace for routing: intents and keywords, state policies, keys, conversations.

Writes go through the services where a rule lives there (API keys, the
keyword rule); bulk actions save per object inside :func:`config_batch` so the
invalidation signals fire and the compiled routing is rebuilt once.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.template.defaultfilters import truncatechars
from django.urls import path
from django.utils.html import format_html

from agents.models import Specialist
from handoffs.models import Handoff
from routing import admin_views
from routing.adminkit import ListingInlineMixin, ReadOnlyAdminMixin, ReadOnlyInlineMixin
from routing.config import config_batch, config_version_bump
from routing.forms import (
    IntentAdminForm,
    IntentChangelistForm,
    KeywordAdminForm,
    KeywordInlineForm,
    KeywordInlineFormSet,
    StatePolicyAdminForm,
)
from routing.models import (
    ApiKey,
    Conversation,
    Intent,
    Keyword,
    Message,
    RouteDecisionRecord,
    StatePolicy,
    Tenant,
    ToolCall,
)
from routing.services import api_key_create, keywords_validate_unique

# -- shared pieces ---------------------------------------------------------------


class SpecialistListFilter(admin.RelatedFieldListFilter):
    """Specialists labelled ``profile/name`` without a query per choice."""

    def field_choices(self, field, request, model_admin):
        specialists = Specialist.objects.select_related("profile").order_by("profile__agent_id", "name")
        return [(specialist.pk, str(specialist)) for specialist in specialists]


def specialist_choices(db_field, formfield):
    """Select specialists with their profile in one query (their label names the profile)."""
    if formfield is not None and db_field.related_model is Specialist:
        formfield.queryset = formfield.queryset.select_related("profile")
    return formfield


def intent_label(intent: Intent) -> str:
    return f"{intent.profile.agent_id}/{intent.name}"


# -- tenants and keys ------------------------------------------------------------


class ApiKeyInline(ListingInlineMixin, admin.TabularInline):
    model = ApiKey
    fields = ["prefix", "name", "is_active", "is_debug", "can_preview", "created_at", "last_used_at"]
    verbose_name_plural = "API keys (create new ones from the API key page)"


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "is_active", "key_count", "conversation_count", "created_at"]
    list_filter = ["is_active"]
    search_fields = ["slug", "name"]
    inlines = [ApiKeyInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Tenant]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                key_total=Count("api_keys", distinct=True),
                conversation_total=Count("conversations", distinct=True),
            )
        )

    @admin.display(description="API keys", ordering="key_total")
    def key_count(self, obj: Tenant) -> int:
        return obj.key_total

    @admin.display(description="conversations", ordering="conversation_total")
    def conversation_count(self, obj: Tenant) -> int:
        return obj.conversation_total


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Keys are made only by the "add" page, which shows the secret once and stores its hash."""

    list_display = ["prefix", "name", "tenant", "is_active", "is_debug", "can_preview", "created_at", "last_used_at"]
    list_filter = ["is_active", "is_debug", "can_preview", "tenant"]
    list_select_related = ["tenant"]
    search_fields = ["prefix", "name", "tenant__slug", "tenant__name"]
    date_hierarchy = "created_at"
    actions = ["deactivate_keys"]

    def get_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[str]:
        if obj is None:
            return ["tenant", "name", "is_debug", "can_preview"]
        return [
            "tenant",
            "name",
            "prefix",
            "key_hash",
            "is_active",
            "is_debug",
            "can_preview",
            "created_at",
            "last_used_at",
        ]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[str]:
        if obj is None:
            return []
        return ["tenant", "prefix", "key_hash", "created_at", "last_used_at"]

    def save_model(self, request: HttpRequest, obj: ApiKey, form, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        key, raw = api_key_create(
            tenant_slug=obj.tenant.slug, name=obj.name, is_debug=obj.is_debug, can_preview=obj.can_preview
        )
        # The admin goes on with ``obj`` (log entry, redirect): make it the stored key.
        for field in ApiKey._meta.concrete_fields:
            setattr(obj, field.attname, getattr(key, field.attname))
        obj._state.adding = False
        obj._state.db = key._state.db
        messages.warning(
            request,
            format_html(
                "The new API key is <code style='user-select: all'>{}</code> — copy it now: "
                "only its hash is stored and it will not be shown again.",
                raw,
            ),
        )

    @admin.action(description="Deactivate selected API keys", permissions=["change"])
    def deactivate_keys(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        updated = queryset.filter(is_active=True).update(is_active=False)
        config_version_bump()  # QuerySet.update bypasses the signals; cached keys must go at once
        self.message_user(request, f"Deactivated {updated} API key(s).", messages.SUCCESS)


# -- routing content -------------------------------------------------------------


class KeywordInline(admin.TabularInline):
    model = Keyword
    form = KeywordInlineForm
    formset = KeywordInlineFormSet
    fields = ["text"]
    extra = 5
    verbose_name_plural = "keywords (matched case- and accent-insensitively, on word boundaries)"


@admin.register(Intent)
class IntentAdmin(admin.ModelAdmin):
    form = IntentAdminForm
    inlines = [KeywordInline]
    list_display = [
        "name",
        "profile",
        "specialist_name",
        "domain",
        "priority",
        "enabled",
        "keyword_count",
        "tool_names",
        "next_state",
        "updated_at",
    ]
    list_display_links = ["name"]
    list_editable = ["priority", "enabled"]
    list_filter = ["profile", ("specialist", SpecialistListFilter), "domain", "enabled"]
    list_select_related = ["profile", "specialist"]
    search_fields = ["name", "description", "keywords__text", "keywords__normalized"]
    filter_horizontal = ["mcp_tools"]
    actions = ["enable_intents", "disable_intents"]
    save_on_top = True
    fieldsets = [
        (None, {"fields": ["profile", "name", "specialist", "domain", "priority", "enabled"]}),
        ("What it means", {"fields": ["description", "examples"]}),
        ("When it wins", {"fields": ["mcp_tools", "next_state"]}),
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Intent]:
        return (
            super()
            .get_queryset(request)
            .annotate(keyword_total=Count("keywords", distinct=True))
            .prefetch_related("mcp_tools")
        )

    def get_changelist_form(self, request: HttpRequest, **kwargs: Any):
        kwargs.setdefault("form", IntentChangelistForm)
        return super().get_changelist_form(request, **kwargs)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        return specialist_choices(db_field, super().formfield_for_foreignkey(db_field, request, **kwargs))

    def get_urls(self):
        urls = [
            path(
                "preview/",
                self.admin_site.admin_view(admin_views.RoutePreviewView.as_view(model_admin=self)),
                name="routing_intent_preview",
            ),
        ]
        return urls + super().get_urls()

    @admin.display(description="specialist", ordering="specialist__name")
    def specialist_name(self, obj: Intent) -> str:
        return obj.specialist.name

    @admin.display(description="keywords", ordering="keyword_total")
    def keyword_count(self, obj: Intent) -> int:
        return obj.keyword_total

    @admin.display(description="MCP tools")
    def tool_names(self, obj: Intent) -> str:
        return ", ".join(tool.name for tool in obj.mcp_tools.all()) or "—"

    @admin.action(description="Enable selected intents", permissions=["change"])
    def enable_intents(self, request: HttpRequest, queryset: QuerySet[Intent]) -> None:
        enabled = 0
        with config_batch():
            for intent in queryset.filter(enabled=False).order_by("priority", "name"):
                intent.enabled = True
                try:
                    keywords_validate_unique(intent=intent, texts=list(intent.keywords.values_list("text", flat=True)))
                except ValidationError as exc:
                    self.message_user(request, f"Not enabled: {intent.name}. {' '.join(exc.messages)}", messages.ERROR)
                    continue
                intent.save(update_fields=["enabled", "updated_at"])
                enabled += 1
        if enabled:
            self.message_user(request, f"Enabled {enabled} intent(s).", messages.SUCCESS)

    @admin.action(description="Disable selected intents", permissions=["change"])
    def disable_intents(self, request: HttpRequest, queryset: QuerySet[Intent]) -> None:
        disabled = 0
        with config_batch():
            for intent in queryset.filter(enabled=True):
                intent.enabled = False
                intent.save(update_fields=["enabled", "updated_at"])
                disabled += 1
        self.message_user(request, f"Disabled {disabled} intent(s).", messages.SUCCESS)


@admin.register(Keyword)
class KeywordAdmin(admin.ModelAdmin):
    form = KeywordAdminForm
    list_display = ["text", "intent", "profile", "intent_enabled", "normalized"]
    list_filter = ["intent__profile", "intent__enabled"]
    list_select_related = ["intent__profile"]
    search_fields = ["text", "normalized", "intent__name"]
    autocomplete_fields = ["intent"]

    @admin.display(description="profile", ordering="intent__profile__agent_id")
    def profile(self, obj: Keyword) -> str:
        return obj.intent.profile.agent_id

    @admin.display(description="intent enabled", boolean=True, ordering="intent__enabled")
    def intent_enabled(self, obj: Keyword) -> bool:
        return obj.intent.enabled


@admin.register(StatePolicy)
class StatePolicyAdmin(admin.ModelAdmin):
    form = StatePolicyAdminForm
    list_display = ["state", "profile", "specialist_name", "intent", "enabled", "updated_at"]
    list_editable = ["enabled"]
    list_filter = ["profile", ("specialist", SpecialistListFilter), "enabled"]
    list_select_related = ["profile", "specialist", "intent"]
    search_fields = ["state", "description", "specialist__name", "intent__name"]
    fields = ["profile", "state", "specialist", "intent", "description", "enabled"]

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        formfield = super().formfield_for_foreignkey(db_field, request, **kwargs)
        if db_field.name == "intent" and formfield is not None:
            formfield.queryset = formfield.queryset.select_related("profile")
            formfield.label_from_instance = intent_label
            return formfield
        return specialist_choices(db_field, formfield)

    @admin.display(description="specialist", ordering="specialist__name")
    def specialist_name(self, obj: StatePolicy) -> str:
        return obj.specialist.name


# -- conversations (read-only) -----------------------------------------------------


class MessageInline(ReadOnlyInlineMixin, admin.TabularInline):
    model = Message
    fields = ["created_at", "role", "agent", "content", "step"]


class RouteDecisionInline(ReadOnlyInlineMixin, admin.TabularInline):
    model = RouteDecisionRecord
    fields = ["created_at", "method", "agent", "intent", "confidence", "handoff", "reason"]
    verbose_name_plural = "route decisions"


class ToolCallInline(ReadOnlyInlineMixin, admin.TabularInline):
    model = ToolCall
    fields = ["created_at", "agent", "tool", "status", "latency_ms", "error"]


class HandoffInline(ReadOnlyInlineMixin, admin.TabularInline):
    model = Handoff
    fields = ["created_at", "from_agent", "to_agent", "kind", "status", "reason"]


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "conversation_key",
        "tenant",
        "profile",
        "user_id",
        "channel",
        "state",
        "active_specialist",
        "message_count",
        "updated_at",
    ]
    list_filter = ["tenant", "profile", "channel", "updated_at"]
    list_select_related = ["tenant", "profile"]
    search_fields = ["conversation_key", "session_id", "user_id", "state", "active_specialist"]
    date_hierarchy = "created_at"
    inlines = [MessageInline, RouteDecisionInline, ToolCallInline, HandoffInline]
    fieldsets = [
        (None, {"fields": ["conversation_key", "tenant", "profile", "session_id", "user_id", "channel"]}),
        ("State", {"fields": ["state", "active_specialist", "pending_result", "granted_permissions"]}),
        ("Activity", {"fields": ["message_count", "created_at", "updated_at"]}),
    ]


@admin.register(Message)
class MessageAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["created_at", "conversation", "role", "agent", "excerpt"]
    list_filter = ["role", "created_at"]
    list_select_related = ["conversation"]
    search_fields = ["content", "agent", "conversation__conversation_key"]
    date_hierarchy = "created_at"

    @admin.display(description="content")
    def excerpt(self, obj: Message) -> str:
        return truncatechars(obj.content, 100)


@admin.register(RouteDecisionRecord)
class RouteDecisionRecordAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["created_at", "conversation", "mode", "method", "agent", "intent", "confidence", "handoff"]
    list_filter = ["method", "mode", "handoff", "agent", "created_at"]
    list_select_related = ["conversation"]
    search_fields = ["intent", "agent", "reason", "conversation__conversation_key"]
    date_hierarchy = "created_at"


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["created_at", "tool", "server", "status", "agent", "latency_ms", "conversation"]
    list_filter = ["status", "tool", "server", "created_at"]
    list_select_related = ["conversation"]
    search_fields = ["tool", "agent", "error", "conversation__conversation_key"]
    date_hierarchy = "created_at"
