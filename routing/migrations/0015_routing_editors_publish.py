"""The "Routing editors" group may publish and revert a profile's versions (``add_routingversion``) and read its
history (``view_routingversion``); it may no longer delete prompt versions (the history of a specialist's prompt
is what a revert goes back to)."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP_NAME = "Routing editors"

PERMISSIONS = {
    ("routing", "routingversion"): ("add", "view"),
}
REVOKED = {
    ("agents", "specialistprompt"): ("delete",),
}


def _permissions(apps, alias, wanted):
    Permission = apps.get_model("auth", "Permission")
    return [
        Permission.objects.using(alias).get(
            content_type__app_label=app_label, content_type__model=model, codename=f"{action}_{model}"
        )
        for (app_label, model), actions in wanted.items()
        for action in actions
    ]


def grant(apps, schema_editor):
    alias = schema_editor.connection.alias
    # On a fresh database permissions are created by post_migrate, after every migration ran.
    for label in ("agents", "routing"):
        app_config = apps.get_app_config(label)
        app_config.models_module = True
        create_permissions(app_config, verbosity=0, apps=apps, using=alias)
        app_config.models_module = None
    group, _ = apps.get_model("auth", "Group").objects.using(alias).get_or_create(name=GROUP_NAME)
    group.permissions.add(*_permissions(apps, alias, PERMISSIONS))
    group.permissions.remove(*_permissions(apps, alias, REVOKED))


def revoke(apps, schema_editor):
    alias = schema_editor.connection.alias
    group = apps.get_model("auth", "Group").objects.using(alias).filter(name=GROUP_NAME).first()
    if group is not None:
        group.permissions.remove(*_permissions(apps, alias, PERMISSIONS))
        group.permissions.add(*_permissions(apps, alias, REVOKED))


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("routing", "0014_routing_versions"),
    ]

    operations = [migrations.RunPython(grant, revoke)]
