"""Runs of conversation tests kept (``ConversationTestRun``, a ``ConversationTestResult`` per test); the "Routing
editors" group may start runs (add) and see them (view)."""

import django.db.models.deletion
from django.conf import settings
from django.contrib.auth.management import create_permissions
from django.db import migrations, models

GROUP_NAME = "Routing editors"
PERMISSIONS = {
    ("routing", "conversationtestrun"): ("add", "view"),
}


def _permissions(apps, alias):
    Permission = apps.get_model("auth", "Permission")
    return [
        Permission.objects.using(alias).get(
            content_type__app_label=app_label, content_type__model=model, codename=f"{action}_{model}"
        )
        for (app_label, model), actions in PERMISSIONS.items()
        for action in actions
    ]


def grant(apps, schema_editor):
    alias = schema_editor.connection.alias
    # On a fresh database permissions are created by post_migrate, after every migration ran.
    app_config = apps.get_app_config("routing")
    app_config.models_module = True
    create_permissions(app_config, verbosity=0, apps=apps, using=alias)
    app_config.models_module = None
    group, _ = apps.get_model("auth", "Group").objects.using(alias).get_or_create(name=GROUP_NAME)
    group.permissions.add(*_permissions(apps, alias))


def revoke(apps, schema_editor):
    alias = schema_editor.connection.alias
    group = apps.get_model("auth", "Group").objects.using(alias).filter(name=GROUP_NAME).first()
    if group is not None:
        group.permissions.remove(*_permissions(apps, alias))


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0029_customer_memory'),
        ('routing', '0044_conversation_tests_keep_key_order'),
        ('tenants', '0005_retention'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ConversationTestRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('version', models.CharField(help_text='As asked: draft, live or a version number.', max_length=16)),
                ('version_number', models.PositiveIntegerField(blank=True, help_text='The published version played (blank: the draft).', null=True)),
                ('compared_with', models.CharField(blank=True, help_text='The version played beside it, if any.', max_length=16)),
                ('names', models.JSONField(blank=True, default=list, help_text='The tests asked for (empty: every enabled test).')),
                ('source', models.CharField(choices=[('admin', 'The admin'), ('api', 'The API'), ('command', 'manage.py run_conversation_tests')], max_length=16)),
                ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('finished', 'Finished'), ('error', 'Could not run')], default='queued', max_length=16)),
                ('total', models.PositiveIntegerField(default=0)),
                ('done', models.PositiveIntegerField(default=0, help_text='Tests played so far.')),
                ('passed', models.PositiveIntegerField(default=0)),
                ('failed', models.PositiveIntegerField(default=0)),
                ('required_failed', models.PositiveIntegerField(default=0)),
                ('changed', models.PositiveIntegerField(default=0, help_text='Tests whose result or answers differ (a comparison).')),
                ('usage', models.JSONField(blank=True, default=dict, help_text='The model calls of its turns and judges.')),
                ('coverage', models.JSONField(blank=True, default=dict)),
                ('error', models.TextField(blank=True)),
                ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                ('started_at', models.DateTimeField(blank=True, null=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('profile', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='conversation_test_runs', to='agents.agentprofile')),
                ('started_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('tenant', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tenants.tenant')),
            ],
            options={
                'verbose_name': 'conversation test run',
                'ordering': ['-created_at', '-pk'],
            },
        ),
        migrations.CreateModel(
            name='ConversationTestResult',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=200)),
                ('required', models.BooleanField(default=True)),
                ('passed', models.BooleanField(default=False)),
                ('outcome', models.CharField(blank=True, help_text='Against the compared version, if any.', max_length=16)),
                ('source_message_id', models.PositiveBigIntegerField(blank=True, db_index=True, null=True)),
                ('result', models.JSONField(default=dict)),
                ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='results', to='routing.conversationtestrun')),
            ],
            options={
                'ordering': ['passed', 'pk'],
            },
        ),
        migrations.RunPython(grant, revoke),
    ]
