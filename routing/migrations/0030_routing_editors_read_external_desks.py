"""The "Routing editors" group may read the external desks (their names, masked addresses and where their secret
comes from, never the secret), so that they see which desk a profile's escalations go to. Adding, changing and
deleting one stays with operators, as for MCP servers (docs/external-desk.md)."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP_NAME = "Routing editors"

PERMISSIONS = {
    ("agents", "externaldesk"): ("view",),
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
    app_config = apps.get_app_config("agents")
    app_config.models_module = True
    create_permissions(app_config, verbosity=0, apps=apps, using=alias)
    app_config.models_module = None
    group, _ = apps.get_model("auth", "Group").objects.using(alias).get_or_create(name=GROUP_NAME)
    group.permissions.add(*_permissions(apps, alias))


def revoke(apps, schema_editor):
    alias = schema_editor.connection.alias
    group = apps.get_model("auth", "Group").objects.using(alias).filter(name=GROUP_NAME).first()
    if group is not None:  # what is granted by name; a permission gone already is nothing to take back
        Permission = apps.get_model("auth", "Permission")
        for (app, model), actions in PERMISSIONS.items():
            for action in actions:
                group.permissions.remove(
                    *Permission.objects.using(alias).filter(
                        content_type__app_label=app, content_type__model=model, codename=f"{action}_{model}"
                    )
                )


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("agents", "0016_external_desks"),
        ("routing", "0029_routing_test_source"),
    ]

    operations = [migrations.RunPython(grant, revoke)]
