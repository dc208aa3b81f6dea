"""The ``agent_handoffs`` table, read-only: handoffs are recorded by the graph, never typed in. Each user sees the
tenants whose conversations they may read (:mod:`tenants.admin_scope`)."""

from __future__ import annotations

from django.contrib import admin

from common.adminkit import ReadOnlyAdminMixin
from handoffs.models import Handoff
from tenants.public import ReadableTenantFilter, TenantScopedAdminMixin


@admin.register(Handoff)
class HandoffAdmin(TenantScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "created_at",
        "from_agent",
        "to_agent",
        "kind",
        "status",
        "outcome",
        "profile",
        "tenant",
        "conversation",
    ]
    list_filter = ["kind", "status", "outcome", "created_at", "profile", ("tenant", ReadableTenantFilter)]
    list_select_related = ["conversation", "profile", "tenant"]
    search_fields = ["from_agent", "to_agent", "reason", "conversation__conversation_key"]
    date_hierarchy = "created_at"
    fields = [
        "created_at",
        "conversation",
        "tenant",
        "profile",
        "from_agent",
        "to_agent",
        "kind",
        "status",
        "outcome",
        "reason",
        "context_summary",
    ]
