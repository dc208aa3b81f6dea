"""The "Routing editors" group: business users who shape routing content in the admin.

They may add, change, delete and view intents, keywords, state policies and
specialist prompts. They may view (never change) agent profiles, specialists
and MCP tools, so that forms can show what they pick from. Nothing else: no
servers, API keys, tenants, conversations, users or flags.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP_NAME = "Routing editors"

FULL = ("add", "change", "delete", "view")
PERMISSIONS = {
    ("routing", "intent"): FULL,
    ("routing", "keyword"): FULL,
    ("routing", "statepolicy"): FULL,
    ("agents", "specialistprompt"): FULL,
    ("agents", "agentprofile"): ("view",),
    ("agents", "specialist"): ("view",),
    ("agents", "mcptool"): ("view",),
}


def create_group(apps, schema_editor):
    # On a fresh database permissions are created by post_migrate, after every
    # migration ran; create them now for the apps this group needs.
    for label in ("agents", "routing"):
        app_config = apps.get_app_config(label)
        app_config.models_module = True
        create_permissions(app_config, verbosity=0, apps=apps, using=schema_editor.connection.alias)
        app_config.models_module = None

    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.using(schema_editor.connection.alias).get_or_create(name=GROUP_NAME)
    wanted = []
    for (app_label, model), actions in PERMISSIONS.items():
        for action in actions:
            wanted.append(
                Permission.objects.using(schema_editor.connection.alias).get(
                    content_type__app_label=app_label, content_type__model=model, codename=f"{action}_{model}"
                )
            )
    group.permissions.set(wanted)


def delete_group(apps, schema_editor):
    apps.get_model("auth", "Group").objects.using(schema_editor.connection.alias).filter(name=GROUP_NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("agents", "0001_initial"),
        ("routing", "0001_initial"),
    ]

    operations = [migrations.RunPython(create_group, delete_group)]
