"""The turn's tenant and language on its messages, route decisions and tool calls (the language on the first two);
the conversations' window indexes hold their language, and the index the rows' join read it from goes.

The columns are added nullable or with a constant default, which neither PostgreSQL nor SQLite rewrites the table
for; the rows already stored are then filled in from their conversation in batches of ids, each its own transaction
(the migration is not atomic), before the indexes that read them are built. A data migration rather than a command:
the analytics read the new columns as soon as this code runs, and a row left without its tenant would drop out of
them, so the columns are whole before the code that reads them starts. A stored row gets its conversation's language
as it is now: the language its turn was read in was not kept.
"""

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import Max, Min, OuterRef, Subquery

TURN_ROWS = ("message", "routedecisionrecord", "toolcall")  # the language on the first two
BATCH = 20_000  # rows per transaction: a few seconds' lock on a batch, never the table


def _tenant() -> models.ForeignKey:
    return models.ForeignKey(
        blank=True,
        db_index=False,
        null=True,
        on_delete=django.db.models.deletion.CASCADE,
        related_name="+",
        to="tenants.tenant",
    )


def _language() -> models.CharField:
    return models.CharField(
        blank=True,
        help_text="The conversation's language when the turn was written (what the customer was read and answered "
        "in); blank: none told yet. The analytics count the row under it.",
        max_length=8,
    )


def _filled(model, columns: tuple[str, ...]) -> None:
    conversations = model._meta.get_field("conversation").related_model.objects.filter(pk=OuterRef("conversation_id"))
    values = {column: Subquery(conversations.values(column)[:1]) for column in columns}
    bounds = model.objects.aggregate(first=Min("id"), last=Max("id"))  # the primary key's ends
    if bounds["first"] is None:
        return
    missing = model.objects.filter(tenant__isnull=True)
    for start in range(bounds["first"], bounds["last"] + 1, BATCH):
        missing.filter(id__gte=start, id__lt=start + BATCH).update(**values)


def turn_columns_backfill(apps, schema_editor):
    _filled(apps.get_model("conversations", "Message"), ("tenant_id", "language"))
    _filled(apps.get_model("conversations", "RouteDecisionRecord"), ("tenant_id", "language"))
    _filled(apps.get_model("conversations", "ToolCall"), ("tenant_id",))


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("agents", "0034_extract_facts_without_summary"),
        ("conversations", "0029_analytics_live_day_covering"),
        ("tenants", "0005_retention"),
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
        migrations.RemoveIndex(
            model_name="conversation",
            name="conversation_language",
        ),
        migrations.RemoveIndex(
            model_name="message",
            name="message_usage_window",
        ),
        migrations.RemoveIndex(
            model_name="message",
            name="message_answer_window",
        ),
        migrations.RemoveIndex(
            model_name="message",
            name="message_user_window",
        ),
        migrations.RemoveIndex(
            model_name="routedecisionrecord",
            name="decision_window_method",
        ),
        migrations.RemoveIndex(
            model_name="toolcall",
            name="toolcall_window",
        ),
        *(migrations.AddField(model_name=model, name="tenant", field=_tenant()) for model in TURN_ROWS),
        *(migrations.AddField(model_name=model, name="language", field=_language()) for model in TURN_ROWS[:2]),
        migrations.RunPython(turn_columns_backfill, migrations.RunPython.noop, elidable=True),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=models.Q(("role", "assistant")),
                fields=["created_at", "agent", "cohort", "latency_ms", "judge_score", "conversation"],
                include=("profile", "routing_version", "tenant", "language"),
                name="message_answer_window",
            ),
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=models.Q(("role", "user")),
                fields=["created_at", "cohort", "conversation"],
                include=("profile", "routing_version", "latency_ms", "judge_score", "tenant", "language"),
                name="message_user_window",
            ),
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                fields=["tenant", "role", "created_at"],
                include=("agent", "cohort", "profile", "routing_version", "latency_ms", "judge_score", "language"),
                name="message_tenant_window",
            ),
        ),
        migrations.AddIndex(
            model_name="routedecisionrecord",
            index=models.Index(
                fields=["created_at", "method", "conversation"],
                include=("profile", "cohort", "routing_version", "tenant", "language"),
                name="decision_window_method",
            ),
        ),
        migrations.AddIndex(
            model_name="routedecisionrecord",
            index=models.Index(
                fields=["tenant", "created_at"],
                include=("method", "profile", "cohort", "routing_version", "language"),
                name="decision_tenant_window",
            ),
        ),
        migrations.AddIndex(
            model_name="toolcall",
            index=models.Index(
                fields=["created_at", "tool", "server", "status", "latency_ms", "conversation"],
                include=("tenant", "profile", "cohort", "routing_version"),
                name="toolcall_window",
            ),
        ),
        migrations.AddIndex(
            model_name="toolcall",
            index=models.Index(
                fields=["tenant", "created_at"],
                include=("tool", "server", "status", "latency_ms", "profile", "cohort", "routing_version"),
                name="toolcall_tenant_window",
            ),
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=models.Q(("other_models", False), ("role", "assistant")),
                fields=["created_at"],
                include=("profile", "tenant", "llm_model", "prompt_tokens", "completion_tokens"),
                name="message_usage_window",
            ),
        ),
        migrations.AddIndex(
            model_name="conversation",
            index=models.Index(
                fields=["tenant", "created_at", "profile", "cohort"],
                include=("language",),
                name="conversation_tenant_window",
            ),
        ),
        migrations.AddIndex(
            model_name="conversation",
            index=models.Index(
                fields=["created_at", "tenant", "profile", "cohort"],
                include=("language",),
                name="conversation_window",
            ),
        ),
    ]
