from django.db import migrations

# What releases.models.RolloutPlan.serve writes, as it was when this migration was written.
PLAN_SETTINGS = ("stages", "hold_minutes", "min_conversations", "guards", "max_errors", "alpha")
ACTIVE = ("running", "paused")


def plans_serve(apps, schema_editor):
    """The plans running or paused before routing read the live table get their rows in it."""
    plans = apps.get_model("releases", "RolloutPlan")
    live = apps.get_model("routing", "LiveRollout")
    active = plans.objects.filter(
        status__in=ACTIVE, target="version", candidate__isnull=False, profile__isnull=False
    ).select_related("control")
    live.objects.bulk_create(
        live(
            plan_id=plan.pk,
            profile_id=plan.profile_id,
            candidate_id=plan.candidate_id,
            control_number=plan.control.number if plan.control_id else None,
            history=plan.history,
            settings={name: getattr(plan, name) for name in PLAN_SETTINGS},
            started_as=plan.started_as,
        )
        for plan in active
    )


def plans_unserve(apps, schema_editor):
    apps.get_model("routing", "LiveRollout").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [
        ("releases", "0002_conversation_test_knowledge_keys"),
        ("routing", "0047_live_rollouts"),
    ]

    operations = [migrations.RunPython(plans_serve, plans_unserve)]
