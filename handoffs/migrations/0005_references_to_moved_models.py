"""The handoffs' foreign keys now name conversations.Conversation and tenants.Tenant (the same tables as before)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0001_initial'),
        ('handoffs', '0004_handoff_cohort'),
        ('tenants', '0001_initial'),
    ]

    operations = [
        # The tables stay where they are: only Django's picture of which app owns them changes.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='handoff',
                    name='conversation',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='handoffs', to='conversations.conversation'),
                ),
                migrations.AlterField(
                    model_name='handoff',
                    name='tenant',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tenants.tenant'),
                ),
            ],
            database_operations=[],
        ),
    ]
