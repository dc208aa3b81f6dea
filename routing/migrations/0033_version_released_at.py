"""When each version was first served to every customer (``released_at``): a revert without a second person goes back
only to a released version.

Versions stored before are read from what was recorded. Released: the version live now, any plan's control (it was
live when the plan started), the candidate of a completed plan (when it completed), a revert, an approved publish,
and a version published from the admin, by an import or by the demo set-up. A version a plan rolled out (its
candidate) and that is none of those was never released — a staged rollout's candidate, or a version stored with
``routing_publish --candidate``. The rest were published to everyone when they were made. What cannot be told
apart: a version stored with ``--candidate`` and never put in a plan counts as released (nothing recorded says it
was not), and a version published to everyone, never a control and later rolled out again by a plan that did not
complete counts as never released (a revert to it then asks for a second person, the safe side).
"""

from django.db import migrations, models

PUBLISHED_TO_EVERYONE = ("admin", "import", "demo")  # where versions are made live, never stored as candidates


def released_versions(apps, schema_editor):
    db = schema_editor.connection.alias
    versions = apps.get_model("routing", "RoutingVersion").objects.using(db)
    plans = apps.get_model("routing", "RolloutPlan").objects.using(db)
    completed: dict = {}
    done = plans.filter(status="completed", candidate__isnull=False).order_by("finished_at")
    for candidate_id, finished_at in done.values_list("candidate_id", "finished_at"):
        completed.setdefault(candidate_id, finished_at)
    candidates = set(plans.filter(candidate__isnull=False).values_list("candidate_id", flat=True))
    served = set(plans.filter(control__isnull=False).values_list("control_id", flat=True))
    served |= set(apps.get_model("routing", "ProfileRelease").objects.using(db).values_list("version_id", flat=True))
    released = []
    for version in versions.only("created_at", "reverted_from", "approved_by", "published_from"):
        if version.pk in completed:
            version.released_at = completed[version.pk] or version.created_at
        elif (
            version.pk in candidates
            and version.pk not in served
            and version.reverted_from is None
            and version.approved_by_id is None
            and version.published_from not in PUBLISHED_TO_EVERYONE
        ):
            continue
        else:
            version.released_at = version.created_at
        released.append(version)
    versions.bulk_update(released, ["released_at"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [
        ("routing", "0032_history_user_ids_pseudonymised"),
    ]

    operations = [
        migrations.AddField(
            model_name="routingversion",
            name="released_at",
            field=models.DateTimeField(
                blank=True,
                help_text="When every customer was first served it: published, reverted to, or its rollout plan "
                "completed (blank: never — a candidate whose plan did not complete). A revert without a second person "
                "goes back only to such a version.",
                null=True,
            ),
        ),
        migrations.RunPython(released_versions, migrations.RunPython.noop),
    ]
