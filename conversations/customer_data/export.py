"""Everything stored about one end user of a tenant, as one JSON document written piece by piece.

The document::

    {"tenant": "acme", "user_id": "cust-42", "exported_at": "…",
     "conversations": [{<the conversation's columns>, "agent_id": "…",
                        "messages": [...], "route_decisions": [...], "tool_calls": [...], "handoffs": [...],
                        "ratings": [...], "escalations": [...], …}, …]}

with one list per holder of :data:`~conversations.customer_data.registry.HOLDERS` (its ``name``), each row as its
columns are stored: a masked value stays masked, a pseudonym stays one. It is streamed, never built whole: rows are
read ``EXPORT_BATCH`` at a time (a server-side cursor on PostgreSQL) and written as they come, so a customer with ten
thousand messages costs the memory of one batch. The rows are read as they are while the document is written (no
snapshot): a turn that lands meanwhile may or may not be in it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone

from common.errors import DomainError
from conversations.customer_data.registry import HOLDERS, ROOT, Customer, Holder, conversations_of
from conversations.guardrails import identifier_pseudonym
from conversations.models import Conversation
from tenants.models import Tenant

EXPORT_BATCH = 500
USER_ID_MAX_CHARS = 200  # as the conversation's column
ERROR_UNKNOWN_TENANT = "No tenant {slug!r}."
ERROR_USER_ID = f"The user id must be 1 to {USER_ID_MAX_CHARS} characters, as the chat API received it."


def customer_for(*, tenant_id: int, user_id: str) -> Customer:
    """The customer ``user_id`` names in the tenant, under every spelling the store may keep of it. Raises
    :class:`DomainError` (400 naming ``user_id``) for a blank or over-long id: a blank one would name every
    anonymous conversation."""
    user_id = user_id.strip()
    if not user_id or len(user_id) > USER_ID_MAX_CHARS:
        raise DomainError(ERROR_USER_ID, fields={"user_id": [ERROR_USER_ID]})
    stored = identifier_pseudonym(user_id, key=settings.SECRET_KEY)
    return Customer(tenant_id=tenant_id, user_ids=tuple(dict.fromkeys((user_id, stored))))


def customer_of_tenant(*, tenant_slug: str, user_id: str) -> Customer:
    """:func:`customer_for` a tenant named by its slug (an inactive one too: its customers keep their rights).
    Raises :class:`DomainError` naming ``tenant`` for an unknown one."""
    tenant_id = Tenant.objects.filter(slug=tenant_slug).values_list("pk", flat=True).first()
    if tenant_id is None:
        message = ERROR_UNKNOWN_TENANT.format(slug=tenant_slug)
        raise DomainError(message, fields={"tenant": [message]})
    return customer_for(tenant_id=tenant_id, user_id=user_id)


def row_data(row: models.Model) -> dict[str, Any]:
    """A row's stored columns, by their column names (``conversation_id``, not the related row)."""
    return {model_field.attname: model_field.value_from_object(row) for model_field in row._meta.concrete_fields}


def _json(value: Any) -> str:
    return json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False)


def _listed(rows: Iterable[models.Model]) -> Iterator[str]:
    yield "["
    for index, row in enumerate(rows):
        yield ("," if index else "") + _json(row_data(row))
    yield "]"


def _rows(holder: Holder, reach: Any) -> Iterator[models.Model]:
    return holder.rows(reach).iterator(chunk_size=EXPORT_BATCH)


def _conversation(conversation: Conversation) -> Iterator[str]:
    head = {**row_data(conversation), "agent_id": conversation.profile.agent_id}
    yield _json(head)[:-1]  # the object left open for its rows
    for holder in HOLDERS:
        if holder.of_conversations is not None:
            yield f",{_json(holder.name)}:"
            yield from _listed(_rows(holder, holder.of_conversations((conversation,))))
    yield "}"


def customer_export(*, customer: Customer, tenant_slug: str, user_id: str) -> Iterator[str]:
    """The customer's document (see the module), in pieces to write as they come."""
    head = {"tenant": tenant_slug, "user_id": user_id.strip(), "exported_at": timezone.now()}
    yield _json(head)[:-1]
    yield f",{_json(ROOT.name)}:["
    for index, conversation in enumerate(conversations_of(customer).iterator(chunk_size=EXPORT_BATCH)):
        if index:
            yield ","
        yield from _conversation(conversation)
    yield "]"
    # The customer's own rows that belong to no conversation (a memory of facts, when there is one).
    for holder in HOLDERS[1:]:
        if holder.of_customer is not None:
            yield f",{_json(holder.name)}:"
            yield from _listed(_rows(holder, holder.of_customer(customer)))
    yield "}"
