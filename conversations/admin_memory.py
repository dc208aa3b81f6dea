"""What the platform remembers of each customer (:mod:`conversations.memory`), in the admin: listed, searched,
added, corrected and deleted by staff, tenant by tenant (only the tenants whose conversations they may read).

Every save and delete drops the customer's cached facts, so the next turn reads the change.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from conversations.memory.facts import fact_changed
from conversations.models import CustomerFact, FactSource
from tenants.models import Tenant
from tenants.public import ReadableTenantFilter, TenantScopedAdminMixin, tenant_ids_readable


@admin.register(CustomerFact)
class CustomerFactAdmin(TenantScopedAdminMixin, admin.ModelAdmin):
    list_display = ["text", "tenant", "user_id", "source", "agent", "created_at", "expires_at"]
    list_filter = [("tenant", ReadableTenantFilter), "source", "created_at"]
    list_select_related = ["tenant"]
    search_fields = ["text", "user_id", "agent"]
    date_hierarchy = "created_at"
    fields = ["tenant", "user_id", "text", "expires_at", "source", "agent", "source_message", "created_at"]
    readonly_fields = ["source", "agent", "source_message", "created_at"]

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "tenant":  # a fact is added for a tenant whose customers the user may read
            readable = tenant_ids_readable(request)
            tenants: QuerySet[Tenant] = Tenant.objects.order_by("slug")
            kwargs["queryset"] = tenants if readable is None else tenants.filter(pk__in=readable)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: CustomerFact, form: Any, change: bool) -> None:
        if not change:
            obj.source = FactSource.EDITED
        super().save_model(request, obj, form, change)
        fact_changed(obj)

    def delete_model(self, request: HttpRequest, obj: CustomerFact) -> None:
        super().delete_model(request, obj)
        fact_changed(obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[CustomerFact]) -> None:
        facts = list(queryset)
        super().delete_queryset(request, queryset)
        for fact in facts:
            fact_changed(fact)
