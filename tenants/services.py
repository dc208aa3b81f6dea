"""Writes of tenants and API keys."""

from __future__ import annotations

from django.db import transaction

from tenants.auth import key_generate, key_hash
from tenants.models import ApiKey, Tenant


def tenant_get_or_create(*, slug: str, name: str = "") -> tuple[Tenant, bool]:
    return Tenant.objects.get_or_create(slug=slug, defaults={"name": name or slug})


@transaction.atomic
def api_key_create(
    *, tenant_slug: str, name: str = "", is_debug: bool = False, can_preview: bool = False, can_answer: bool = False
) -> tuple[ApiKey, str]:
    """Create a key for the tenant (creating the tenant if needed); returns the key and its raw secret."""
    tenant, _ = tenant_get_or_create(slug=tenant_slug)
    raw, prefix = key_generate()
    key = ApiKey.objects.create(
        tenant=tenant,
        name=name,
        prefix=prefix,
        key_hash=key_hash(raw),
        is_debug=is_debug,
        can_preview=can_preview,
        can_answer=can_answer,
    )
    return key, raw
