"""The field-level history in the admin: :class:`FieldHistoryAdminMixin` makes an object's "History" page show
what auditlog recorded of it and of the rows its inlines edit (an intent's keywords, a specialist's prompts), and
:class:`RoutingChangeAdmin` is the "Routing changes" list of every entry, which nobody may add, change or delete.
Both say what changed in words (:mod:`common.history.words`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from auditlog.admin import LogEntryAdmin
from auditlog.filters import ResourceTypeFilter
from auditlog.models import LogEntry
from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.contrib.admin.views.main import PAGE_VAR
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.db import connections, models
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest
from django.template.response import TemplateResponse
from django.utils.formats import localize
from django.utils.text import capfirst
from django.utils.timezone import localtime

from common.adminkit import RelatedLinksMixin
from common.history.words import changes_html, changes_summary

if TYPE_CHECKING:
    from django.contrib.admin.options import BaseModelAdmin, ModelAdmin

    _ModelAdminBase = ModelAdmin[Any]
    _AdminBase = BaseModelAdmin[Any]
else:
    _ModelAdminBase = _AdminBase = object

HISTORY_PER_PAGE = 25


def history_entries(
    obj: models.Model, *, children: Sequence[tuple[type[models.Model], str]] = ()
) -> QuerySet[LogEntry]:
    """The entries of ``obj`` and of its ``children`` — (model, name of its foreign key to ``obj``) — newest first:
    a child's entries are found by its id while it exists, and by the foreign key its creation or deletion recorded
    (``{"intent": ["None", "12"]}``) once it is gone."""
    found = Q(content_type=ContentType.objects.get_for_model(obj), object_id=obj.pk)
    for model, fk in children:
        current = list(model._default_manager.filter(**{fk: obj}).values_list("pk", flat=True))
        of_model = Q(content_type=ContentType.objects.get_for_model(model))
        # Two arms, not one with an OR inside: PostgreSQL reads each through its own index and merges them.
        found |= (of_model & Q(object_id__in=current)) | (of_model & _names(fk, str(obj.pk)))
    return LogEntry.objects.filter(found).select_related("actor", "content_type").order_by("-timestamp", "-pk")


def _names(fk: str, pk: str) -> Q:
    """The entries whose recorded ``[old, new]`` of ``fk`` holds ``pk`` on either side. Where the database can say
    "this JSON contains that" (PostgreSQL), it does, and the GIN index of migration ``common.0003`` answers it
    without reading every entry of the child's model; elsewhere (SQLite, which has no such lookup) each side is
    compared by its index in the pair."""
    if connections[LogEntry.objects.db].features.supports_json_field_contains:
        return Q(changes__contains={fk: [pk]})  # the whole column's ``@>``: what the index serves
    return Q(**{f"changes__{fk}__0": pk}) | Q(**{f"changes__{fk}__1": pk})


class FieldHistoryAdminMixin(RelatedLinksMixin, _ModelAdminBase):
    """The object's "History" page lists its recorded changes — who (or "system"), when, each field old → new, a
    relation's added and removed rows — and those of the rows its inlines edit, each named. Anyone who may view the
    object may read it. (Its pages link related objects only for those who may open them: RelatedLinksMixin.)"""

    def history_children(self) -> list[tuple[type[models.Model], str]]:
        children = []
        for inline in self.inlines:
            fks = [
                field.name
                for field in inline.model._meta.fields
                if field.many_to_one and field.related_model is self.model and (inline.fk_name in (None, field.name))
            ]
            if fks:
                children.append((inline.model, fks[0]))
        return children

    def history_view(self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None):
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            raise Http404(f"No {self.opts.verbose_name} with ID “{object_id}”.")
        if not self.has_view_or_change_permission(request, obj):
            raise PermissionDenied
        page = self.get_paginator(request, history_entries(obj, children=self.history_children()), HISTORY_PER_PAGE)
        entries = page.get_page(request.GET.get(PAGE_VAR, 1))
        own_type = ContentType.objects.get_for_model(obj)
        for entry in entries:
            entry.of_child = not (entry.content_type_id == own_type.pk and entry.object_id == obj.pk)
            entry.changes_html = changes_html(entry)
        context = {
            **self.admin_site.each_context(request),
            "title": f"History: {obj}",
            "subtitle": None,
            "module_name": str(capfirst(self.opts.verbose_name_plural)),
            "object": obj,
            "opts": self.opts,
            "log_entries": entries,
            "page_range": page.get_elided_page_range(entries.number),
            "page_var": PAGE_VAR,
            "pagination_required": page.count > HISTORY_PER_PAGE,
            **(extra_context or {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "common/field_history.html", context)


class RoutingChangeAdmin(LogEntryAdmin):
    """Every recorded change, filterable by model, user, action and date. Nobody — superusers included — adds,
    changes or deletes an entry: view permission decides who reads them.

    An entry's object and its author link their admin pages only for users who may open them (a routing editor
    reads an MCP server's changes, but may not open the server): :meth:`links_permitted`."""

    list_filter = [ResourceTypeFilter, ("actor", admin.RelatedOnlyFieldListFilter), "action", "timestamp"]
    actions = None

    @admin.display(description="Created", ordering="timestamp")
    def created(self, obj: LogEntry) -> str:
        return str(localize(localtime(obj.timestamp)))

    @admin.display(description="Changes")
    def msg_short(self, obj: LogEntry) -> str:
        return changes_summary(obj)

    @admin.display(description="Changes")
    def msg(self, obj: LogEntry) -> str:
        return changes_html(obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def _may_open(self, request: HttpRequest, model: type[models.Model] | None) -> bool:
        if model is None or not self.admin_site.is_registered(model):
            return True  # no page to link: the name is shown
        return self.admin_site.get_model_admin(model).has_view_or_change_permission(request)

    def links_permitted(self, request: HttpRequest, names: Sequence[Any]) -> list[Any]:
        """``names`` (columns or fields) with the object's and the author's links swapped for their names where the
        request's user may not open their pages."""
        permitted = {
            "resource_url": lambda entry: self._may_open(request, entry.content_type.model_class()),
            "user_url": lambda entry: self._may_open(request, type(entry.actor)),
        }
        shown: list[Any] = []
        for name in names:
            if isinstance(name, (list, tuple)):
                shown.append(tuple(self.links_permitted(request, name)))
            elif isinstance(name, str) and name in permitted:
                shown.append(self._column(name, permitted[name]))
            else:
                shown.append(name)
        return shown

    def _column(self, name: str, may_open: Any) -> Any:
        linked = getattr(self, name)

        @admin.display(description=linked.short_description)
        def column(entry: LogEntry) -> str:
            if may_open(entry):
                return linked(entry)
            if name == "user_url":
                return str(entry.actor) if entry.actor else "system"
            return f"{entry.content_type} - {entry.object_repr}"

        column.__name__ = name
        return column

    def get_list_display(self, request: HttpRequest) -> list[Any]:
        return self.links_permitted(request, super().get_list_display(request))

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[Any]:
        return self.links_permitted(request, super().get_readonly_fields(request, obj))

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> list[Any]:
        return [
            (title, {**options, "fields": self.links_permitted(request, options["fields"])})
            for title, options in super().get_fieldsets(request, obj)
        ]
