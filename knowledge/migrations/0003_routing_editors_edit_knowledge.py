"""The "Routing editors" group may read and edit the profiles' knowledge (``knowledge.edit_knowledge``): its sources,
their documents and uploads, in the admin and with ``import_knowledge --user``."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP_NAME = "Routing editors"

PERMISSIONS = {
    ("knowledge", "knowledgesource"): ("view", "edit"),
}


def codename(action: str, model: str) -> str:
    return "edit_knowledge" if action == "edit" else f"{action}_{model}"


def _permissions(apps, alias):
    Permission = apps.get_model("auth", "Permission")
    return [
        Permission.objects.using(alias).get(
            content_type__app_label=app_label, content_type__model=model, codename=codename(action, model)
        )
        for (app_label, model), actions in PERMISSIONS.items()
        for action in actions
    ]


def grant(apps, schema_editor):
    alias = schema_editor.connection.alias
    # On a fresh database permissions are created by post_migrate, after every migration ran.
    app_config = apps.get_app_config("knowledge")
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
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("knowledge", "0002_search_indexes"),
        ("routing", "0043_goal_translations"),
    ]

    operations = [migrations.RunPython(grant, revoke)]
