"""Field-level history of the configuration (django-auditlog): each save of a registered model records the fields
it changed as ``{field: [old, new]}``, who (the admin user; nobody — "system" — for imports and commands) and when,
in auditlog's one table. Each app registers its own models in its ``AppConfig.ready`` with :func:`history_register`;
the admin's side (the "History" page, the read-only "Routing changes" list) is in :mod:`common.history_admin`.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from auditlog.middleware import AuditlogMiddleware
from auditlog.registry import auditlog
from django.db import models
from django.http import HttpRequest

# Bookkeeping, not decisions: ``updated_at`` alone would make every save an entry; ``synced``/``synced_at`` are what
# the last manifest sync wrote (its own changes to the decided fields are recorded).
BOOKKEEPING_FIELDS = ("created_at", "updated_at", "synced", "synced_at")


def history_register(
    model: type[models.Model],
    *,
    m2m_fields: Collection[str] = (),
    mask_fields: Collection[str] = (),
    mask_callable: str | None = None,
) -> None:
    """Record every create, update and delete of ``model`` — and of its many-to-many ``m2m_fields`` — field by
    field. ``mask_fields`` are recorded through ``mask_callable`` (a dotted path), never as they are."""
    fields = model._meta.get_fields()
    # The reverse side of a relation (an intent's ``keywords``) is recorded on the rows that hold it.
    reverse = [field.name for field in fields if field.auto_created and not field.concrete]
    bookkeeping = [name for name in BOOKKEEPING_FIELDS if name in {field.name for field in fields}]
    auditlog.register(
        model,
        exclude_fields=[*bookkeeping, *reverse],
        m2m_fields=set(m2m_fields),
        mask_fields=list(mask_fields),
        mask_callable=mask_callable,
    )


def endpoint_mask(value: str) -> str:
    """A URL without its secrets: credentials before the host and every query value are replaced by ``***``
    (``https://bot:pw@crm.example/mcp?token=x`` → ``https://***@crm.example/mcp?token=***``), so the log still says
    which server and path it was."""
    try:
        parts = urlsplit(value)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "***"
    if not parts.scheme:
        return value  # "None" (the old value of a create) and other non-URLs carry no secret
    netloc = ("***@" if "@" in parts.netloc else "") + host + (f":{port}" if port else "")
    query = "&".join(f"{key}=***" for key, _ in parse_qsl(parts.query, keep_blank_values=True))
    return parts._replace(netloc=netloc, query=query, fragment="").geturl()


def secret_or_endpoint_mask(value: str) -> str:
    """A secret (an API key) as ``***``, whatever its length, or a URL as :func:`endpoint_mask` leaves it: one
    ``mask_callable`` for a model that has both. "None" (the old value of a create) and "" stay as they are."""
    if value in ("", "None"):
        return value
    if "://" in value:
        return endpoint_mask(value)
    return "***"


class HistoryActorMiddleware(AuditlogMiddleware):
    """auditlog's middleware (the request's user becomes the actor of what the request saves), with the user left
    unevaluated until an entry is written: a request that changes nothing — every chat and API message — costs no
    session or user query for it. Goes after ``AuthenticationMiddleware``."""

    @staticmethod
    def _get_actor(request: HttpRequest) -> Any:
        return getattr(request, "user", None)  # AuthenticationMiddleware's lazy user; auditlog checks it on write
