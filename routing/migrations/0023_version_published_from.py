"""Where a version was published, for the versions nobody signed: the admin says "published by an import" or "by the
demo set-up" instead of "by someone". Versions stored before are read from their notes, which the demo set-up and
the import wrote: the rest stay unrecorded (blank)."""

from django.db import migrations, models

DEMO_NOTES = ("Demo import (config/demo)", "Demo reloaded (config/demo, --force)")  # seed_demo's notes
IMPORT_NOTE = "Imported from "  # import_config --publish's note


def published_from_notes(apps, schema_editor):
    RoutingVersion = apps.get_model("routing", "RoutingVersion")
    unsigned = RoutingVersion.objects.filter(created_by__isnull=True, published_from="")
    unsigned.filter(note__in=DEMO_NOTES).update(published_from="demo")
    unsigned.filter(note__startswith=IMPORT_NOTE).update(published_from="import")


class Migration(migrations.Migration):
    dependencies = [
        ("routing", "0022_help_texts_without_docs_paths"),
    ]

    operations = [
        migrations.AddField(
            model_name="routingversion",
            name="published_from",
            field=models.CharField(
                blank=True,
                choices=[
                    ("admin", "the admin"),
                    ("command", "the command line"),
                    ("import", "an import"),
                    ("demo", "the demo set-up"),
                ],
                help_text="Where it was published: the admin, the command line, an import or the demo set-up "
                "(blank: not recorded).",
                max_length=16,
            ),
        ),
        migrations.RunPython(published_from_notes, migrations.RunPython.noop),
    ]
