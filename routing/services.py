"""Writes of routing data: tenants, API keys and the keyword rule."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from routing.auth import key_generate, key_hash
from routing.models import ApiKey, Intent, Tenant
from routing.selectors import keyword_conflicts

ERROR_KEYWORD_TAKEN = "Keyword {keyword!r} is already used by the enabled intent {intent!r} of this profile."


def keywords_validate_unique(*, intent: Intent, texts: list[str]) -> None:
    """Refuse keywords that another enabled intent of the same profile already uses.

    Raises :class:`ValidationError` whose message names the other intent. A
    disabled intent may share keywords (it does not route); enabling it runs
    this check again.
    """
    if not intent.enabled:
        return
    conflicts = keyword_conflicts(profile_id=intent.profile_id, texts=texts, exclude_intent_id=intent.pk)
    if conflicts:
        raise ValidationError(
            [ERROR_KEYWORD_TAKEN.format(keyword=keyword, intent=other) for keyword, other in conflicts.items()],
            code="keyword_taken",
        )


def tenant_get_or_create(*, slug: str, name: str = "") -> tuple[Tenant, bool]:
    return Tenant.objects.get_or_create(slug=slug, defaults={"name": name or slug})


@transaction.atomic
def api_key_create(
    *, tenant_slug: str, name: str = "", is_debug: bool = False, can_preview: bool = False
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
    )
    return key, raw
