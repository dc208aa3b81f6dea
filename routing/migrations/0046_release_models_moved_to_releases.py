"""The release lifecycle's models leave routing for releases (releases/0001 takes them on).

Nothing in the database moves: the tables keep their names (``routing_rolloutplan``, …). The content types move
with the models, so the permissions given to groups and users (``add_rolloutplan``, ``approve_release``, …, now under
``releases``), the admin's log and the field history keep pointing at them."""

from django.db import migrations

MOVED = (
    "routingtestcase",
    "conversationtest",
    "conversationtestrun",
    "conversationtestresult",
    "rolloutplan",
    "rolloutdecision",
    "releaserequest",
)
# What names a content type besides permissions: its entries follow it when two have to be merged.
LOGS = (("admin", "LogEntry"), ("auditlog", "LogEntry"))


def _move_content_types(apps, schema_editor, old_app, new_app):
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    db = schema_editor.connection.alias
    for model in MOVED:
        old = ContentType.objects.using(db).filter(app_label=old_app, model=model).first()
        if old is None:
            continue  # a database whose content types were never created: post_migrate makes the new ones
        new = ContentType.objects.using(db).filter(app_label=new_app, model=model).first()
        if new is None:
            old.app_label = new_app
            old.save(update_fields=["app_label"])
            continue
        # The new app's content type was made meanwhile (a partial migrate, then post_migrate): give it what the
        # old one held, then drop the old one.
        for permission in Permission.objects.using(db).filter(content_type=old):
            _permission_move(Permission, db, permission, new)
        for app_label, name in LOGS:
            apps.get_model(app_label, name).objects.using(db).filter(content_type=old).update(content_type=new)
        old.delete()


def _permission_move(Permission, db, permission, content_type):
    """Give ``permission`` to the moved model's content type; if it already has one of that codename, the groups and
    users holding the old one are given that one instead."""
    existing = Permission.objects.using(db).filter(content_type=content_type, codename=permission.codename).first()
    if existing is None:
        permission.content_type = content_type
        permission.save(update_fields=["content_type"])
        return
    for group in permission.group_set.all():
        group.permissions.add(existing)
    for user in permission.user_set.all():
        user.user_permissions.add(existing)
    permission.delete()


def content_types_follow(apps, schema_editor):
    _move_content_types(apps, schema_editor, "routing", "releases")


def content_types_return(apps, schema_editor):
    _move_content_types(apps, schema_editor, "releases", "routing")


class Migration(migrations.Migration):

    dependencies = [
        ("admin", "0003_logentry_add_action_flag_choices"),
        ("auditlog", "0017_add_actor_email"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("releases", "0001_initial"),
        ("routing", "0045_conversation_test_runs"),
    ]

    operations = [
        # The tables stay where they are: only Django's picture of which app owns them changes.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name='conversationtestresult',
                    name='run',
                ),
                migrations.RemoveField(
                    model_name='conversationtestrun',
                    name='profile',
                ),
                migrations.RemoveField(
                    model_name='conversationtestrun',
                    name='started_by',
                ),
                migrations.RemoveField(
                    model_name='conversationtestrun',
                    name='tenant',
                ),
                migrations.RemoveField(
                    model_name='releaserequest',
                    name='decided_by',
                ),
                migrations.RemoveField(
                    model_name='releaserequest',
                    name='plan',
                ),
                migrations.RemoveField(
                    model_name='releaserequest',
                    name='profile',
                ),
                migrations.RemoveField(
                    model_name='releaserequest',
                    name='requested_by',
                ),
                migrations.RemoveField(
                    model_name='releaserequest',
                    name='version',
                ),
                migrations.RemoveField(
                    model_name='rolloutdecision',
                    name='plan',
                ),
                migrations.RemoveField(
                    model_name='rolloutplan',
                    name='candidate',
                ),
                migrations.RemoveField(
                    model_name='rolloutplan',
                    name='control',
                ),
                migrations.RemoveField(
                    model_name='rolloutplan',
                    name='created_by',
                ),
                migrations.RemoveField(
                    model_name='rolloutplan',
                    name='profile',
                ),
                migrations.RemoveField(
                    model_name='routingtestcase',
                    name='profile',
                ),
                migrations.DeleteModel(
                    name='ConversationTest',
                ),
                migrations.DeleteModel(
                    name='ConversationTestResult',
                ),
                migrations.DeleteModel(
                    name='ConversationTestRun',
                ),
                migrations.DeleteModel(
                    name='ReleaseRequest',
                ),
                migrations.DeleteModel(
                    name='RolloutDecision',
                ),
                migrations.DeleteModel(
                    name='RolloutPlan',
                ),
                migrations.DeleteModel(
                    name='RoutingTestCase',
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(content_types_follow, content_types_return),
    ]
