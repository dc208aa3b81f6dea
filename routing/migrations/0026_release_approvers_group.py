"""The "Release approvers" group: people who approve publishes and rollout starts of the profiles that need a second
person (``routing.approve_release``), and change that setting. To review a request they read the profiles, their
versions, their saved routing tests, the rollout plans and their decisions, and the requests themselves; they edit
nothing else. A user may be in both groups: nobody approves their own request (routing.releases)."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP_NAME = "Release approvers"

PERMISSIONS = {
    ("routing", "releaserequest"): ("approve_release", "view"),
    ("agents", "agentprofile"): ("view",),
    ("agents", "specialist"): ("view",),
    ("routing", "routingversion"): ("view",),
    ("routing", "routingtestcase"): ("view",),
    ("routing", "rolloutplan"): ("view",),
    ("routing", "rolloutdecision"): ("view",),
    ("auditlog", "logentry"): ("view",),  # the routing changes, field by field, that a request publishes
}


def codename(action, model):
    return action if action == "approve_release" else f"{action}_{model}"


def _permissions(apps, alias):
    Permission = apps.get_model("auth", "Permission")
    return [
        Permission.objects.using(alias).get(
            content_type__app_label=app_label, content_type__model=model, codename=codename(action, model)
        )
        for (app_label, model), actions in PERMISSIONS.items()
        for action in actions
    ]


def create_group(apps, schema_editor):
    alias = schema_editor.connection.alias
    # On a fresh database permissions are created by post_migrate, after every migration ran.
    for label in ("agents", "routing", "auditlog"):
        app_config = apps.get_app_config(label)
        app_config.models_module = True
        create_permissions(app_config, verbosity=0, apps=apps, using=alias)
        app_config.models_module = None
    group, _ = apps.get_model("auth", "Group").objects.using(alias).get_or_create(name=GROUP_NAME)
    group.permissions.add(*_permissions(apps, alias))


def delete_group(apps, schema_editor):
    apps.get_model("auth", "Group").objects.using(schema_editor.connection.alias).filter(name=GROUP_NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("agents", "0014_profile_release_needs_approval"),
        ("auditlog", "0017_add_actor_email"),
        ("routing", "0025_routing_editors_roll_out"),
    ]

    operations = [migrations.RunPython(create_group, delete_group)]
