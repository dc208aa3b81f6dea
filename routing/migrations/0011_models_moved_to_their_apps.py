"""Tenants and keys, the conversation store and the configuration version leave routing for their own apps.

Nothing in the database moves: the tables keep their names. The content types move with the models, so the
permissions given to groups and users (and admin log entries) keep pointing at them."""

import django.db.models.deletion
from django.db import migrations, models

# (old app, old model) -> (new app, new model)
MOVED = {
    ("routing", "tenant"): ("tenants", "tenant"),
    ("routing", "apikey"): ("tenants", "apikey"),
    ("routing", "conversation"): ("conversations", "conversation"),
    ("routing", "message"): ("conversations", "message"),
    ("routing", "routedecisionrecord"): ("conversations", "routedecisionrecord"),
    ("routing", "toolcall"): ("conversations", "toolcall"),
    ("routing", "routingconfigversion"): ("common", "configversion"),
}


def _move_content_types(apps, schema_editor, moves):
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    db = schema_editor.connection.alias
    for (old_app, old_model), (new_app, new_model) in moves.items():
        old = ContentType.objects.using(db).filter(app_label=old_app, model=old_model).first()
        if old is None:
            continue  # a database whose content types were never created: post_migrate makes the new ones
        new = ContentType.objects.using(db).filter(app_label=new_app, model=new_model).first()
        if new is None:
            old.app_label, old.model = new_app, new_model
            old.save(update_fields=["app_label", "model"])
            new = old
        for permission in Permission.objects.using(db).filter(content_type=old):
            _permission_move(Permission, db, permission, new, old_model, new_model)
        if new.pk != old.pk:
            old.delete()  # its permissions were moved onto the content type made meanwhile (a partial migrate)


def _permission_move(Permission, db, permission, content_type, old_model, new_model):
    """Give ``permission`` to the moved model, renamed with it; if the model already has one of that codename
    (made by a post_migrate run in between), the groups and users holding it are given that one instead."""
    codename = permission.codename.replace(f"_{old_model}", f"_{new_model}")
    name = permission.name.replace("routing configuration version", "configuration version")
    existing = Permission.objects.using(db).filter(content_type=content_type, codename=codename).first()
    if existing is None or existing.pk == permission.pk:
        permission.content_type, permission.codename, permission.name = content_type, codename, name
        permission.save(update_fields=["content_type", "codename", "name"])
        return
    for group in permission.group_set.all():
        group.permissions.add(existing)
    for user in permission.user_set.all():
        user.user_permissions.add(existing)
    permission.delete()


def content_types_follow(apps, schema_editor):
    _move_content_types(apps, schema_editor, MOVED)


def content_types_return(apps, schema_editor):
    _move_content_types(apps, schema_editor, {new: old for old, new in MOVED.items()})


class Migration(migrations.Migration):

    dependencies = [
        ('common', '0001_initial'),
        ('conversations', '0001_initial'),
        ('contenttypes', '0002_remove_content_type_name'),
        ('auth', '0012_alter_user_first_name_max_length'),
        ('analytics', '0003_references_to_moved_models'),
        ('handoffs', '0005_references_to_moved_models'),
        ('routing', '0010_conversation_handoff_kinds'),
        ('tenants', '0001_initial'),
    ]

    operations = [
        # The tables stay where they are: only Django's picture of which app owns them changes.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name='apikey',
                    name='tenant',
                ),
                migrations.RemoveField(
                    model_name='conversation',
                    name='profile',
                ),
                migrations.RemoveField(
                    model_name='conversation',
                    name='tenant',
                ),
                migrations.RemoveField(
                    model_name='toolcall',
                    name='conversation',
                ),
                migrations.RemoveField(
                    model_name='routedecisionrecord',
                    name='conversation',
                ),
                migrations.RemoveField(
                    model_name='message',
                    name='conversation',
                ),
                migrations.RemoveField(
                    model_name='routedecisionrecord',
                    name='message',
                ),
                migrations.RemoveField(
                    model_name='toolcall',
                    name='message',
                ),
                migrations.DeleteModel(
                    name='RoutingConfigVersion',
                ),
                migrations.AlterField(
                    model_name='rollouttenantoverride',
                    name='tenant',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='rollout_overrides', to='tenants.tenant'),
                ),
                migrations.DeleteModel(
                    name='ApiKey',
                ),
                migrations.DeleteModel(
                    name='Conversation',
                ),
                migrations.DeleteModel(
                    name='RouteDecisionRecord',
                ),
                migrations.DeleteModel(
                    name='Message',
                ),
                migrations.DeleteModel(
                    name='ToolCall',
                ),
                migrations.DeleteModel(
                    name='Tenant',
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(content_types_follow, content_types_return),
    ]
