"""The passages' stems written again on SQLite for what ``agents.stems.word_bases`` reads of an English word since: a
noun in *-ment* has its verb's stems too (*payment* those of *pay*), a word negated by *un-* those of the word it
negates (*unpaid* those of *paid*).

On SQLite every passage's stems are written again and the full-text table made again with them, as migration 0014
did (its function). PostgreSQL keeps no stems (its configurations stem the tsvector): nothing to do there. Reversed,
nothing is undone: the stems read are a superset of what the code before read.
"""

import importlib

from django.db import migrations

_REWRITE = importlib.import_module("knowledge.migrations.0014_stems_of_diphthongs")
stems_rewrite = _REWRITE.stems_rewrite  # SQLite: every passage's stems written again, and the full-text table


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0014_stems_of_diphthongs")]

    operations = [migrations.RunPython(stems_rewrite, migrations.RunPython.noop)]
