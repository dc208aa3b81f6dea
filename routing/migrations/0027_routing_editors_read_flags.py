"""The "Routing editors" group may roll a version out in stages: add, change and view rollout plans (and so run
their commands: start, pause, resume, advance, abort check ``change_rolloutplan``) and read the guard's decisions.
They may read the rollout flags, their overrides and their change history, never change them: flags, like model
endpoints, keys and MCP servers, belong to operators (docs/admin.md)."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP_NAME = "Routing editors"

PERMISSIONS = {
    ("routing", "rolloutplan"): ("add", "change", "view"),
    ("routing", "rolloutdecision"): ("view",),
    ("routing", "rolloutflag"): ("view",),
    ("routing", "rolloutuseroverride"): ("view",),
    ("routing", "rollouttenantoverride"): ("view",),
    ("routing", "rolloutflagchange"): ("view",),
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
    if group is not None:  # what is granted by name; a permission gone already is nothing to take back
        Permission = apps.get_model("auth", "Permission")
        names = [(app, model, f"{action}_{model}") for (app, model), actions in PERMISSIONS.items() for action in actions]
        for app, model, codename in names:
            group.permissions.remove(
                *Permission.objects.using(alias).filter(
                    content_type__app_label=app, content_type__model=model, codename=codename
                )
            )


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("routing", "0026_release_approvers_group"),
    ]

    operations = [migrations.RunPython(grant, revoke)]
