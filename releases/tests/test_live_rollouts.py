"""Routing serves the versions rolling out from a table of its own, which the release lifecycle writes.

Every write of a rollout plan — a command, the guard, the admin, a bulk ``update`` from a shell — writes what routing
serves of it (``routing.models.LiveRollout``); a plan that stopped is served no more; a save that changes nothing
served moves no process's snapshot. The snapshot reads no release table.
"""

from __future__ import annotations

import pytest
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext

from common.config_version import local_generation
from releases.models import RolloutDecisionAction, RolloutPlan
from releases.rollout.commands import plan_command
from releases.tests.test_release_approval_paths import approved_rollout
from routing import snapshot
from routing.models import LiveRollout
from routing.rollout_plans import plan_fingerprint

pytestmark = pytest.mark.django_db


def served(plan: RolloutPlan) -> LiveRollout | None:
    return LiveRollout.objects.filter(plan_id=plan.pk).first()


def test_a_started_plan_is_served_from_routings_table_as_it_was_approved(editor, approver, guarded):
    plan = approved_rollout(guarded, editor, approver, stages=[50, 100])

    row = served(plan)
    assert row is not None and row.profile_id == guarded.pk and row.candidate_id == plan.candidate_id
    assert row.control_number == 1 and row.history == plan.history and row.settings["stages"] == [50, 100]
    assert row.started_as == plan.started_as == plan_fingerprint(plan)
    assert snapshot.build(version=0, generation=0).rollouts["telecom_contas"].plan_id == plan.pk


def test_a_paused_plan_is_still_served_and_a_stopped_one_is_not(editor, approver, guarded):
    plan = approved_rollout(guarded, editor, approver, stages=[50, 100])

    plan_command(plan, RolloutDecisionAction.PAUSE, actor="manage.py rollout (ops)")
    assert served(plan) is not None
    plan_command(plan, RolloutDecisionAction.ABORT, actor="manage.py rollout (ops)")

    assert served(plan) is None and "telecom_contas" not in snapshot.build(version=0, generation=0).rollouts


def test_a_plan_written_in_bulk_rewrites_what_routing_serves_of_it(editor, approver, guarded):
    plan = approved_rollout(guarded, editor, approver, stages=[50, 100])

    RolloutPlan.objects.filter(pk=plan.pk).update(stages=[100], max_errors=3)

    row = served(plan)
    assert row is not None and row.settings["stages"] == [100] and row.settings["max_errors"] == 3
    assert "telecom_contas" not in snapshot.build(version=0, generation=0).rollouts  # not what was approved


def test_a_deleted_plan_is_served_no_more(editor, approver, guarded):
    plan = approved_rollout(guarded, editor, approver)

    plan.delete()

    assert not LiveRollout.objects.exists()


def test_a_save_that_changes_nothing_served_leaves_the_configuration_alone(editor, approver, guarded):
    plan = approved_rollout(guarded, editor, approver)
    before = local_generation()  # bumped with the configuration's version, at once (the version on commit)

    plan.webhook_url = "https://hooks.example.com/rollouts"
    plan.save()
    assert local_generation() == before
    plan.history = [*plan.history, ["2030-01-01T00:00:00+00:00", 100]]
    plan.save()

    assert local_generation() > before


def test_the_snapshot_reads_no_release_table(editor, approver, guarded):
    approved_rollout(guarded, editor, approver)

    with CaptureQueriesContext(connection) as queries:
        built = snapshot.build(version=0, generation=0)

    assert "telecom_contas" in built.rollouts
    release_tables = {model._meta.db_table for model in apps.get_app_config("releases").get_models()}
    assert "routing_rolloutplan" in release_tables  # the plans' table kept the name it had when routing owned it
    assert not [query["sql"] for query in queries if any(table in query["sql"] for table in release_tables)]
