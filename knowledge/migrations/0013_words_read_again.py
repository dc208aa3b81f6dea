"""The passages stored read again for what ``knowledge.words`` reads of them since: a compound written with a hyphen
is a word of its own ("Wi-Fi" is ``wifi`` beside ``wi`` and ``fi``), and a word has the Snowball stems of its base
too (``agents.stems.word_bases``: *lentísimo* those of *lento*).

Each source's words (``KnowledgeWord``) are counted again from its passages, on either engine: a search reads a
question's word against them (PostgreSQL's spellings of it, the passages a filter on it brings). On SQLite the
passages' stems are written again in batches, which the full-text table's update trigger indexes (migration 0010).
Reversed, nothing is undone: the words and stems read are a superset of what the code before read.
"""

from django.db import migrations

from knowledge.words import passage_stems, word_forms, words_counted

BATCH = 2000


def words_recount(apps, schema_editor):
    """Each source's words counted again from every passage it holds (the documents kept for versions too)."""
    source_model = apps.get_model("knowledge", "KnowledgeSource")
    passage_model = apps.get_model("knowledge", "KnowledgePassage")
    word_model = apps.get_model("knowledge", "KnowledgeWord")
    for source in source_model.objects.all().iterator():
        passages = passage_model.objects.filter(document__source=source).values_list("heading", "text")
        counts = words_counted(passages.iterator(chunk_size=BATCH))
        word_model.objects.filter(source=source).delete()
        rows = (
            word_model(source=source, word=word, folded=folded, stem=stem, passages=count)
            for word, count in counts.items()
            for _, folded, stem in [word_forms(word)]
        )
        word_model.objects.bulk_create(rows, batch_size=BATCH)


def stems_rewrite(apps, schema_editor):
    """SQLite: every passage's stems written again (PostgreSQL stems in its configurations, and keeps none)."""
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


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0012_drop_passage_text_trigram")]

    operations = [
        migrations.RunPython(words_recount, migrations.RunPython.noop),
        migrations.RunPython(stems_rewrite, migrations.RunPython.noop),
    ]
