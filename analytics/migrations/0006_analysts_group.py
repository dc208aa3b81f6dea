"""The "Analysts" group: staff who read the analytics and the conversation store of the tenants they are granted,
and edit nothing.

The group holds the view permissions of the conversation store (conversations, messages, route decisions, tool
calls, handoffs, the customers' ratings). Which tenants a member reads is not a permission of the group: it is
each tenant grant's "read conversations" (``TenantGrant.read_conversations``), which also opens the dashboard and
the analytics API for those tenants only. ``analytics.view_analytics`` — every tenant's analytics — is not given.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP_NAME = "Analysts"

PERMISSIONS = {
    ("conversations", "conversation"): ("view",),
    ("conversations", "message"): ("view",),
    ("conversations", "routedecisionrecord"): ("view",),
    ("conversations", "toolcall"): ("view",),
    ("conversations", "messagefeedback"): ("view",),
    ("handoffs", "handoff"): ("view",),
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


def create_group(apps, schema_editor):
    alias = schema_editor.connection.alias
    # On a fresh database permissions are created by post_migrate, after every migration ran.
    for label in ("handoffs", "conversations"):
        app_config = apps.get_app_config(label)
        app_config.models_module = True
        create_permissions(app_config, verbosity=0, apps=apps, using=alias)
        app_config.models_module = None
    group, _ = apps.get_model("auth", "Group").objects.using(alias).get_or_create(name=GROUP_NAME)
    group.permissions.set(_permissions(apps, alias))


def delete_group(apps, schema_editor):
    apps.get_model("auth", "Group").objects.using(schema_editor.connection.alias).filter(name=GROUP_NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("handoffs", "0009_backend_handoff_kind"),
        # The content types of the moved models are renamed there: creating permissions before would make them anew.
        ("routing", "0011_models_moved_to_their_apps"),
        ("conversations", "0011_usage_other_models"),
        ("analytics", "0005_conversations_by_version"),
    ]

    operations = [migrations.RunPython(create_group, delete_group)]
