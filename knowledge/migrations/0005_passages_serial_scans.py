"""PostgreSQL: no parallel workers for scans of the passages' table.

A search ranks at most ``knowledge.search.CANDIDATE_LIMIT`` of the passages holding its filtered words, the first
the full-text index returns: a serial scan returns the same ones every time, where parallel workers would each bring
theirs in whatever order they ran. The workers did not pay on the searches measured either (a scan of a few thousand
rows; starting them cost up to 50 ms on a loaded 2-core machine). SQLite: nothing to do.
"""

from django.db import migrations

TABLE = "knowledge_knowledgepassage"


def _run(statement: str):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0004_source_words")]

    operations = [
        migrations.RunPython(
            _run(f"ALTER TABLE {TABLE} SET (parallel_workers = 0)"), _run(f"ALTER TABLE {TABLE} RESET (parallel_workers)")
        ),
    ]
