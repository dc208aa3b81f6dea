"""Tenant data in the admin, tenant by tenant: the pages of conversations, their messages, route decisions, tool
calls, handoffs and customers' ratings show a user only the tenants whose conversations they may read.

Superusers and holders of the ``tenants.read_conversations`` permission read every tenant; others the tenants of
their grants with "read conversations" (:func:`tenants.selectors.request_tenant_rights`, read once per request).
The model's view permission still decides whether a page opens at all. Another tenant's record reads exactly like a
missing one: its page is a 404, its rows are in no list, count, filter or search.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.db.models import Model, QuerySet
from django.http import Http404, HttpRequest, HttpResponse

from tenants.models import Tenant, TenantRight
from tenants.selectors import request_tenant_rights

if TYPE_CHECKING:
    from django.contrib.admin.options import ModelAdmin
    from django_stubs_ext import StrPromise

    _ModelAdminBase = ModelAdmin[Any]
else:
    _ModelAdminBase = object  # a plain mixin at run time: the admin class comes later in the MRO

ERROR_NO_SUCH_RECORD = "No such record."


def tenant_ids_readable(request: HttpRequest) -> set[int] | None:
    """The tenants whose conversations the request's user may read; ``None``: every tenant. Read once per request
    (:func:`tenants.selectors.request_tenant_rights`)."""
    return request_tenant_rights(request).ids(TenantRight.READ)


class TenantScopedAdminMixin(_ModelAdminBase):
    """A ``ModelAdmin`` of tenant data: ``tenant_lookup`` leads from the model to its tenant (``"tenant"``, or
    ``"conversation__tenant"`` for rows that hang off a conversation).

    The list, its counts, filters and search, the actions, and every object page read :meth:`get_queryset`, which
    keeps the user's tenants only. A change or history page of a record outside them — or of no record — is a 404,
    where the admin itself would redirect to its index.
    """

    tenant_lookup = "tenant"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        rows = super().get_queryset(request)
        readable = tenant_ids_readable(request)
        return rows if readable is None else rows.filter(**{f"{self.tenant_lookup}__in": readable})

    def scoped_object(self, request: HttpRequest, object_id: str) -> Model:
        """The record ``object_id`` if the user may read its tenant; else :class:`~django.http.Http404`."""
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            raise Http404(ERROR_NO_SUCH_RECORD)
        return obj

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        self.scoped_object(request, object_id)
        return super().change_view(request, object_id, form_url, extra_context)

    def history_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        self.scoped_object(request, object_id)
        return super().history_view(request, object_id, extra_context)


class ReadableTenantFilter(admin.RelatedFieldListFilter):
    """The tenant filter of a scoped list: it offers the user's tenants only, so no other tenant's name shows."""

    def field_choices(self, field: Any, request: HttpRequest, model_admin: Any) -> list[tuple[str, str | StrPromise]]:
        readable = tenant_ids_readable(request)
        tenants = Tenant.objects.order_by("slug")
        if readable is not None:
            tenants = tenants.filter(pk__in=readable)
        return [(str(tenant.pk), str(tenant)) for tenant in tenants]
