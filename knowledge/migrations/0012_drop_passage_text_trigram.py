"""The trigram index on the passages' text goes: no search reads it since the ranking is ``ts_rank`` alone (a
misspelt word is read against the sources' words, through their own trigram index), and every passage written kept
it up to date. PostgreSQL only; SQLite never had it."""

from django.db import migrations

INDEX = "knowledge_passage_text_trgm"


def index_drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


def index_create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"CREATE INDEX {INDEX} ON knowledge_knowledgepassage USING gin (text gin_trgm_ops)")


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0011_source_synonyms")]

    operations = [migrations.RunPython(index_drop, index_create)]
