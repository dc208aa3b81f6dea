"""On PostgreSQL, ``agent_handoffs`` becomes a table partitioned by month of ``created_at`` (handoffs/partitions.py),
its rows kept: the table is renamed away, a partitioned one of the same columns takes its name, with a partition
for each month its rows fall in, the months ahead and a DEFAULT one; the rows are copied over, the id sequence
carried on, the old table dropped, then the primary key — ``(id, created_at)``, which PostgreSQL requires of a
partitioned table — and the same indexes and foreign keys, under the same names, are made again. Undone the same way
into a plain table. SQLite: nothing (no partitioning there). Django's state is untouched: the model keeps ``id``.

While it runs the table is held (a copy of every row): at millions of handoffs, minutes
(docs/decisions/history-partitioning.md).
"""

from __future__ import annotations

from django.db import migrations
from django.utils import timezone

from handoffs.partitions import DEFAULT_PARTITION, MONTHS_AHEAD, TABLE, month_bounds, month_next, month_start, partition_name

OLD = f"{TABLE}_unpartitioned"


def _rebuild(schema_editor, *, partitioned: bool) -> None:
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    quote = connection.ops.quote_name
    table, old = quote(TABLE), quote(OLD)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = to_regclass(%s) AND NOT i.indisprimary ORDER BY c.relname",
            [TABLE],
        )
        indexes = cursor.fetchall()
        cursor.execute(
            "SELECT conname, contype, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = to_regclass(%s) AND contype IN ('f', 'p') ORDER BY conname",
            [TABLE],
        )
        constraints = cursor.fetchall()
        primary = next(name for name, kind, _ in constraints if kind == "p")
        cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [TABLE])
        (sequence,) = cursor.fetchone()
        cursor.execute(f"SELECT last_value, is_called FROM {sequence}")  # noqa: S608 (the catalogue's name)
        last_value, is_called = cursor.fetchone()

        # The names go with the old table's objects: they are made again on the new one.
        cursor.execute(f"ALTER TABLE {table} RENAME TO {old}")
        for name, _ in indexes:
            cursor.execute(f"DROP INDEX {quote(name)}")
        for name, _, _ in constraints:
            cursor.execute(f"ALTER TABLE {old} DROP CONSTRAINT {quote(name)}")
        layout = " PARTITION BY RANGE (created_at)" if partitioned else ""
        cursor.execute(
            f"CREATE TABLE {table} (LIKE {old} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING IDENTITY){layout}"
        )
        if partitioned:
            cursor.execute(f"CREATE TABLE {quote(DEFAULT_PARTITION)} PARTITION OF {table} DEFAULT")
            cursor.execute(f"SELECT MIN(created_at) FROM {old}")  # noqa: S608
            oldest = cursor.fetchone()[0]
            start = month_start(min(oldest or timezone.now(), timezone.now()))
            last = month_start(timezone.now())
            for _ in range(MONTHS_AHEAD):
                last = month_next(last)
            cursor.execute(f"SELECT MAX(created_at) FROM {old}")  # noqa: S608
            newest = cursor.fetchone()[0]
            last = max(last, month_start(newest)) if newest else last
            while start <= last:
                name = quote(partition_name(start))
                cursor.execute(f"CREATE TABLE {name} PARTITION OF {table} {month_bounds(start)}")
                start = month_next(start)
        cursor.execute(f"INSERT INTO {table} SELECT * FROM {old}")  # noqa: S608
        cursor.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'), %s, %s)", [TABLE, last_value, is_called])
        cursor.execute(f"DROP TABLE {old}")
        cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [TABLE])
        (made,) = cursor.fetchone()
        if made != sequence:  # the new one was named beside the old one: it takes the old one's name
            cursor.execute(f"ALTER SEQUENCE {made} RENAME TO {quote(sequence.rpartition('.')[2])}")

        key = "(id, created_at)" if partitioned else "(id)"
        cursor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {quote(primary)} PRIMARY KEY {key}")
        for _, definition in indexes:
            # A partitioned table's index reads "ON ONLY <table>": made again on the whole table.
            cursor.execute(definition.replace(" ON ONLY ", " ON ", 1))
        for name, kind, definition in constraints:
            if kind == "f":
                cursor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {quote(name)} {definition}")
        cursor.execute(f"ANALYZE {table}")


def partition(apps, schema_editor) -> None:
    _rebuild(schema_editor, partitioned=True)


def unpartition(apps, schema_editor) -> None:
    _rebuild(schema_editor, partitioned=False)


class Migration(migrations.Migration):
    dependencies = [("handoffs", "0010_human_handoff_kind")]

    operations = [migrations.RunPython(partition, unpartition, elidable=False)]
