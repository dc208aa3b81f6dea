"""Field-level history of the configuration (django-auditlog): each save of a registered model records the fields
it changed as ``{field: [old, new]}``, who (the admin user; nobody — "system" — for imports and commands) and when,
in auditlog's one table. Each app registers its own models in its ``AppConfig.ready`` with :func:`history_register`;
the admin's side (the "History" page, the read-only "Routing changes" list) is in :mod:`common.history.admin`.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from auditlog.middleware import AuditlogMiddleware
from auditlog.registry import auditlog
from django.conf import settings
from django.db import models
from django.http import HttpRequest

from common.endpoints import ENV_REFERENCE, MASK, endpoint_mask, template_shareable
from common.personal_data import customer_pseudonym

# Bookkeeping, not decisions: ``updated_at`` alone would make every save an entry; ``synced``/``synced_at`` are what
# the last manifest sync wrote (its own changes to the decided fields are recorded).
BOOKKEEPING_FIELDS = ("created_at", "updated_at", "synced", "synced_at")
MASK_CALLABLE = "common.history.registry.secret_or_endpoint_mask"  # the default for masked fields
USER_ID_MASK = "common.history.registry.user_id_pseudonym"  # for a field that holds an end user's id


def history_register(
    model: type[models.Model],
    *,
    m2m_fields: Collection[str] = (),
    mask_fields: Collection[str] = (),
    mask_callable: str | None = None,
) -> None:
    """Record every create, update and delete of ``model`` — and of its many-to-many ``m2m_fields`` — field by
    field. ``mask_fields`` and every :func:`address_fields` are recorded through ``mask_callable`` (a dotted path;
    by default :func:`secret_or_endpoint_mask`), never as they are."""
    fields = model._meta.get_fields()
    # The reverse side of a relation (an intent's ``keywords``) is recorded on the rows that hold it.
    reverse = [field.name for field in fields if field.auto_created and not field.concrete]
    bookkeeping = [name for name in BOOKKEEPING_FIELDS if name in {field.name for field in fields}]
    masked = sorted({*mask_fields, *address_fields(model)})
    auditlog.register(
        model,
        exclude_fields=[*bookkeeping, *reverse],
        m2m_fields=set(m2m_fields),
        mask_fields=masked,
        mask_callable=mask_callable or (MASK_CALLABLE if masked else None),
    )


def address_fields(model: type[models.Model]) -> list[str]:
    """The fields of ``model`` that hold an address, which may carry credentials (``user:password@``, a query
    token): URL fields, and text fields named like one (``endpoint``, ``base_url``, ``llm_base_url``)."""
    return [
        field.name
        for field in model._meta.concrete_fields
        if isinstance(field, models.URLField)
        or (isinstance(field, models.CharField) and field.name.endswith(("url", "endpoint")))
    ]


def secret_or_endpoint_mask(value: str) -> str:
    """A secret (an API key) as ``***``, whatever its length, or a URL as :func:`endpoint_mask` leaves it: one
    ``mask_callable`` for a model that has both. "None" (the old value of a create) and "" stay as they are."""
    if value in ("", "None"):
        return value
    if "://" in value:
        return endpoint_mask(value)
    return MASK


def user_id_pseudonym(value: str) -> str:
    """An end user's id as staff read it in the histories (:func:`common.personal_data.customer_pseudonym` under the
    secret key), never as written: an e-mail, phone or CPF as the conversation store keeps it (``email:3f9a1c…``),
    any other id as ``user:<hex>``, the same for the same id, so the entries of one customer still read as one.
    "None" (the old value of a create) and "" stay as they are."""
    if value in ("", "None"):
        return value
    return customer_pseudonym(value, key=settings.SECRET_KEY)


def endpoint_or_template_mask(value: str) -> str:
    """An MCP server's endpoint as :func:`endpoint_mask` leaves it, or its template (``${NAME}`` references) as it
    is when what is written in it holds no secret (:func:`common.endpoints.template_shareable`), else ``***``."""
    if ENV_REFERENCE.search(value):
        return value if template_shareable(value) else MASK
    return endpoint_mask(value)


class HistoryActorMiddleware(AuditlogMiddleware):
    """auditlog's middleware (the request's user becomes the actor of what the request saves), with the user left
    unevaluated until an entry is written: a request that changes nothing — every chat and API message — costs no
    session or user query for it. Goes after ``AuthenticationMiddleware``."""

    @staticmethod
    def _get_actor(request: HttpRequest) -> Any:
        return getattr(request, "user", None)  # AuthenticationMiddleware's lazy user; auditlog checks it on write
