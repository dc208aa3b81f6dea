"""Tenants and their API keys in the admin. A key is made only by the "add" page, which shows the secret once."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from django.contrib import admin, messages
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from common.adminkit import ListingInlineMixin
from common.config_version import config_version_bump
from tenants.models import ApiKey, Tenant
from tenants.services import api_key_create

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    from common.adminkit import FieldGroups


class _TenantTotals(TypedDict):
    key_total: int
    conversation_total: int


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
    def key_count(self, obj: WithAnnotations[Tenant, _TenantTotals]) -> int:
        return obj.key_total

    @admin.display(description="conversations", ordering="conversation_total")
    def conversation_count(self, obj: WithAnnotations[Tenant, _TenantTotals]) -> int:
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

    def get_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> FieldGroups:
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
