"""The passages stored read again for what ``knowledge.words`` reads of them since: a compound written with a hyphen
is a word of its own ("Wi-Fi" is ``wifi`` beside ``wi`` and ``fi``), and a word has the Snowball stems of its bases
too (``agents.stems.word_bases``: *horário* those of ``hor``, *lentísimo* those of *lento*).

Each source's words (``KnowledgeWord``) are counted again from its passages, on either engine, as migration 0004 first
counted them: a search reads a question's word against them (PostgreSQL's spellings of it, the passages a filter on it
brings). On SQLite every passage's stems are written again and the full-text table made again with them, as migration
0010 first wrote them. Reversed, nothing is undone: the words and stems read are a superset of what the code before
read.
"""

import importlib

from django.db import migrations

_WORDS = importlib.import_module("knowledge.migrations.0004_source_words")
_STEMS = importlib.import_module("knowledge.migrations.0010_passage_stems")


def words_recount(apps, schema_editor):
    """Each source's words counted again from every passage it holds (the documents kept for versions too)."""
    apps.get_model("knowledge", "KnowledgeWord").objects.all().delete()
    _WORDS.words_fill(apps, schema_editor)


def stems_rewrite(apps, schema_editor):
    """SQLite: every passage's stems written again, and the full-text table with them (PostgreSQL keeps none)."""
    _STEMS.fts_drop(apps, schema_editor)
    _STEMS.stems_fill(apps, schema_editor)


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0012_drop_passage_text_trigram")]

    operations = [
        migrations.RunPython(words_recount, migrations.RunPython.noop),
        migrations.RunPython(stems_rewrite, migrations.RunPython.noop),
    ]
