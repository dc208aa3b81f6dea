"""PostgreSQL: the passages' tsvectors kept in the table's rows, out of TOAST storage. SQLite: nothing to do.

A search ranks up to ``knowledge.search.CANDIDATE_LIMIT`` passages with ``ts_rank`` over each one's tsvector. With
the column's default storage (``EXTENDED``) a row over about 2 kB (a passage of several hundred characters: its text
plus its tsvector) has its largest value, the tsvector, compressed and then moved to the TOAST table, so ranking a
candidate read its heap row and then its TOAST chunks through the TOAST index. ``SET STORAGE MAIN`` keeps the
tsvector in the row (compressed if the row is still too large once the text, ``EXTENDED``, has been compressed or
moved out); PostgreSQL moves a ``MAIN`` value out only when the row would not fit in a page otherwise, which a
passage (text up to 1,200 characters, heading up to 500, and their tsvector) does not reach.

The storage applies to rows written from then on; the rows already written are rewritten here, in batches of
:data:`BATCH` passages each committed on its own (the migration is not atomic): ``search_vector || ''::tsvector``
makes a new value (assigning the column to itself would keep the same TOAST pointer, and the value where it was).
Batches keep each transaction's row locks and the dead rows it leaves for autovacuum small, while searches and
uploads go on; ``VACUUM FULL`` would also move the values, but holds an exclusive lock on the table, searches
included, for the whole rewrite. Run again, the rewrite finds no row left in TOAST storage to move but rewrites the
rows all the same; it is idempotent. Reversed, the storage is ``EXTENDED`` again for new rows and the rows are left
where they are.
"""

from django.db import migrations

TABLE = "knowledge_knowledgepassage"
COLUMN = "search_vector"
BATCH = 5_000


def keep_in_row(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {TABLE} ALTER COLUMN {COLUMN} SET STORAGE MAIN")
        cursor.execute(f"SELECT coalesce(min(id), 0), coalesce(max(id), -1) FROM {TABLE}")  # noqa: S608
        low, high = cursor.fetchone()
    for start in range(low, high + 1, BATCH):
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {TABLE} SET {COLUMN} = {COLUMN} || ''::tsvector "  # noqa: S608
                f"WHERE id >= %s AND id < %s AND {COLUMN} IS NOT NULL",
                [start, start + BATCH],
            )


def back_to_extended(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE {TABLE} ALTER COLUMN {COLUMN} SET STORAGE EXTENDED")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("knowledge", "0005_passages_serial_scans")]

    operations = [migrations.RunPython(keep_in_row, back_to_extended)]
