"""A rollout plan's webhook is checked by the outbound policy when it is saved (common/outbound.py): no schema change,
the field's validator only. The decisions posted before say only whether their post was delivered, as later ones do:
what the receiver answered ("HTTP 403", "failed: ConnectError") told whoever read the plan what listens where."""

from django.db import migrations, models

import common.outbound

# releases/rollout/commands.py's words, as they are when this runs.
DELIVERED = "delivered"
FAILED = "not delivered: the receiver did not take it (the server's log says why)"


def reworded(apps, schema_editor):
    decisions = apps.get_model("routing", "RolloutDecision").objects.exclude(webhook="")
    decisions.filter(webhook__regex=r"^HTTP 2[0-9][0-9]$").update(webhook=DELIVERED)
    decisions.exclude(webhook=DELIVERED).exclude(webhook__startswith="not delivered").update(webhook=FAILED)


class Migration(migrations.Migration):
    dependencies = [
        ("routing", "0035_history_opaque_user_ids_pseudonymised"),
    ]

    operations = [
        migrations.AlterField(
            model_name="rolloutplan",
            name="webhook_url",
            field=models.URLField(
                blank=True,
                help_text="Optional: each decision that moves the plan is posted here.",
                validators=[common.outbound.validate_outbound_url],
            ),
        ),
        migrations.RunPython(reworded, migrations.RunPython.noop),
    ]
