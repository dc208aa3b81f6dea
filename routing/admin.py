"""The business users' workspace for routing: intents and keywords, state policies, keys, rollout flags,
conversations.

Writes go through the services where a rule lives there (API keys, the
keyword rule, rollout flags and their history); bulk actions save per object
inside :func:`config_batch` so the invalidation signals fire and the compiled
routing is rebuilt once.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.template.defaultfilters import truncatechars
from django.urls import path, reverse
from django.utils.formats import localize
from django.utils.html import format_html, format_html_join
from django.utils.timezone import localtime

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
    RolloutFlag,
    RolloutFlagChange,
    RolloutTenantOverride,
    RolloutUserOverride,
    RouteDecisionRecord,
    StatePolicy,
    Tenant,
    ToolCall,
)
from routing.services import (
    api_key_create,
    keywords_validate_unique,
    rollout_actor_admin,
    rollout_flag_delete,
    rollout_flag_set,
    rollout_tenant_override_set,
    rollout_user_override_set,
)

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


# -- rollout flags -----------------------------------------------------------------
# Staff only: the "Routing editors" group has no permission on these models, so they see none of it. Every
# write goes through the rollout services, which record the history.

HISTORY_SHOWN = 50


class RolloutUserOverrideInline(admin.TabularInline):
    model = RolloutUserOverride
    fields = ["user_id", "enabled", "note"]
    extra = 1
    verbose_name_plural = "user overrides (ticked: always on; unticked: always off; the kill switch still wins)"


class RolloutTenantOverrideInline(admin.TabularInline):
    model = RolloutTenantOverride
    fields = ["tenant", "enabled", "note"]
    extra = 1
    verbose_name_plural = "tenant overrides (every user of the tenant; a user override wins)"


@admin.register(RolloutFlag)
class RolloutFlagAdmin(admin.ModelAdmin):
    list_display = [
        "key",
        "percentage",
        "kill_switch",
        "stickiness",
        "user_override_count",
        "tenant_override_count",
        "updated_at",
    ]
    list_filter = ["kill_switch", "stickiness"]
    search_fields = ["key", "description", "user_overrides__user_id", "tenant_overrides__tenant__slug"]
    inlines = [RolloutUserOverrideInline, RolloutTenantOverrideInline]
    fieldsets = [
        (None, {"fields": ["key", "description"]}),
        ("Who gets it", {"fields": ["kill_switch", "percentage", "stickiness"]}),
        ("History", {"fields": ["history"]}),
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[RolloutFlag]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                user_override_total=Count("user_overrides", distinct=True),
                tenant_override_total=Count("tenant_overrides", distinct=True),
            )
        )

    def get_readonly_fields(self, request: HttpRequest, obj: RolloutFlag | None = None) -> list[str]:
        # Code asks for a flag by its key: renaming one would switch it off silently.
        return ["history"] if obj is None else ["key", "history"]

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "tenant":
            kwargs.setdefault("queryset", Tenant.objects.order_by("slug"))
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    @admin.display(description="user overrides", ordering="user_override_total")
    def user_override_count(self, obj: RolloutFlag) -> int:
        return obj.user_override_total

    @admin.display(description="tenant overrides", ordering="tenant_override_total")
    def tenant_override_count(self, obj: RolloutFlag) -> int:
        return obj.tenant_override_total

    @admin.display(description="changes, newest first")
    def history(self, obj: RolloutFlag | None) -> str:
        if obj is None or obj.pk is None:
            return "—"
        changes = list(obj.changes.select_related("changed_by")[: HISTORY_SHOWN + 1])
        if not changes:
            return "—"
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} → {}</td></tr>",
            (
                (
                    localize(localtime(change.changed_at)),
                    change.actor,
                    change.what,
                    change.old_value,
                    change.new_value,
                )
                for change in changes[:HISTORY_SHOWN]
            ),
        )
        more = ""
        if len(changes) > HISTORY_SHOWN:
            more = format_html(
                '<p><a href="{}?flag_key={}">All changes of {}</a></p>',
                reverse("admin:routing_rolloutflagchange_changelist"),
                obj.key,
                obj.key,
            )
        return format_html(
            "<table><thead><tr><th>when</th><th>who</th><th>what</th><th>old → new</th></tr></thead>"
            "<tbody>{}</tbody></table>{}",
            rows,
            more,
        )

    def save_model(self, request: HttpRequest, obj: RolloutFlag, form, change: bool) -> None:
        rollout_flag_set(
            key=obj.key,
            actor=rollout_actor_admin(user=request.user),
            user=request.user,
            description=obj.description,
            kill_switch=obj.kill_switch,
            percentage=obj.percentage,
            stickiness=obj.stickiness,
            create=not change,
        )
        # The admin goes on with ``obj`` (inlines, log entry, redirect): make it the stored flag.
        stored = RolloutFlag.objects.get(key=obj.key)
        for field in RolloutFlag._meta.concrete_fields:
            setattr(obj, field.attname, getattr(stored, field.attname))
        obj._state.adding = False
        obj._state.db = stored._state.db

    def save_formset(self, request: HttpRequest, form, formset, change: bool) -> None:
        if formset.model not in (RolloutUserOverride, RolloutTenantOverride):
            super().save_formset(request, form, formset, change)
            return
        # commit=False fills new/changed/deleted_objects for the admin's change message and writes nothing;
        # the services write and record the history.
        formset.save(commit=False)
        removals: list[str] = []
        sets: list[RolloutUserOverride | RolloutTenantOverride] = []
        for inline_form in formset.forms:
            existing = inline_form.instance.pk is not None
            if inline_form in formset.deleted_forms:
                if existing:
                    removals.append(self._override_identity(formset.model, inline_form.initial))
                continue
            if not inline_form.has_changed():
                continue
            identity_field = "user_id" if formset.model is RolloutUserOverride else "tenant"
            if existing and identity_field in inline_form.changed_data:  # the row now names someone else
                removals.append(self._override_identity(formset.model, inline_form.initial))
            sets.append(inline_form.instance)
        # Removals first: a row may take the user or tenant another row just gave up.
        for identity in removals:
            self._override_set(request, form.instance, formset.model, identity, enabled=None, note=None)
        for override in sets:
            identity = override.user_id if formset.model is RolloutUserOverride else override.tenant.slug
            self._override_set(
                request, form.instance, formset.model, identity, enabled=override.enabled, note=override.note
            )

    @staticmethod
    def _override_identity(model, initial: dict[str, Any]) -> str:
        if model is RolloutUserOverride:
            return initial["user_id"]
        return Tenant.objects.values_list("slug", flat=True).get(pk=initial["tenant"])

    @staticmethod
    def _override_set(request, flag: RolloutFlag, model, identity: str, *, enabled: bool | None, note: str | None):
        common = {
            "key": flag.key,
            "enabled": enabled,
            "note": note,
            "actor": rollout_actor_admin(user=request.user),
            "user": request.user,
        }
        if model is RolloutUserOverride:
            rollout_user_override_set(user_id=identity, **common)
        else:
            rollout_tenant_override_set(tenant_slug=identity, **common)

    def delete_model(self, request: HttpRequest, obj: RolloutFlag) -> None:
        rollout_flag_delete(key=obj.key, actor=rollout_actor_admin(user=request.user), user=request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[RolloutFlag]) -> None:
        with config_batch():
            for key in queryset.values_list("key", flat=True):
                rollout_flag_delete(key=key, actor=rollout_actor_admin(user=request.user), user=request.user)


@admin.register(RolloutFlagChange)
class RolloutFlagChangeAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["changed_at", "flag_key", "what", "old_value", "new_value", "actor", "changed_by"]
    list_filter = ["flag_key", "actor", "changed_at"]
    list_select_related = ["changed_by"]
    search_fields = ["flag_key", "what", "old_value", "new_value", "actor"]
    date_hierarchy = "changed_at"
    fields = ["changed_at", "flag", "flag_key", "what", "old_value", "new_value", "actor", "changed_by"]


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
