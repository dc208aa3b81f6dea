"""ConfigVersion moves here from routing (RoutingConfigVersion); its table keeps its name."""

from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('routing', '0010_conversation_handoff_kinds'),
    ]

    operations = [
        # The tables stay where they are: only Django's picture of which app owns them changes.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='ConfigVersion',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('version', models.BigIntegerField(default=0)),
                        ('changed_at', models.DateTimeField(auto_now=True)),
                    ],
                    options={
                        'verbose_name': 'configuration version',
                        'db_table': 'routing_routingconfigversion',
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
