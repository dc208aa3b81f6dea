"""A GIN index of the field history's recorded changes (auditlog's ``changes``), on PostgreSQL: an object's History
page finds the entries of its deleted children (an intent's removed keyword) by what they recorded
(``changes @> {"intent": ["12"]}``, ``common.history.admin.history_entries``), which without it reads every entry of
the child's model. Other databases have no such index, nor the lookup it serves: nothing to do there."""

from django.db import migrations

INDEX = "common_history_changes_gin"


def index_create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        table = schema_editor.quote_name(apps.get_model("auditlog", "LogEntry")._meta.db_table)
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {INDEX} ON {table} USING gin (changes jsonb_path_ops)")


def index_drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [
        ("common", "0002_history_addresses_masked"),
        ("auditlog", "0017_add_actor_email"),
    ]

    operations = [migrations.RunPython(index_create, index_drop)]
