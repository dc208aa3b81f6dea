"""A tenant's retention: its conversations last written to more than its window ago are purged, for good, with every
row they left — every holder of :mod:`.registry` reached through a conversation.

The cutoff is a UTC midnight, the tenant's window (:meth:`tenants.models.Tenant.retention_window_days`) before
today's. A conversation is expired when it was last updated before the cutoff and has no message since (a person's
late reply). The analytics are told first (``store_rows_retiring``): they sum the days the rows were written on, and
keep those totals as they are from then on, so the dashboard's figures do not move.

The purge goes ``RETENTION_PURGE_BATCH`` conversations at a time at most, each batch one short transaction, and rests
after it: ``RETENTION_PURGE_PAUSE_SECONDS`` at least, and long enough that batches take no more than
``RETENTION_PURGE_SHARE`` of its time (a batch of 0.1 s and a share of 0.25 rest 0.3 s), so a purge slowed by a busy
database slows down with it instead of taking the database from the message path — that rest never more than
:data:`REST_MAX_SECONDS` (a batch that seemed long because its process was paused or stalled does not stop the purge
for minutes). With ``RETENTION_PURGE_ROWS_PER_SECOND`` the purge also deletes no more rows a second than that: it
rests a batch's rows over the rate, begins with one conversation and sizes each next batch to about a second of rows
by the rows a conversation has had so far, so that it deletes in small steps rather than in bursts (a burst is what a
turn beside it feels). It runs in a thread of its own ``RETENTION_PURGE_NICE`` steps nicer than its caller's
(:mod:`common.priority`): what it costs a turn beside it is CPU, which the kernel then gives the turn first.

On PostgreSQL a batch's commit does not wait for its write-ahead log to reach the disk (``synchronous_commit`` off for
that transaction alone): a crash may undo the last batches, record included, and the next run purges them again; turns'
commits do not queue behind the purge's. The batch's conversations are locked as a turn locks them, skipping any a turn
holds (left for the next run; its turn makes it recent anyway), read again as expired, and every holder's rows of them
are deleted children first, the conversations last. The purge's :class:`~tenants.models.RetentionPurge` is written
before the first batch and updated in each batch's transaction: what it says is gone is gone. A purge that stops midway
leaves whole conversations purged and the rest as they were; the next run finishes the work.

On PostgreSQL ``agent_handoffs`` is partitioned by month (:mod:`handoffs.partitions`). Before the batches,
:func:`retention_purge_all` drops a month's partition whole when every tenant with rows in it has a window whose
cutoff has passed the month's end, and none of its rows belongs to a conversation the purge keeps (one last written
to since its tenant's cutoff): the batches then find none of that month's handoffs to delete. The analytics are told
first, for the month's days, as for a batch. The month is decided on what has expired when it is checked, a moment
before the drop: a conversation past its window that a customer takes up again in that moment keeps its rows but
that month's handoffs. Any other month's rows, and the DEFAULT partition's, go in batches.

A customer's own rows outside any conversation (a memory of facts) are not the purge's: they keep their own expiry.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from auditlog.context import disable_auditlog
from django.conf import settings
from django.db import connection, transaction
from django.db.models import SET_NULL, Exists, ForeignObjectRel, Min, Model, OuterRef, Q, QuerySet
from django.utils import timezone

from common.priority import run_lowered
from conversations.customer_data.registry import HOLDERS, ROOT, Holder
from conversations.models import Conversation, Message
from conversations.signals import store_rows_retiring
from handoffs.models import Handoff
from handoffs.public import MonthPartition, month_partitions, partition_drop, partition_rows
from tenants.models import RetentionPurge, Tenant

REST_MAX_SECONDS = 5.0


@dataclass(frozen=True)
class Purge:
    """What one purge of one tenant did (or, dry, would do): rows per model label, in how many batches and seconds."""

    tenant: str
    window_days: int
    cutoff: dt.datetime
    counts: dict[str, int]
    batches: int
    seconds: float
    record_id: int | None = None  # None: a dry run, or nothing had expired
    handoff_months: tuple[str, ...] = ()  # agent_handoffs' months (YYYY-MM) dropped (dry: to drop) with its rows


def retention_cutoff(*, window_days: int, now: dt.datetime | None = None) -> dt.datetime:
    """The UTC midnight ``window_days`` before today's: rows written before it are past the window."""
    today = (now or timezone.now()).astimezone(dt.UTC).date()
    return dt.datetime.combine(today - dt.timedelta(days=window_days), dt.time.min, tzinfo=dt.UTC)


def conversations_expired(*, tenant_id: int, cutoff: dt.datetime) -> QuerySet[Conversation]:
    """The tenant's conversations last updated before ``cutoff`` with no message since, on the index
    ``conversation_tenant_recent``."""
    since = Message.objects.filter(conversation_id=OuterRef("pk"), created_at__gte=cutoff)
    return Conversation.objects.filter(tenant_id=tenant_id, updated_at__lt=cutoff).exclude(Exists(since))


def _reach(holder: Holder, conversations: list[Conversation]) -> Q:
    assert holder.of_conversations is not None
    return holder.of_conversations(conversations)


_CONVERSATION_HOLDERS = tuple(holder for holder in reversed(HOLDERS[1:]) if holder.of_conversations is not None)


def _batch_count(conversations: list[Conversation]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for holder in _CONVERSATION_HOLDERS:
        counts[holder.label] += holder.rows(_reach(holder, conversations)).count()
    counts[ROOT.label] += len(conversations)
    return counts


def _batch_delete(conversations: list[Conversation]) -> Counter[str]:
    """Every holder's rows of the conversations, children first, then the conversations: rows per model label."""
    counts: Counter[str] = Counter()
    pks = [conversation.pk for conversation in conversations]
    # Unrecorded: the field history would write each deleted row's values (a customer's words) into a new entry.
    with disable_auditlog():
        for holder in _CONVERSATION_HOLDERS:
            if holder.model is Message:
                counts[holder.label] += _rows_delete(Message, "conversation_id", pks)
            else:
                counts.update(holder.rows(_reach(holder, conversations)).delete()[1])
        counts[ROOT.label] += _rows_delete(Conversation, "id", pks)
    return counts


def _rows_delete(model: type[Model], column: str, values: list[int]) -> int:
    """Delete ``model``'s rows whose ``column`` (its field's name too) is one of ``values`` in one statement; how many
    went.

    For the two holders of a row per turn or per conversation — messages, conversations —, whose children the holders
    before them have deleted: ``QuerySet.delete`` would read every row back and delete again, child table by child
    table, what is gone already (16 of a batch's 40 statements). Relations that set null on delete are set first; a
    child row no holder deleted fails the batch's commit on its foreign key (checked at commit) rather than going
    unseen. No signal is sent: neither model has a receiver, and the field history is off for the purge."""
    rows = model._base_manager.filter(**{f"{column}__in": values})
    for relation in model._meta.get_fields(include_hidden=True):  # hidden ones too: a related_name of "+"
        if isinstance(relation, ForeignObjectRel) and relation.on_delete is SET_NULL:
            name = relation.field.name
            relation.field.model._base_manager.filter(**{f"{name}__in": rows.values("pk")}).update(**{name: None})
    table, where = connection.ops.quote_name(model._meta.db_table), connection.ops.quote_name(column)
    marks = ", ".join(["%s"] * len(values))
    with connection.cursor() as cursor:  # names quoted, values bound
        cursor.execute(f"DELETE FROM {table} WHERE {where} IN ({marks})", values)  # noqa: S608
        return cursor.rowcount
        return cursor.rowcount


def _commit_unsynced() -> None:
    """This transaction's commit does not wait for the disk (PostgreSQL; see the module)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")


def _batch(*, tenant_id: int, cutoff: dt.datetime, after: int, size: int, dry_run: bool) -> tuple[int, Counter[str]]:
    """One batch, in the caller's transaction: the next ``size`` expired conversations after pk ``after`` that no
    turn holds. Returns the last pk looked at (0: none left) and the rows deleted (or, dry, to delete)."""
    expired = conversations_expired(tenant_id=tenant_id, cutoff=cutoff).filter(pk__gt=after).order_by("pk")
    pks = list(expired.values_list("pk", flat=True)[:size])
    if not pks:
        return 0, Counter()
    locked = list(
        expired.filter(pk__in=pks).select_related("profile").select_for_update(of=("self",), skip_locked=True)
    )
    if not locked:
        return pks[-1], Counter()
    return pks[-1], (_batch_count(locked) if dry_run else _batch_delete(locked))


def retention_purge(
    *,
    tenant: Tenant,
    now: dt.datetime | None = None,
    dry_run: bool = False,
    batch_size: int | None = None,
    pause_seconds: float | None = None,
) -> Purge | None:
    """Purge the tenant's expired conversations (see the module); ``dry_run``: count the rows that would go and change
    nothing. None when the tenant keeps its conversations forever. Batches and pause default to the settings. Runs
    at a lower CPU priority than the caller's (``RETENTION_PURGE_NICE``, :func:`common.priority.run_lowered`)."""
    return run_lowered(
        lambda: _tenant_purge(
            tenant=tenant, now=now, dry_run=dry_run, batch_size=batch_size, pause_seconds=pause_seconds
        ),
        steps=settings.RETENTION_PURGE_NICE,
    )


def _tenant_purge(
    *,
    tenant: Tenant,
    now: dt.datetime | None,
    dry_run: bool,
    batch_size: int | None = None,
    pause_seconds: float | None = None,
    months: Iterable[MonthDropped] = (),
) -> Purge | None:
    """:func:`retention_purge` in the caller's thread. ``months``: agent_handoffs' months :func:`retention_purge_all`
    dropped (dry: would drop), whose rows of this tenant the purge counts (dry: the batches count them)."""
    window_days = tenant.retention_window_days()
    if window_days is None:
        return None
    most = batch_size or settings.RETENTION_PURGE_BATCH
    pause = settings.RETENTION_PURGE_PAUSE_SECONDS if pause_seconds is None else pause_seconds
    rest = (1 - settings.RETENTION_PURGE_SHARE) / settings.RETENTION_PURGE_SHARE  # seconds rested a second of work
    rate = 0.0 if dry_run else float(settings.RETENTION_PURGE_ROWS_PER_SECOND)  # 0: as the share allows
    size = 1 if rate else most  # paced: one conversation first, to learn what one holds
    cutoff = retention_cutoff(window_days=window_days, now=now)
    started = time.monotonic()
    counts: Counter[str] = Counter()
    mine = [month for month in months if month.rows.get(tenant.pk)]
    if not dry_run:
        counts[Handoff._meta.label] += sum(month.rows[tenant.pk] for month in mine)
    batches = 0
    record = None
    first = conversations_expired(tenant_id=tenant.pk, cutoff=cutoff).aggregate(since=Min("created_at"))["since"]
    if first is not None and not dry_run:
        record = RetentionPurge.objects.create(
            tenant=tenant, window_days=window_days, cutoff=cutoff, counts=_sorted(counts)
        )
        store_rows_retiring.send(sender=Conversation, since=first, before=cutoff)
    after = 0
    paced = (0, 0)  # rows and conversations the batches deleted
    while first is not None:
        began = time.monotonic()
        with transaction.atomic():
            _commit_unsynced()
            after, done = _batch(tenant_id=tenant.pk, cutoff=cutoff, after=after, size=size, dry_run=dry_run)
            if not after:
                break
            counts.update(done)
            batches += 1
            if record is not None:
                RetentionPurge.objects.filter(pk=record.pk).update(counts=_sorted(counts), batches=batches)
        resting = max(float(pause), min((time.monotonic() - began) * rest, REST_MAX_SECONDS))
        if rate:
            rows = sum(done.values())
            paced = (paced[0] + rows, paced[1] + done[ROOT.label])
            resting = max(resting, rows / rate)
            size = _batch_paced(most=most, rate=rate, rows=paced[0], conversations=paced[1])
        if resting:
            time.sleep(resting)
    seconds = time.monotonic() - started
    if record is not None:
        RetentionPurge.objects.filter(pk=record.pk).update(finished_at=timezone.now(), seconds=seconds)
    return Purge(
        tenant=tenant.slug,
        window_days=window_days,
        cutoff=cutoff,
        counts=_sorted(counts),
        batches=batches,
        seconds=seconds,
        record_id=record.pk if record is not None else None,
        handoff_months=tuple(f"{month.partition.start:%Y-%m}" for month in mine),
    )


def _batch_paced(*, most: int, rate: float, rows: int, conversations: int) -> int:
    """The conversations of about a second of rows at ``rate``, by the rows a conversation has had so far; 1 to
    ``most``."""
    if not conversations:
        return most
    return max(1, min(most, int(rate * conversations / max(rows, 1))))


def _sorted(counts: Counter[str]) -> dict[str, int]:
    return {label: count for label, count in sorted(counts.items()) if count}


def retention_purge_all(*, now: dt.datetime | None = None, dry_run: bool = False) -> list[Purge]:
    """:func:`retention_purge` every tenant whose conversations are not kept forever (inactive ones too), by slug,
    after dropping (dry: naming) agent_handoffs' months that may go whole (see the module); at a lower CPU priority,
    as :func:`retention_purge`."""
    return run_lowered(lambda: _purge_all(now=now, dry_run=dry_run), steps=settings.RETENTION_PURGE_NICE)


def _purge_all(*, now: dt.datetime | None, dry_run: bool) -> list[Purge]:
    tenants = list(Tenant.objects.order_by("slug"))
    months = handoff_months_expired(tenants=tenants, now=now)
    if not dry_run:
        for month in months:
            store_rows_retiring.send(sender=Conversation, since=month.partition.start, before=month.partition.end)
            partition_drop(month.partition)
    purges = []
    for tenant in tenants:
        purge = _tenant_purge(tenant=tenant, now=now, dry_run=dry_run, months=months)
        if purge is not None:
            purges.append(purge)
    return purges


@dataclass(frozen=True)
class MonthDropped:
    """An agent_handoffs month that may be dropped whole, and its rows per tenant id."""

    partition: MonthPartition
    rows: dict[int, int]


def handoff_months_expired(*, tenants: list[Tenant], now: dt.datetime | None = None) -> list[MonthDropped]:
    """agent_handoffs' months (none but on PostgreSQL) whose every row is of a tenant whose cutoff has passed the
    month's end and of a conversation that tenant's purge takes, with their rows per tenant id."""
    partitions = month_partitions()
    if not partitions:
        return []
    cutoffs: dict[int, dt.datetime | None] = {}
    for tenant in tenants:
        window_days = tenant.retention_window_days()
        cutoffs[tenant.pk] = None if window_days is None else retention_cutoff(window_days=window_days, now=now)
    latest = max((cutoff for cutoff in cutoffs.values() if cutoff is not None), default=None)
    return [
        MonthDropped(partition=partition, rows=partition_rows(partition))
        for partition in partitions
        if latest is not None and partition.end <= latest and _month_expired(partition, cutoffs)
    ]


def _month_expired(partition: MonthPartition, cutoffs: dict[int, dt.datetime | None]) -> bool:
    month = Handoff.objects.filter(created_at__gte=partition.start, created_at__lt=partition.end)
    for tenant_id, cutoff in cutoffs.items():
        theirs = month.filter(tenant_id=tenant_id)
        if not theirs.exists():
            continue
        if cutoff is None or cutoff < partition.end:
            return False
        expired = conversations_expired(tenant_id=tenant_id, cutoff=cutoff).filter(pk=OuterRef("conversation_id"))
        if theirs.exclude(Exists(expired)).exists():
            return False
    return True
