"""Moving the release lifecycle's models out of ``routing`` into ``releases`` keeps every row.

The method of ``tests/test_migrations_keep_rows.py``: a PostgreSQL database filled at the migrations of before the
move (routing 0045, no ``releases`` migration) migrates to the latest ones with the same rows under the same ids and
values, foreign keys that resolve through today's models and are still PostgreSQL constraints, and content types that
followed the models — so a group given ``routing.approve_release`` before holds ``releases.approve_release`` after,
and the field history written about a plan still names it.
"""

from __future__ import annotations

from functools import reduce

import pytest
from auditlog.models import LogEntry
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from releases.models import (
    ConversationTest,
    ConversationTestResult,
    ConversationTestRun,
    ReleaseRequest,
    RolloutDecision,
    RolloutPlan,
    RoutingTestCase,
)
from tests.migration_moves import assert_foreign_keys_declared, contents, migrate_to_latest, row_maker

BEFORE_THE_MOVE = {"routing": "0045_conversation_test_runs"}
NEW_APPS = ("releases",)

# Historical model -> (the current model on the same table, the columns compared before and after).
ROWS = {
    "routing.RoutingTestCase": (RoutingTestCase, ("profile_id", "name", "message", "expect", "source_message_id")),
    "routing.ConversationTest": (ConversationTest, ("profile_id", "name", "required", "turns")),
    "routing.ConversationTestRun": (ConversationTestRun, ("profile_id", "version", "status", "total", "passed")),
    "routing.ConversationTestResult": (ConversationTestResult, ("run_id", "name", "passed", "result")),
    "routing.RolloutPlan": (RolloutPlan, ("profile_id", "candidate_id", "control_id", "status", "stage", "stages")),
    "routing.RolloutDecision": (RolloutDecision, ("plan_id", "action", "stage", "percentage", "figures")),
    "routing.ReleaseRequest": (ReleaseRequest, ("profile_id", "kind", "status", "plan_id", "version_id")),
}

# The relations followed through today's models, per historical model.
RELATIONS = {
    "routing.RoutingTestCase": ("profile",),
    "routing.ConversationTest": ("profile",),
    "routing.ConversationTestRun": ("profile",),
    "routing.ConversationTestResult": ("run__profile",),
    "routing.RolloutPlan": ("profile", "candidate__profile", "control"),
    "routing.RolloutDecision": ("plan__candidate",),
    "routing.ReleaseRequest": ("profile", "plan", "version", "requested_by"),
}

MOVED = (
    "routingtestcase",
    "conversationtest",
    "conversationtestrun",
    "rolloutplan",
    "rolloutdecision",
    "releaserequest",
)
GRANTED = {("releaserequest", "approve_release"), ("rolloutplan", "view_rolloutplan")}
GRANTED_AFTER = {"releases.approve_release", "releases.view_rolloutplan"}


def migrate_to_before_the_move(executor: MigrationExecutor):
    """Unapply the move (and the new app's migrations) and return the historical models of before it."""
    executor.migrate([*BEFORE_THE_MOVE.items(), *((app, None) for app in NEW_APPS)])
    executor.loader.build_graph()
    # Every other app stays at its latest migration (agents' profile has columns routing 0045 never knew).
    moved = {*BEFORE_THE_MOVE, *NEW_APPS}
    others = [(app, name) for app, name in executor.loader.graph.leaf_nodes() if app not in moved]
    return executor.loader.project_state([*BEFORE_THE_MOVE.items(), *others]).apps


def populate(apps) -> dict[str, list[int]]:
    """A profile with two versions, saved tests, a run, a running plan with its decisions, and a request."""
    add, made = row_maker(apps)

    profile = add("agents.AgentProfile", agent_id="keep_release_rows", name="Keep release rows")
    editor = add(settings.AUTH_USER_MODEL, username="requester", password="!")
    live, candidate = (add("routing.RoutingVersion", profile=profile, number=n, document={"n": n}) for n in (1, 2))
    add("routing.RoutingTestCase", profile=profile, name="fatura", message="fatura alta", expect={"intent": "billing"})
    add("routing.RoutingTestCase", profile=profile, name="from a message", message="oi", source_message_id=7)
    add("routing.ConversationTest", profile=profile, name="invoice explained", turns=[{"user": "fatura?"}])
    run = add("routing.ConversationTestRun", profile=profile, version="draft", source="admin", total=2, passed=1)
    for n, passed in enumerate((True, False)):
        add("routing.ConversationTestResult", run=run, name=f"test {n}", passed=passed, result={"turns": [n]})
    plan = add(
        "routing.RolloutPlan",
        name="to v2",
        profile=profile,
        candidate=candidate,
        control=live,
        status="running",
        stage=1,
    )
    for stage, action in enumerate(("start", "advance")):
        figures = {"candidate": {"samples": 10 * stage}}
        add("routing.RolloutDecision", plan=plan, action=action, stage=stage, percentage=5, reason="-", figures=figures)
    add("routing.ReleaseRequest", profile=profile, kind="rollout", plan=plan, version=candidate, requested_by=editor)
    add("routing.ReleaseRequest", profile=profile, kind="publish", status="declined", based_on=1)
    return made


def grant_and_record(apps, plan_id: int) -> tuple[int, int, dict[str, int], int]:
    """A group and its member given routing's approve and view permissions, and a field-history entry of the plan.

    Returns the group's and the user's ids, the content type ids of the moved models and the entry's id."""
    HistoricalContentType = apps.get_model("contenttypes", "ContentType")
    HistoricalPermission = apps.get_model("auth", "Permission")
    content_types = {
        model: HistoricalContentType.objects.get_or_create(app_label="routing", model=model)[0] for model in MOVED
    }
    permissions = [
        HistoricalPermission.objects.get_or_create(
            content_type=content_types[model], codename=codename, defaults={"name": codename}
        )[0]
        for model, codename in GRANTED
    ]
    group = apps.get_model("auth", "Group").objects.create(name="Approvers of before")
    group.permissions.set(permissions)
    user = apps.get_model(settings.AUTH_USER_MODEL).objects.create(username="approver", password="!")
    user.groups.add(group)
    entry = apps.get_model("auditlog", "LogEntry").objects.create(
        content_type=content_types["rolloutplan"], object_pk=str(plan_id), object_repr="to v2", action=1, changes={}
    )
    return group.pk, user.pk, {model: content_type.pk for model, content_type in content_types.items()}, entry.pk


def assert_relations_resolve(made: dict[str, list[int]]) -> None:
    for label, paths in RELATIONS.items():
        rows = list(ROWS[label][0].objects.filter(pk__in=made[label]))
        assert len(rows) == len(made[label]), f"{label}: rows are missing"
        for row in rows:
            for path in paths:
                if label == "routing.ReleaseRequest" and row.kind == "publish" and path != "profile":
                    continue  # a publish request names no plan, no version and (here) nobody
                assert reduce(getattr, path.split("__"), row) is not None, f"{label} {row.pk}: {path} is lost"


def assert_content_types_followed(group_id: int, user_id: int, content_type_ids: dict[str, int], entry_id: int):
    for model, pk in content_type_ids.items():
        moved = ContentType.objects.get(pk=pk)
        assert (moved.app_label, moved.model) == ("releases", model)
        assert moved.model_class() is not None, f"{model}: no model of today has this content type"
    assert not ContentType.objects.filter(app_label="routing", model__in=MOVED).exists()
    group = Group.objects.get(pk=group_id)
    assert {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.all()} == GRANTED_AFTER
    assert get_user_model().objects.get(pk=user_id).get_all_permissions() == GRANTED_AFTER
    assert LogEntry.objects.get(pk=entry_id).content_type.model_class() is RolloutPlan


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_database_filled_before_the_release_models_moved_keeps_their_rows_keys_and_permissions():
    if connection.vendor != "postgresql":
        pytest.skip("proves the migrations on PostgreSQL, the production database (run under scripts/services.py)")
    executor = MigrationExecutor(connection)
    if not set(executor.loader.graph.leaf_nodes()) <= set(executor.loader.applied_migrations):
        pytest.skip("the test database was not built by migrations (--nomigrations)")
    try:
        old_apps = migrate_to_before_the_move(executor)
        made = populate(old_apps)
        group_id, user_id, content_type_ids, entry_id = grant_and_record(old_apps, made["routing.RolloutPlan"][0])
        before = contents(ROWS, old_apps.get_model)

        migrate_to_latest(executor)

        assert contents(ROWS, lambda label: ROWS[label][0]) == before  # the same rows, ids and values
        assert_relations_resolve(made)
        assert_foreign_keys_declared(ROWS)
        assert_content_types_followed(group_id, user_id, content_type_ids, entry_id)
    finally:
        migrate_to_latest(executor)  # whatever happened: later tests expect today's schema
