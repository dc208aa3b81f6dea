"""Read-only building blocks for the apps' admins (routing, agents, handoffs).

Two kinds of read-only page recur: records the chat API writes (conversations,
messages, handoffs), which nobody writes through the admin, and related rows
listed on a parent's page, which are edited — if at all — on their own page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

from django.contrib.admin.utils import flatten
from django.http import HttpRequest

if TYPE_CHECKING:
    from django.contrib.admin.options import BaseModelAdmin, InlineModelAdmin, _FieldGroups

    FieldGroups: TypeAlias = _FieldGroups  # what an admin's get_fields() returns: names, or tuples of names

    _AdminBase = BaseModelAdmin[Any]
    _InlineBase = InlineModelAdmin[Any, Any]
else:
    # At run time the mixins stay plain classes: the admin class they are mixed into comes later in the MRO.
    _AdminBase = _InlineBase = object


class ReadOnlyAdminMixin(_AdminBase):
    """Viewable but never written through the admin: for a ``ModelAdmin`` or an inline.

    Nobody — superusers included — may add, change or delete; view permission
    decides who sees the objects.
    """

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:  # inlines also pass ``obj``
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ListingInlineMixin(_InlineBase):
    """Related rows listed on the parent's page, each a link to the row's own page.

    No blank rows, no delete boxes, nothing added here, and every field named in
    ``fields`` is read-only. Whether the row's own page may be changed is left to
    the model's permissions: the link reads "Change" or "View" accordingly.
    """

    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return flatten(self.fields or [])


class ReadOnlyInlineMixin(ReadOnlyAdminMixin, ListingInlineMixin):
    """A :class:`ListingInlineMixin` whose rows may not be changed or deleted through the admin either."""
