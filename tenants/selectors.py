"""Reads of tenants, and of the rights a logged-in user holds over them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias

from django.db.models import Q, QuerySet

from tenants.models import Tenant, TenantGrant, TenantRight

# Whose rows a read covers: one tenant's id, the ids of some tenants (those a user is granted), or None: every tenant.
TenantScope: TypeAlias = int | frozenset[int] | None


def tenant_scope_where(path: str, scope: TenantScope) -> dict[str, Any]:
    """Filter keywords keeping the rows of ``scope`` whose tenant id is at ``path`` (e.g. ``conversation__tenant_id``):
    ``{path: id}``, ``{path + "__in": ids}``, or nothing for every tenant."""
    if scope is None:
        return {}
    if isinstance(scope, int):
        return {path: scope}
    return {f"{path}__in": scope}


def tenant_get_active(*, slug: str) -> Tenant | None:
    """The active tenant ``slug``, or ``None`` (unknown and inactive tenants look the same)."""
    return Tenant.objects.filter(slug=slug, is_active=True).first()


def tenant_choices(*, tenant_ids: set[int] | None = None) -> list[tuple[str, str]]:
    """``(slug, name)`` of every active tenant, by slug (the chat page's picker); only ``tenant_ids`` if given."""
    tenants = Tenant.objects.filter(is_active=True)
    if tenant_ids is not None:
        tenants = tenants.filter(pk__in=tenant_ids)
    return list(tenants.order_by("slug").values_list("slug", "name"))


def _grants(user: Any, right: TenantRight) -> QuerySet[TenantGrant]:
    return TenantGrant.objects.filter(Q(user=user) | Q(group__in=user.groups.all()), **{right.value: True})


def _holds_everywhere(user: Any, right: TenantRight) -> bool | None:
    """True: ``right`` on every tenant (superuser, or the ``Tenant`` permission); False: on none (not an active
    logged-in user); None: only where a grant gives it."""
    if not (getattr(user, "is_authenticated", False) and getattr(user, "is_active", False)):
        return False
    if user.is_superuser or user.has_perm(f"tenants.{right.value}"):
        return True
    return None


def tenant_right_held(*, user: Any, tenant_id: int, right: TenantRight) -> bool:
    """Whether the logged-in ``user`` holds ``right`` over the tenant: superusers always, users or groups with the
    ``tenants.<right>`` permission on every tenant, others where a grant of theirs or of a group says so.
    At most three queries (Django caches a user's permissions on the user object)."""
    everywhere = _holds_everywhere(user, right)
    if everywhere is not None:
        return everywhere
    return _grants(user, right).filter(tenant_id=tenant_id).exists()


def tenant_ids_with_right(*, user: Any, right: TenantRight) -> set[int] | None:
    """The ids of the tenants over which ``user`` holds ``right``; ``None`` means every tenant."""
    return TenantRights(user=user).ids(right)


@dataclass
class TenantRights:
    """The rights ``user`` holds over tenants, as :func:`tenant_ids_with_right` and
    :func:`tenant_right_held_anywhere` answer them, read with one query of the user's grants (all their rights at
    once, when a right is not held everywhere), kept for as long as this object lives: one request
    (:func:`request_tenant_rights`), never a long-lived connection, whose rights must follow a grant's change."""

    user: Any
    _rows: list[tuple[Any, ...]] | None = field(default=None, init=False, repr=False)

    def _granted(self) -> list[tuple[Any, ...]]:
        # (tenant id, tenant active, then each right's flag in TenantRight's order)
        if self._rows is None:
            grants = TenantGrant.objects.filter(Q(user=self.user) | Q(group__in=self.user.groups.all()))
            flags = [right.value for right in TenantRight]
            self._rows = list(grants.order_by().values_list("tenant_id", "tenant__is_active", *flags))
        return self._rows

    def _column(self, right: TenantRight) -> int:
        return 2 + list(TenantRight).index(right)

    def ids(self, right: TenantRight) -> set[int] | None:
        """The ids of the tenants over which the user holds ``right``; ``None`` means every tenant."""
        everywhere = _holds_everywhere(self.user, right)
        if everywhere is not None:
            return None if everywhere else set()
        column = self._column(right)
        return {row[0] for row in self._granted() if row[column]}

    def anywhere(self, right: TenantRight) -> bool:
        """Whether the user holds ``right`` over at least one active tenant (or over every tenant)."""
        everywhere = _holds_everywhere(self.user, right)
        if everywhere is not None:
            return everywhere
        column = self._column(right)
        return any(row[1] and row[column] for row in self._granted())


_REQUEST_RIGHTS = "_tenant_rights"  # the request's attribute that keeps its user's rights for the rest of the request


def request_tenant_rights(request: Any) -> TenantRights:
    """The rights of the request's user (:class:`TenantRights`), read once per request however many parts of its
    page ask (the admin's header links, a tenant-scoped list, its filters)."""
    rights = getattr(request, _REQUEST_RIGHTS, None)
    if rights is None or rights.user is not request.user:
        rights = TenantRights(user=request.user)
        setattr(request, _REQUEST_RIGHTS, rights)
    return rights


def tenant_right_held_anywhere(*, user: Any, right: TenantRight) -> bool:
    """Whether ``user`` holds ``right`` over at least one active tenant (or over every tenant)."""
    return TenantRights(user=user).anywhere(right)
