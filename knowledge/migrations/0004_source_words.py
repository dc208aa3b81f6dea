"""Each source's words and how many of its passages hold each (``KnowledgeWord``), filled from the passages already
stored; on PostgreSQL a trigram index on the folded words, which a search reads a misspelt word against."""

import django.db.models.deletion
from django.db import migrations, models

from knowledge.words import word_forms, words_counted

TRIGRAM_INDEX = "knowledge_word_folded_trgm"


def words_fill(apps, schema_editor):
    source_model = apps.get_model("knowledge", "KnowledgeSource")
    passage_model = apps.get_model("knowledge", "KnowledgePassage")
    word_model = apps.get_model("knowledge", "KnowledgeWord")
    for source in source_model.objects.all().iterator():
        passages = passage_model.objects.filter(document__source=source).values_list("heading", "text")
        counts = words_counted(passages.iterator(chunk_size=2000))
        rows = (
            word_model(source=source, word=word, folded=folded, stem=stem, passages=count)
            for word, count in counts.items()
            for _, folded, stem in [word_forms(word)]
        )
        word_model.objects.bulk_create(rows, batch_size=2000)


def index_create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"CREATE INDEX {TRIGRAM_INDEX} ON knowledge_knowledgeword USING gin (folded gin_trgm_ops)"
        )


def index_drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {TRIGRAM_INDEX}")


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0003_routing_editors_edit_knowledge")]

    operations = [
        migrations.CreateModel(
            name="KnowledgeWord",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("word", models.CharField(max_length=64)),
                ("folded", models.CharField(max_length=64)),
                ("stem", models.CharField(max_length=8)),
                ("passages", models.IntegerField(default=0)),
                (
                    "source",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="knowledge.knowledgesource"
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["source", "stem"], name="knowledge_word_stem")],
                "constraints": [models.UniqueConstraint(fields=("source", "word"), name="knowledge_word_unique")],
            },
        ),
        migrations.RunPython(index_create, index_drop),
        migrations.RunPython(words_fill, migrations.RunPython.noop),
    ]
