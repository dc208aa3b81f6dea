"""Saved routing tests (``RoutingTestCase``) and the figures of the run that gated a version
(``RoutingVersion.test_summary``); the "Routing editors" group may add, change, view and delete the tests."""

import django.db.models.deletion
from django.contrib.auth.management import create_permissions
from django.db import migrations, models

GROUP_NAME = "Routing editors"

PERMISSIONS = {
    ("routing", "routingtestcase"): ("add", "change", "delete", "view"),
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
        ("agents", "0005_goal_mode_synced_descriptions"),
        ("routing", "0015_routing_editors_publish"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AddField(
            model_name="routingversion",
            name="test_summary",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="The saved routing tests run against it before it was published: counts and the first failures.",
            ),
        ),
        migrations.CreateModel(
            name="RoutingTestCase",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(help_text="e.g. fatura alta", max_length=200)),
                ("message", models.TextField(help_text="The user's message.")),
                (
                    "state",
                    models.CharField(
                        blank=True,
                        help_text="The conversation's state, e.g. WAITING_PAYMENT_CONFIRMATION.",
                        max_length=100,
                    ),
                ),
                (
                    "active_specialist",
                    models.CharField(
                        blank=True,
                        help_text="The specialist answering the conversation, e.g. billing_agent.",
                        max_length=100,
                    ),
                ),
                (
                    "expect",
                    models.JSONField(
                        default=dict,
                        help_text='What the decision must be, e.g. {"intent": "billing_invoice_explanation", "agent": "billing_agent", "method": "keyword"}; keys: intent, agent, method, next_state, goal, status.',
                    ),
                ),
                (
                    "enabled",
                    models.BooleanField(default=True, help_text="Disabled tests neither run nor gate publishing."),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "profile",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="routing_tests",
                        to="agents.agentprofile",
                    ),
                ),
            ],
            options={
                "verbose_name": "routing test",
                "ordering": ["profile__agent_id", "name"],
                "constraints": [
                    models.UniqueConstraint(fields=("profile", "name"), name="routing_test_unique_name_per_profile")
                ],
            },
        ),
        migrations.RunPython(grant, revoke),
    ]
