"""The passages' stems written again on SQLite for what ``agents.stems.word_bases`` reads of a word since: Spanish's
stressed *ue* has the base with its root's *o* too (*resuelve* those of *resolve*, *cuesta* those of *costa*).

On SQLite every passage's stems are written again and the full-text table made again with them, as migrations 0010
and 0013 did. PostgreSQL keeps no stems (its configurations stem the tsvector) and its sources' words do not change:
nothing to do there. Reversed, nothing is undone: the stems read are a superset of what the code before read.
"""

import importlib

from django.db import migrations

_STEMS = importlib.import_module("knowledge.migrations.0010_passage_stems")


def stems_rewrite(apps, schema_editor):
    """SQLite: every passage's stems written again, and the full-text table with them (PostgreSQL keeps none)."""
    _STEMS.fts_drop(apps, schema_editor)
    _STEMS.stems_fill(apps, schema_editor)


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0013_words_read_again")]

    operations = [migrations.RunPython(stems_rewrite, migrations.RunPython.noop)]
