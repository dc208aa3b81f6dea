"""The passages' search indexes, one set per engine.

PostgreSQL: the pg_trgm extension (trusted: the database's owner may create it), a GIN index on the passages'
tsvector and a trigram GIN index on their text. SQLite: an FTS5 table over the passages' heading and text (external
content: it stores only its index) and triggers that keep it in step with every insert, update and delete of a
passage, whatever path writes it — an upload, the admin's delete of a source and its cascade, a test's flush.

A later migration that makes SQLite rebuild the passages' table (most ``AlterField``) drops these triggers with the
old table: such a migration must create them again (:data:`SQLITE_FORWARDS`).
"""

from django.contrib.postgres.operations import TrigramExtension
from django.db import migrations

POSTGRES_FORWARDS = [
    "CREATE INDEX knowledge_passage_search_gin ON knowledge_knowledgepassage USING gin (search_vector)",
    "CREATE INDEX knowledge_passage_text_trgm ON knowledge_knowledgepassage USING gin (text gin_trgm_ops)",
]
POSTGRES_BACKWARDS = [
    "DROP INDEX IF EXISTS knowledge_passage_text_trgm",
    "DROP INDEX IF EXISTS knowledge_passage_search_gin",
]
SQLITE_FORWARDS = [
    "CREATE VIRTUAL TABLE knowledge_passage_fts USING fts5(heading, text, content='knowledge_knowledgepassage', "
    "content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER knowledge_passage_fts_insert AFTER INSERT ON knowledge_knowledgepassage BEGIN "
    "INSERT INTO knowledge_passage_fts(rowid, heading, text) VALUES (new.id, new.heading, new.text); END",
    "CREATE TRIGGER knowledge_passage_fts_delete AFTER DELETE ON knowledge_knowledgepassage BEGIN "
    "INSERT INTO knowledge_passage_fts(knowledge_passage_fts, rowid, heading, text) "
    "VALUES ('delete', old.id, old.heading, old.text); END",
    "CREATE TRIGGER knowledge_passage_fts_update AFTER UPDATE OF heading, text ON knowledge_knowledgepassage BEGIN "
    "INSERT INTO knowledge_passage_fts(knowledge_passage_fts, rowid, heading, text) "
    "VALUES ('delete', old.id, old.heading, old.text); "
    "INSERT INTO knowledge_passage_fts(rowid, heading, text) VALUES (new.id, new.heading, new.text); END",
    # Passages written before the table existed (none on a fresh database) are indexed too.
    "INSERT INTO knowledge_passage_fts(knowledge_passage_fts) VALUES ('rebuild')",
]
SQLITE_BACKWARDS = [
    "DROP TRIGGER IF EXISTS knowledge_passage_fts_update",
    "DROP TRIGGER IF EXISTS knowledge_passage_fts_delete",
    "DROP TRIGGER IF EXISTS knowledge_passage_fts_insert",
    "DROP TABLE IF EXISTS knowledge_passage_fts",
]


def _run(statements: dict[str, list[str]]):
    def run(apps, schema_editor):
        for statement in statements.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0001_sources_documents_passages")]

    operations = [
        TrigramExtension(),  # does nothing on SQLite
        migrations.RunPython(
            _run({"postgresql": POSTGRES_FORWARDS, "sqlite": SQLITE_FORWARDS}),
            _run({"postgresql": POSTGRES_BACKWARDS, "sqlite": SQLITE_BACKWARDS}),
        ),
    ]
