"""Erasing one end user of a tenant everywhere the registry (:mod:`.registry`) says they are.

One conversation at a time, each in one transaction holding its row's lock (the lock a turn takes, so no turn of
it writes meanwhile): every holder's rows of it are deleted or anonymised, children first, then the conversation
itself — its ids, live state and session become ``erased:<its number>``, so the customer's next message starts a new
conversation. A person holding it lets it go (the desks hear of it, anonymised), and the attachments its tool calls
left in the cache are dropped once the transaction commits. Analytics totals do not move: the rows they count stay,
with their counted columns. A run that stops half-way leaves whole conversations erased and the rest as they were;
running it again finishes the work.

The erasure is recorded (:class:`~conversations.models.CustomerErasure`) without the data; an erasure that finds
nothing — a second one — changes and records nothing.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from auditlog.context import disable_auditlog
from django.conf import settings
from django.db import models, transaction
from django.db.models import Q

from agents.public import attachment_keys, attachments_forget
from common.personal_data import customer_pseudonym
from conversations.customer_data.registry import HOLDERS, ROOT, Customer, Erase, Holder, conversations_of
from conversations.desk.escalations import escalation_close
from conversations.memory.facts import facts_cache_forget
from conversations.models import Conversation, CustomerErasure, ToolCall

ERASE_BATCH = 1000  # rows whose JSON keeps some keys are rewritten this many at a time


def _empty(model_field: Any) -> Any:
    if model_field.null:
        return None
    if model_field.has_default():
        return model_field.get_default()
    return ""


def _anonymised(holder: Holder, rows: models.QuerySet[Any]) -> int:
    meta = holder.model._meta
    values = {name: _empty(meta.get_field(name)) for name in holder.blank}
    values.update({name: make() for name, make in holder.values.items()})
    count = rows.update(**values) if values else rows.count()
    for name, kept in holder.kept_keys.items():
        batch: list[Any] = []
        for row in rows.only("pk", name).iterator(chunk_size=ERASE_BATCH):
            stored = getattr(row, name) or {}
            setattr(row, name, {key: stored[key] for key in kept if key in stored})
            batch.append(row)
            if len(batch) == ERASE_BATCH:
                holder.model._default_manager.bulk_update(batch, [name])
                batch = []
        holder.model._default_manager.bulk_update(batch, [name])
    return count


def _erased(holder: Holder, reach: Q, *, dry_run: bool) -> int:
    rows = holder.rows(reach)
    if dry_run:
        return rows.count()
    if holder.erase == Erase.DELETE:
        # Unrecorded: the field history would write the deleted row's values (a customer's words) into a new entry.
        with disable_auditlog():
            _, deleted = rows.delete()
        return deleted.get(holder.label, 0)
    return _anonymised(holder, rows)


def _conversation_erase(pk: int, customer: Customer, *, dry_run: bool) -> Counter[str]:
    """Erase one conversation's rows, in the caller's transaction; nothing if it is no longer the customer's."""
    counts: Counter[str] = Counter()
    locked = conversations_of(customer).select_for_update(of=("self",)).filter(pk=pk).first()
    if locked is None:
        return counts
    attachments = [
        key
        for result in ToolCall.objects.filter(conversation_id=pk, result__has_key="attachments").values_list(
            "result", flat=True
        )
        for key in attachment_keys(result)
    ]
    for holder in reversed(HOLDERS):
        if holder.of_conversations is not None:
            counts[holder.label] += _erased(holder, holder.of_conversations((locked,)), dry_run=dry_run)
    counts[ROOT.label] += _erased(ROOT, Q(pk=pk), dry_run=dry_run)
    if not dry_run:
        # Read again as erased: the desks are told of the close under the erased key, with the erased summary.
        escalation_close(conversation=Conversation.objects.get(pk=pk))
        if attachments:
            transaction.on_commit(lambda: attachments_forget(attachments))
    return counts


def customer_erase(
    *, customer: Customer, user_id: str, actor: str, requested_by: Any = None, dry_run: bool = False
) -> dict[str, int]:
    """Erase the customer everywhere (see the module) and record it; ``dry_run``: count what would be erased and
    change nothing. Returns the rows erased (or to erase) per model label; empty when nothing is stored about them.

    Each conversation is one transaction, taking its row's lock (``select_for_update``) as a turn does."""
    counts: Counter[str] = Counter()
    for pk in list(conversations_of(customer).values_list("pk", flat=True)):
        with transaction.atomic():
            counts.update(_conversation_erase(pk, customer, dry_run=dry_run))
    # The customer's own rows outside any conversation (a memory of facts, when there is one), in one batch.
    with transaction.atomic():
        for holder in HOLDERS[1:]:
            if holder.of_customer is not None:
                counts[holder.label] += _erased(holder, holder.of_customer(customer), dry_run=dry_run)
        if not dry_run:  # the turns read the facts through a cache: it forgets them with the rows
            for user_id in customer.user_ids:
                facts_cache_forget(customer.tenant_id, user_id)
    erased = {label: count for label, count in sorted(counts.items()) if count}
    if erased and not dry_run:
        CustomerErasure.objects.create(
            tenant_id=customer.tenant_id,
            customer=customer_pseudonym(user_id.strip(), key=settings.SECRET_KEY),
            actor=actor[:200],
            requested_by=requested_by,
            counts=erased,
        )
    return erased
