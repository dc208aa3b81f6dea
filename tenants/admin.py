"""Tenants, their API keys and the staff rights over them in the admin.

A key is made only by the "add" page, which answers with a page showing the secret once: never in a flash message,
which would carry it to the browser and back in the ``messages`` cookie.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from django.conf import settings
from django.contrib import admin, messages
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from common.adminkit import ListingInlineMixin
from common.config_version import config_version_bump
from tenants.admin_scope import ReadableTenantFilter, TenantScopedAdminMixin
from tenants.models import ApiKey, RetentionPurge, Tenant, TenantGrant, TenantRight
from tenants.services import api_key_create

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    from common.adminkit import FieldGroups


class _TenantTotals(TypedDict):
    key_total: int
    conversation_total: int


class ApiKeyInline(ListingInlineMixin, admin.TabularInline):
    model = ApiKey
    fields = ["prefix", "name", "is_active", "is_debug", "can_preview", "can_answer", "created_at", "last_used_at"]
    verbose_name_plural = "API keys (create new ones from the API key page)"


RIGHT_FIELDS = [right.value for right in TenantRight]


class TenantGrantInline(admin.TabularInline):
    """Who may read, end and clear, chat as, or debug this tenant (the permissions on Tenant give it on all)."""

    model = TenantGrant
    fields = ["user", "group", *RIGHT_FIELDS]
    autocomplete_fields = ["user", "group"]
    extra = 0
    verbose_name_plural = "Staff rights over this tenant (a user or a group per row)"


@admin.register(TenantGrant)
class TenantGrantAdmin(admin.ModelAdmin):
    list_display = ["tenant", "user", "group", *RIGHT_FIELDS, "created_at"]
    list_filter = ["tenant", *RIGHT_FIELDS]
    list_select_related = ["tenant", "user", "group"]
    search_fields = ["tenant__slug", "user__username", "group__name"]
    autocomplete_fields = ["tenant", "user", "group"]
    fields = ["tenant", "user", "group", *RIGHT_FIELDS]


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    """A tenant, its keys and grants, and its own message limits (blank: the platform's, named on the page)."""

    list_display = ["slug", "name", "is_active", "retention", "key_count", "conversation_count", "created_at"]
    list_filter = ["is_active"]
    search_fields = ["slug", "name"]
    inlines = [ApiKeyInline, TenantGrantInline]

    def get_fieldsets(self, request: HttpRequest, obj: Tenant | None = None):
        limits = (
            "Messages this tenant's traffic may send, as <count>/<second|minute|hour|day> or off; a message over "
            "a limit is answered 429 with Retry-After. Blank: the platform's, now "
            f"{settings.API_MESSAGE_RATE_PER_KEY} per API key and {settings.API_MESSAGE_RATE_PER_SESSION} per session."
        )
        platform_window = f"{settings.RETENTION_DAYS} days" if settings.RETENTION_DAYS else "forever"
        retention = (
            "How long this tenant's conversations are kept after their last message; older ones are purged with "
            "every message, decision, tool call, handoff, rating and escalation they left (the analytics' daily "
            f"totals stay). Blank: the platform's, now {platform_window}. The purges are listed on the retention "
            "purges page."
        )
        return [
            (None, {"fields": ["slug", "name", "is_active"]}),
            ("Message limits", {"fields": ["message_rate_per_key", "message_rate_per_session"], "description": limits}),
            ("Retention", {"fields": ["retention_days"], "description": retention}),
        ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Tenant]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                key_total=Count("api_keys", distinct=True),
                conversation_total=Count("conversations", distinct=True),
            )
        )

    @admin.display(description="kept")
    def retention(self, obj: Tenant) -> str:
        days = obj.retention_window_days()
        return "forever" if days is None else f"{days} days"

    @admin.display(description="API keys", ordering="key_total")
    def key_count(self, obj: WithAnnotations[Tenant, _TenantTotals]) -> int:
        return obj.key_total

    @admin.display(description="conversations", ordering="conversation_total")
    def conversation_count(self, obj: WithAnnotations[Tenant, _TenantTotals]) -> int:
        return obj.conversation_total


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Keys are made only by the "add" page, which shows the secret once and stores its hash."""

    list_display = [
        "prefix",
        "name",
        "tenant",
        "is_active",
        "is_debug",
        "can_preview",
        "can_answer",
        "created_at",
        "last_used_at",
    ]
    list_filter = ["is_active", "is_debug", "can_preview", "can_answer", "tenant"]
    list_select_related = ["tenant"]
    search_fields = ["prefix", "name", "tenant__slug", "tenant__name"]
    date_hierarchy = "created_at"
    actions = ["deactivate_keys"]

    def get_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> FieldGroups:
        if obj is None:
            return ["tenant", "name", "is_debug", "can_preview", "can_answer"]
        return [
            "tenant",
            "name",
            "prefix",
            "key_hash",
            "is_active",
            "is_debug",
            "can_preview",
            "can_answer",
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
            tenant_slug=obj.tenant.slug,
            name=obj.name,
            is_debug=obj.is_debug,
            can_preview=obj.can_preview,
            can_answer=obj.can_answer,
        )
        # The admin goes on with ``obj`` (log entry, then response_add): make it the stored key.
        for field in ApiKey._meta.concrete_fields:
            setattr(obj, field.attname, getattr(key, field.attname))
        obj._state.adding = False
        obj._state.db = key._state.db
        obj.raw_key = raw  # type: ignore[attr-defined]  # lives on this instance for response_add, nowhere else

    def response_add(self, request: HttpRequest, obj: ApiKey, post_url_continue: str | None = None) -> HttpResponse:
        """The new key, once, in this response's body: not a flash message (the ``messages`` cookie), nor the
        session."""
        raw = getattr(obj, "raw_key", None)
        if raw is None:
            return super().response_add(request, obj, post_url_continue)
        opts = self.opts
        context = {
            **self.admin_site.each_context(request),
            "title": "Copy the new API key",
            "opts": opts,
            "key": obj,
            "raw_key": raw,
            "change_url": reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk]),
            "add_url": reverse(f"admin:{opts.app_label}_{opts.model_name}_add"),
            "list_url": reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"),
        }
        # The admin's views are never cached (no-store), this answer included.
        return TemplateResponse(request, "admin/tenants/apikey/created.html", context)

    @admin.action(description="Deactivate selected API keys", permissions=["change"])
    def deactivate_keys(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        updated = queryset.filter(is_active=True).update(is_active=False)
        config_version_bump()  # QuerySet.update bypasses the signals; cached keys must go at once
        self.message_user(request, f"Deactivated {updated} API key(s).", messages.SUCCESS)


@admin.register(RetentionPurge)
class RetentionPurgeAdmin(TenantScopedAdminMixin, admin.ModelAdmin):
    """The retention purges, as the purge wrote them: read-only (no customer data, counts only). A purge without an
    end is running, or stopped before its end (the next one finishes the work)."""

    list_display = ["tenant", "cutoff", "window_days", "rows", "batches", "started_at", "finished_at", "seconds"]
    list_filter = [("tenant", ReadableTenantFilter)]
    list_select_related = ["tenant"]
    search_fields = ["tenant__slug"]
    date_hierarchy = "started_at"
    readonly_fields = fields = (
        "tenant",
        "window_days",
        "cutoff",
        "counts",
        "batches",
        "started_at",
        "finished_at",
        "seconds",
    )

    @admin.display(description="rows purged")
    def rows(self, obj: RetentionPurge) -> int:
        return sum(obj.counts.values())

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: RetentionPurge | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: RetentionPurge | None = None) -> bool:
        return False
