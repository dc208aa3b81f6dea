"""Saved conversation tests (``ConversationTest``); the "Routing editors" group may add, change, view and delete
them, as it may the routing tests."""

import django.db.models.deletion
from django.contrib.auth.management import create_permissions
from django.db import migrations, models

GROUP_NAME = "Routing editors"
PERMISSIONS = {
    ("routing", "conversationtest"): ("add", "change", "delete", "view"),
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
        ('agents', '0027_mcp_stdio_servers'),
        ('routing', '0041_routing_test_expect_language'),
        ('auth', '0012_alter_user_first_name_max_length'),
        ('contenttypes', '0002_remove_content_type_name'),
    ]

    operations = [
        migrations.CreateModel(
            name='ConversationTest',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(help_text='e.g. a high invoice is explained', max_length=200)),
                ('required', models.BooleanField(default=True, help_text='A failure blocks publishing and rollout stages.')),
                ('enabled', models.BooleanField(default=True, help_text='Disabled tests neither run nor gate.')),
                ('language', models.CharField(blank=True, choices=[('pt', 'pt'), ('es', 'es'), ('en', 'en')], help_text="The conversation's language: every answer must be in it unless a turn expects another.", max_length=8)),
                ('user_id', models.CharField(blank=True, help_text="The customer's id, as a face gives it.", max_length=200)),
                ('channel', models.CharField(blank=True, help_text="e.g. whatsapp; empty: the API's.", max_length=64)),
                ('context', models.JSONField(blank=True, default=dict, help_text='What a face sends, e.g. {"msisdn": "5511…"}.')),
                ('tool_answers', models.JSONField(blank=True, default=dict, help_text='Recorded answers used in place of calling the tools, e.g. {"consultar_fatura": {"total": 120}}.')),
                ('turns', models.JSONField(default=list, help_text='The turns, in order (at most 20): a list of {"user": "…", "expect": {…}}, with an optional "channel", "context" and "tool_answers" each; expect keys: intent, agent, method, next_state, goal, status, events, repair, state_after, topics, language, state, no_state, answer_contains, answer_not_contains, answer_matches, answer_language, answer_schema, answer_min_chars, answer_max_chars, tools_called, tools_not_called, frame_pushed, frame_resumed, escalated, delegated_to, returned, judge.')),
                ('source_message_id', models.PositiveBigIntegerField(blank=True, db_index=True, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('profile', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='conversation_tests', to='agents.agentprofile')),
            ],
            options={
                'ordering': ['profile__agent_id', 'name'],
                'constraints': [models.UniqueConstraint(fields=('profile', 'name'), name='conversation_test_unique_name_per_profile')],
            },
        ),
        migrations.RunPython(grant, revoke),
    ]
