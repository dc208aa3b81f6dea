"""The ``multi_agent`` flag's description, shown in the admin, in plain words: a database made before they changed
keeps the old text until this rewords it (only when nobody edited it since)."""

from django.db import migrations

OLD = (
    "Route users to the multi-agent graph on POST /api/chat/message; the others stay on the single-agent "
    "path (seed 003: admin only, then 10%, then 100%; the kill switch is the instant rollback)."
)
NEW = (
    "Route users to the multi-agent graph on POST /api/chat/message; the others stay on the single-agent "
    "path (admins only, then 10%, then 100%; the kill switch is the instant rollback)."
)


def reword(apps, schema_editor):
    RolloutFlag = apps.get_model("routing", "RolloutFlag")
    RolloutFlag.objects.using(schema_editor.connection.alias).filter(key="multi_agent", description=OLD).update(
        description=NEW
    )


def restore(apps, schema_editor):
    RolloutFlag = apps.get_model("routing", "RolloutFlag")
    RolloutFlag.objects.using(schema_editor.connection.alias).filter(key="multi_agent", description=NEW).update(
        description=OLD
    )


class Migration(migrations.Migration):
    dependencies = [("routing", "0030_routing_editors_read_external_desks")]

    operations = [migrations.RunPython(reword, restore)]
