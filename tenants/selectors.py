"""Reads of tenants, and of the rights a logged-in user holds over them."""

from __future__ import annotations

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
    everywhere = _holds_everywhere(user, right)
    if everywhere is not None:
        return None if everywhere else set()
    return set(_grants(user, right).values_list("tenant_id", flat=True))


def tenant_right_held_anywhere(*, user: Any, right: TenantRight) -> bool:
    """Whether ``user`` holds ``right`` over at least one active tenant (or over every tenant)."""
    everywhere = _holds_everywhere(user, right)
    if everywhere is not None:
        return everywhere
    return _grants(user, right).filter(tenant__is_active=True).exists()
