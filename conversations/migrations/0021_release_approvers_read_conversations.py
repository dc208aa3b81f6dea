"""The "Release approvers" group may read the conversation store — conversations, messages, route decisions, tool
calls, handoffs and the customers' ratings — as docs/admin.md says: an approver weighing a publish or a rollout
reads how the live version answers. As for editors and analysts, what they see there is limited to the tenants a
tenant grant lets them read (``TenantGrant.read_conversations``); nobody writes the store through the admin."""

import importlib

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP_NAME = "Release approvers"

# The same views as the routing editors were given: the conversation store, no more.
editors = importlib.import_module("conversations.migrations.0013_routing_editors_read_conversations")
PERMISSIONS = editors.PERMISSIONS


def grant(apps, schema_editor):
    alias = schema_editor.connection.alias
    # On a fresh database permissions are created by post_migrate, after every migration ran.
    for label in ("handoffs", "conversations"):
        app_config = apps.get_app_config(label)
        app_config.models_module = True
        create_permissions(app_config, verbosity=0, apps=apps, using=alias)
        app_config.models_module = None
    group, _ = apps.get_model("auth", "Group").objects.using(alias).get_or_create(name=GROUP_NAME)
    group.permissions.add(*editors._permissions(apps, alias))


def revoke(apps, schema_editor):
    group = apps.get_model("auth", "Group").objects.using(schema_editor.connection.alias).filter(name=GROUP_NAME)
    for each in group:  # a group gone already is nothing to take back
        each.permissions.remove(*editors._permissions(apps, schema_editor.connection.alias))


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0020_conversation_backend_task"),
        ("routing", "0026_release_approvers_group"),
    ]

    operations = [migrations.RunPython(grant, revoke)]
