"""Tenant and ApiKey move here from routing; their tables keep their names."""

import django.db.models.deletion
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
                    name='Tenant',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('slug', models.SlugField(help_text='The tenant_id in conversation keys.', max_length=64, unique=True)),
                        ('name', models.CharField(blank=True, max_length=200)),
                        ('is_active', models.BooleanField(default=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        'db_table': 'routing_tenant',
                        'ordering': ['slug'],
                    },
                ),
                migrations.CreateModel(
                    name='ApiKey',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(blank=True, max_length=200)),
                        ('prefix', models.CharField(db_index=True, editable=False, max_length=16)),
                        ('key_hash', models.CharField(editable=False, max_length=64, unique=True)),
                        ('is_debug', models.BooleanField(default=False, help_text='May call /api/debug/*.')),
                        ('can_preview', models.BooleanField(default=False, help_text='May call POST /api/chat/multi-agent/message.')),
                        ('is_active', models.BooleanField(default=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('last_used_at', models.DateTimeField(blank=True, editable=False, null=True)),
                        ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_keys', to='tenants.tenant')),
                    ],
                    options={
                        'verbose_name': 'API key',
                        'db_table': 'routing_apikey',
                        'ordering': ['-created_at'],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
