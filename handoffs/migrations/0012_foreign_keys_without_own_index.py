"""The foreign keys ``conversation``, ``tenant`` and ``profile`` of ``agent_handoffs`` keep no index of their own:
each is the leading column of a wider index of the table (``agent_handoffs_conv_time``, ``agent_handoffs_tenant_time``,
``agent_handoffs_version_cover``), which their lookups and the cascades of a delete read instead (tests/
test_foreign_key_indexes.py). Three index entries fewer on every handoff written.

Only the indexes are dropped (on PostgreSQL each with the monthly partitions' copies): altering the fields as Django
does would drop the foreign keys and add them again, checking every row of the table. Undone by making them again.
"""

import django.db.models.deletion
from django.db import migrations, models

INDEXES = (  # the field's index, as Django named it, and its column
    ("agent_handoffs_conversation_id_2c34b379", "conversation_id"),
    ("agent_handoffs_profile_id_6ab67e7e", "profile_id"),
    ("agent_handoffs_tenant_id_4907c2ff", "tenant_id"),
)


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0034_extract_facts_without_summary"),
        ("conversations", "0029_analytics_live_day_covering"),
        ("handoffs", "0011_partition_by_month"),
        ("tenants", "0005_retention"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="handoff",
                    name="conversation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="handoffs",
                        to="conversations.conversation",
                    ),
                ),
                migrations.AlterField(
                    model_name="handoff",
                    name="profile",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="agents.agentprofile",
                    ),
                ),
                migrations.AlterField(
                    model_name="handoff",
                    name="tenant",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="tenants.tenant",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{name}"',
                    f'CREATE INDEX IF NOT EXISTS "{name}" ON "agent_handoffs" ("{column}")',
                )
                for name, column in INDEXES
            ],
        ),
    ]
