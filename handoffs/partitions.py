"""The ``agent_handoffs`` table by month, on PostgreSQL: its partitions, made ahead, and a month dropped whole.

On PostgreSQL the table is partitioned by RANGE of ``created_at``, one partition a calendar month (UTC), named
``agent_handoffs_pYYYY_MM``, and a DEFAULT partition that takes any row of a month without one, so an insert never
fails (migration ``0011_partition_by_month``; why and what it costs: ``docs/decisions/history-partitioning.md``). Its
primary key is ``(id, created_at)``, as PostgreSQL requires; Django still knows ``id`` alone, unique through its
sequence. Elsewhere (SQLite) the table is a plain one and every function here does nothing.

:func:`partitions_ensure` makes the months from this one to :data:`MONTHS_AHEAD` ahead (the periodic task and
``manage.py handoff_partitions``), and the months of any row the DEFAULT partition holds, moving those rows into
them: idempotent. :func:`partition_drop` drops one month (the retention purge decides which,
``conversations/customer_data/retention.py``). Each change takes its locks with a ``lock_timeout`` of
:data:`LOCK_TIMEOUT`: a change that would wait on a long read gives up, and the next run tries again, rather than
queueing the message path's inserts behind it.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone

TABLE = "agent_handoffs"
DEFAULT_PARTITION = f"{TABLE}_default"
MONTHS_AHEAD = 3
LOCK_TIMEOUT = "2s"

_BOUNDS = re.compile(r"FOR VALUES FROM \('([^']+)'\) TO \('([^']+)'\)")


@dataclass(frozen=True, order=True)
class MonthPartition:
    """One month's partition: its rows' ``created_at`` in ``[start, end)``."""

    start: dt.datetime
    end: dt.datetime
    name: str


def month_start(moment: dt.datetime) -> dt.datetime:
    """The UTC midnight of the first day of ``moment``'s month."""
    moment = moment.astimezone(dt.UTC)
    return dt.datetime(moment.year, moment.month, 1, tzinfo=dt.UTC)


def month_next(start: dt.datetime) -> dt.datetime:
    """The first moment of the month after ``start``'s."""
    return dt.datetime(start.year + start.month // 12, start.month % 12 + 1, 1, tzinfo=dt.UTC)


def partition_name(start: dt.datetime) -> str:
    return f"{TABLE}_p{start:%Y_%m}"


def month_bounds(start: dt.datetime) -> str:
    """The partition bound of ``start``'s month, as SQL (DDL takes no parameters)."""
    return f"FOR VALUES FROM ('{start.isoformat()}') TO ('{month_next(start).isoformat()}')"


def handoffs_partitioned() -> bool:
    """Whether ``agent_handoffs`` is a partitioned table (PostgreSQL, migrated)."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [TABLE])
        row = cursor.fetchone()
    return row is not None and row[0] == "p"


def month_partitions() -> list[MonthPartition]:
    """The table's partitions of a range (every one but the DEFAULT), oldest first; [] when it is not partitioned."""
    if not handoffs_partitioned():
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
            "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass(%s)",
            [TABLE],
        )
        found = []
        for name, bound in cursor.fetchall():
            matched = _BOUNDS.fullmatch(bound)
            if matched is not None:
                start, end = (dt.datetime.fromisoformat(each) for each in matched.groups())
                found.append(MonthPartition(start=start, end=end, name=name))
    return sorted(found)


def partitions_ensure(
    *, now: dt.datetime | None = None, ahead: int = MONTHS_AHEAD, since: dt.datetime | None = None
) -> list[str]:
    """Make the partitions of this month and ``ahead`` months after it (from ``since``'s month when given: rows about
    to be written back-dated), and of every month the DEFAULT partition holds rows of (those rows move into it); the
    names made, [] when nothing was missing or the table is not partitioned. Each month is made in a transaction of
    its own (see the module for its locks)."""
    if not handoffs_partitioned():
        return []
    last = month_start(now or timezone.now())
    for _ in range(ahead):
        last = month_next(last)
    months = [month_start(min(since, last)) if since is not None else month_start(now or timezone.now())]
    while months[-1] < last:
        months.append(month_next(months[-1]))
    months.extend(_default_months())
    have = {partition.start for partition in month_partitions()}
    made = []
    for start in sorted(set(months) - have):
        _month_make(start)
        made.append(partition_name(start))
    return made


def _default_months() -> list[dt.datetime]:
    """The months of the rows in the DEFAULT partition, read on its ``created_at`` index (a skip from month to
    month: as many index probes as months)."""
    quote = connection.ops.quote_name
    months = []
    after: dt.datetime | None = dt.datetime.min.replace(tzinfo=dt.UTC)
    with connection.cursor() as cursor:
        while after is not None:
            cursor.execute(
                f"SELECT MIN(created_at) FROM {quote(DEFAULT_PARTITION)} WHERE created_at >= %s",  # noqa: S608
                [after],
            )
            oldest = cursor.fetchone()[0]
            if oldest is None:
                break
            months.append(month_start(oldest))
            after = month_next(months[-1])
    return months


def _month_make(start: dt.datetime) -> None:
    """One month's partition: made as a table of the parent's shape, given the DEFAULT partition's rows of that
    month, then attached (which takes a lighter lock on the parent than ``CREATE TABLE … PARTITION OF``)."""
    quote = connection.ops.quote_name
    end = month_next(start)
    name, parent, default = quote(partition_name(start)), quote(TABLE), quote(DEFAULT_PARTITION)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
        cursor.execute(f"CREATE TABLE {name} (LIKE {parent} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)")
        cursor.execute(f"LOCK TABLE {default} IN SHARE ROW EXCLUSIVE MODE")  # no row of the month comes in meanwhile
        cursor.execute(
            f"WITH moved AS (DELETE FROM {default} WHERE created_at >= %s AND created_at < %s RETURNING *) "  # noqa: S608
            f"INSERT INTO {name} SELECT * FROM moved",
            [start, end],
        )
        cursor.execute(f"ALTER TABLE {parent} ATTACH PARTITION {name} {month_bounds(start)}")


def partition_rows(partition: MonthPartition) -> dict[int, int]:
    """The partition's rows per tenant id."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT tenant_id, COUNT(*) FROM {connection.ops.quote_name(partition.name)} GROUP BY tenant_id"  # noqa: S608
        )
        return dict(cursor.fetchall())


def partition_drop(partition: MonthPartition) -> None:
    """Drop the month's partition and every row in it (see the module for its lock)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
        cursor.execute(f"DROP TABLE {connection.ops.quote_name(partition.name)}")
