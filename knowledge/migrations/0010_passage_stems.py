"""The passages' Snowball stems (``stems``), which SQLite's FTS5 table indexes beside heading and text, so that a
search matches *billing* by *bill* and *troco* by *troca* as PostgreSQL's configurations do (``knowledge.words``).

On SQLite: the FTS5 table and its triggers (migration 0002) are made again with the ``stems`` column, the stems of
the passages already stored are written in batches, and the table is rebuilt from the passages. PostgreSQL adds the
column only (its tsvector is stemmed by the configurations already), and leaves it empty.
"""

from django.db import migrations, models

from knowledge.words import passage_stems

BATCH = 2000
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS knowledge_passage_fts_update",
    "DROP TRIGGER IF EXISTS knowledge_passage_fts_delete",
    "DROP TRIGGER IF EXISTS knowledge_passage_fts_insert",
    "DROP TABLE IF EXISTS knowledge_passage_fts",
]


def _sqlite_create(columns: list[str]) -> list[str]:
    """The FTS5 table over the passages' ``columns`` and the triggers that keep it in step, then its rebuild."""
    names = ", ".join(columns)
    new = ", ".join(f"new.{column}" for column in columns)
    old = ", ".join(f"old.{column}" for column in columns)
    return [
        f"CREATE VIRTUAL TABLE knowledge_passage_fts USING fts5({names}, content='knowledge_knowledgepassage', "
        "content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
        "CREATE TRIGGER knowledge_passage_fts_insert AFTER INSERT ON knowledge_knowledgepassage BEGIN "
        f"INSERT INTO knowledge_passage_fts(rowid, {names}) VALUES (new.id, {new}); END",
        "CREATE TRIGGER knowledge_passage_fts_delete AFTER DELETE ON knowledge_knowledgepassage BEGIN "
        f"INSERT INTO knowledge_passage_fts(knowledge_passage_fts, rowid, {names}) "
        f"VALUES ('delete', old.id, {old}); END",
        f"CREATE TRIGGER knowledge_passage_fts_update AFTER UPDATE OF {names} ON knowledge_knowledgepassage BEGIN "
        f"INSERT INTO knowledge_passage_fts(knowledge_passage_fts, rowid, {names}) "
        f"VALUES ('delete', old.id, {old}); "
        f"INSERT INTO knowledge_passage_fts(rowid, {names}) VALUES (new.id, {new}); END",
        "INSERT INTO knowledge_passage_fts(knowledge_passage_fts) VALUES ('rebuild')",
    ]


def _execute(schema_editor, statements: list[str]) -> None:
    if schema_editor.connection.vendor == "sqlite":
        for statement in statements:
            schema_editor.execute(statement)


def fts_drop(apps, schema_editor):
    _execute(schema_editor, SQLITE_DROP)


def stems_fill(apps, schema_editor):
    """SQLite: the stems of every passage stored, then the FTS5 table with them."""
    if schema_editor.connection.vendor != "sqlite":
        return
    passage_model = apps.get_model("knowledge", "KnowledgePassage")
    last = 0
    while True:
        batch = list(passage_model.objects.filter(pk__gt=last).order_by("pk").only("pk", "heading", "text")[:BATCH])
        if not batch:
            break
        for passage in batch:
            passage.stems = passage_stems(passage.heading, passage.text)
        passage_model.objects.bulk_update(batch, ["stems"])
        last = batch[-1].pk
    _execute(schema_editor, _sqlite_create(["heading", "text", "stems"]))


def fts_without_stems(apps, schema_editor):
    _execute(schema_editor, _sqlite_create(["heading", "text"]))


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0009_passage_embeddings")]

    operations = [
        migrations.RunPython(fts_drop, fts_without_stems),
        migrations.AddField(
            model_name="knowledgepassage",
            name="stems",
            field=models.TextField(blank=True, default="", editable=False),
        ),
        migrations.RunPython(stems_fill, fts_drop),
    ]
