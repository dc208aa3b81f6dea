"""Reads of tenants."""

from __future__ import annotations

from tenants.models import Tenant


def tenant_get_active(*, slug: str) -> Tenant | None:
    """The active tenant ``slug``, or ``None`` (unknown and inactive tenants look the same)."""
    return Tenant.objects.filter(slug=slug, is_active=True).first()


def tenant_choices() -> list[tuple[str, str]]:
    """``(slug, name)`` of every active tenant, by slug (the chat page's picker)."""
    return list(Tenant.objects.filter(is_active=True).order_by("slug").values_list("slug", "name"))
