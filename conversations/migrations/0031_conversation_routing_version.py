"""The routing version a conversation started on, on the conversation: the version that served its first user message,
which the analytics count the conversation under (a version's slice read it with one subquery per conversation).

The column is added nullable, which neither PostgreSQL nor SQLite rewrites the table for; the conversations already
stored are then filled in from their first user message in batches of ids, each its own transaction (the migration
is not atomic), before the conversations' window indexes are built again with it and with the kinds of move each
conversation has had (a window's conversations by ``handoff_kinds`` were a sequential scan of the table). A data migration rather than a
command: the analytics read the column as soon as this code runs, and a conversation left without its version would
count as a draft's.
"""

from django.db import migrations, models
from django.db.models import Max, Min, OuterRef, Subquery

BATCH = 20_000  # conversations per transaction: a few seconds' lock on a batch, never the table
USER = "user"  # conversations.models.MessageRole.USER


def conversation_version_backfill(apps, schema_editor):
    conversation = apps.get_model("conversations", "Conversation")
    message = apps.get_model("conversations", "Message")
    first = message.objects.filter(conversation_id=OuterRef("pk"), role=USER).order_by("created_at", "id")
    version = Subquery(first.values("routing_version")[:1])
    bounds = conversation.objects.aggregate(first=Min("id"), last=Max("id"))  # the primary key's ends
    if bounds["first"] is None:
        return
    for start in range(bounds["first"], bounds["last"] + 1, BATCH):
        conversation.objects.filter(id__gte=start, id__lt=start + BATCH).update(routing_version=version)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("conversations", "0030_turn_tenant_language"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="conversation",
            name="conversation_tenant_window",
        ),
        migrations.RemoveIndex(
            model_name="conversation",
            name="conversation_window",
        ),
        migrations.AddField(
            model_name="conversation",
            name="routing_version",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="The published routing version that served the conversation's first user message, which "
                "the analytics count the conversation under (blank: a draft, a profile never published, or no "
                "message yet). Written with that message; later turns served by another version leave it.",
                null=True,
            ),
        ),
        migrations.RunPython(conversation_version_backfill, migrations.RunPython.noop, elidable=True),
        migrations.AddIndex(
            model_name="conversation",
            index=models.Index(
                fields=["tenant", "created_at", "profile", "cohort"],
                include=("language", "routing_version", "handoff_kinds"),
                name="conversation_tenant_window",
            ),
        ),
        migrations.AddIndex(
            model_name="conversation",
            index=models.Index(
                fields=["created_at", "tenant", "profile", "cohort"],
                include=("language", "routing_version", "handoff_kinds"),
                name="conversation_window",
            ),
        ),
    ]
