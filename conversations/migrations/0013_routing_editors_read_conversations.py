"""The "Routing editors" group may read the conversation store — conversations, messages, route decisions, tool
calls, handoffs and the customers' ratings — to find misroutes themselves and to see the impact preview. What they
see there is limited to the tenants a tenant grant lets them read (``TenantGrant.read_conversations``); nobody
writes the store through the admin."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP_NAME = "Routing editors"

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


def grant(apps, schema_editor):
    alias = schema_editor.connection.alias
    # On a fresh database permissions are created by post_migrate, after every migration ran.
    for label in ("handoffs", "conversations"):
        app_config = apps.get_app_config(label)
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
        ("handoffs", "0009_backend_handoff_kind"),
        # The content types of the moved models are renamed there: creating permissions before would make them anew.
        ("routing", "0011_models_moved_to_their_apps"),
        ("conversations", "0012_messagefeedback_customer_ratings"),
    ]

    operations = [migrations.RunPython(grant, revoke)]
