"""What each started rollout plan started as (``started_as``): a fingerprint of its candidate and settings, which it
must keep to advance or complete. Plans started before are given the fingerprint of what they hold now."""

import hashlib
import json

from django.db import migrations, models

# The fingerprint releases.rollout.commands.plan_fingerprint takes, as it was when this migration was written.
PLAN_SETTINGS = ("stages", "hold_minutes", "min_conversations", "guards", "max_errors", "alpha")


def started_fingerprints(apps, schema_editor):
    plans = apps.get_model("routing", "RolloutPlan").objects.using(schema_editor.connection.alias)
    started = list(plans.exclude(status="ready"))
    for plan in started:
        settings = {"candidate": plan.candidate_id, **{name: getattr(plan, name) for name in PLAN_SETTINGS}}
        canonical = json.dumps(settings, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
        plan.started_as = hashlib.sha256(canonical.encode()).hexdigest()
    plans.bulk_update(started, ["started_as"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [
        ("routing", "0033_version_released_at"),
    ]

    operations = [
        migrations.AddField(
            model_name="rolloutplan",
            name="started_as",
            field=models.CharField(
                blank=True,
                help_text="A fingerprint of its candidate and settings when it started (what a second person "
                "approved): it advances and completes only while they are the same.",
                max_length=64,
            ),
        ),
        migrations.RunPython(started_fingerprints, migrations.RunPython.noop),
    ]
