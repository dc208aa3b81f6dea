"""The rollout view's API: a plan with real traffic and a rollback, read per slice of time and cohort."""

from __future__ import annotations

import itertools

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from analytics.rollouts import (
    ERROR_PLAN_NOT_FOUND,
    ERROR_ROLLOUTS_FORBIDDEN,
    ERROR_SLICES,
    MAX_SLICES,
    rollout_plan_list,
    rollout_view,
)
from analytics.tests.rollout_traffic import rolled_back_plan, started_plan, through_client
from common.errors import ERROR_NOT_AUTHENTICATED
from releases.models import RolloutPlan
from routing.rollout_plans import GUARD_METRICS

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def unthrottled(settings):
    settings.API_MESSAGE_RATE_PER_KEY = "off"


@pytest.fixture
def ready_plan(telecom) -> RolloutPlan:
    from agents.models import AgentProfile

    return RolloutPlan.objects.create(name="not started", profile=AgentProfile.objects.get(agent_id="telecom_contas"))


def test_a_rolled_back_plan_shows_both_cohorts_over_time_its_stage_and_its_decisions(telecom, api, staff_api):
    plan, rollback = rolled_back_plan(through_client(api))

    listed = staff_api.get("/api/analytics/rollouts").json()
    view = staff_api.get(f"/api/analytics/rollouts/{plan.pk}", {"slices": 6})

    assert view.status_code == 200, view.content
    assert [row for row in listed if row["id"] == plan.pk] == [
        {
            "id": plan.pk,
            "name": "invoices off",
            "target": "version",
            "profile": "telecom_contas",
            "candidate": 2,
            "control": 1,
            "status": "rolled_back",
            "status_label": "Rolled back",
            "stage": 0,
            "stage_label": "rolled back at stage 1 of 3 (20 %)",
            "stages": [20, 50, 100],
            "percentage": 0,
            "started_at": plan.started_at.isoformat(),
            "finished_at": plan.finished_at.isoformat(),
        }
    ]
    body = view.json()
    assert body["plan"]["status"] == "rolled_back" and body["plan"]["min_conversations"] == 3
    assert [metric["name"] for metric in body["metrics"]] == list(GUARD_METRICS)
    assert [stage["percentage"] for stage in body["stages"]] == [20]

    # The decision log, newest first: the rollback with the guard's verdicts, then the start.
    decisions = body["decisions"]
    assert [(d["action"], d["percentage"], d["actor"], d["by"]) for d in decisions] == [
        ("rollback", 20, "beat", "the guard"),
        ("start", 20, "test", "test"),
    ]
    assert decisions[0]["id"] == rollback.pk and "fallback rate" in decisions[0]["reason"]
    breached = [verdict["metric"] for verdict in decisions[0]["verdicts"] if verdict["breached"]]
    assert breached == ["fallback_rate"]
    assert decisions[0]["samples"] == {
        cohort: {
            "conversations": rollback.figures[cohort]["conversations"],
            "turns": rollback.figures[cohort]["turns"],
        }
        for cohort in ("candidate", "control")
    }
    assert decisions[1]["verdicts"] == [] and decisions[1]["samples"] == {}

    # The series: six slices from start to rollback, and together they hold every turn of both cohorts.
    series = body["series"]
    points = series["points"]
    assert len(points) == series["slices"] == 6
    assert points[0]["start"] == series["start"] and points[-1]["end"] == series["end"]
    assert all(a["end"] == b["start"] for a, b in itertools.pairwise(points))
    totals = {cohort: sum(point[cohort]["conversations"] for point in points) for cohort in ("candidate", "control")}
    assert totals == {cohort: rollback.figures[cohort]["conversations"] for cohort in ("candidate", "control")}
    assert totals["candidate"] > 0 and totals["control"] > 0
    assert sum(totals.values()) == 60
    # A turn's message and its route decision are stamped a few milliseconds apart, so at a slice's edge one can
    # fall on each side: a slice is judged where both cohorts have decisions in it, and the totals must agree.
    busy = [
        point
        for point in points
        if point["candidate"]["samples"]["fallback_rate"] and point["control"]["samples"]["fallback_rate"]
    ]
    assert busy, "no slice holds both cohorts"
    for point in busy:
        assert set(point["candidate"]["values"]) == set(GUARD_METRICS)
        assert point["candidate"]["values"]["fallback_rate"] > 0.9 > 0.1 > point["control"]["values"]["fallback_rate"]
    for cohort in ("candidate", "control"):
        decided = sum(point[cohort]["samples"]["fallback_rate"] for point in points)
        assert decided == sum(point[cohort]["turns"] for point in points) == rollback.figures[cohort]["turns"]


def test_the_default_is_twelve_slices_and_a_plan_never_started_has_no_series(staff_api, ready_plan):
    body = staff_api.get(f"/api/analytics/rollouts/{ready_plan.pk}").json()

    assert body["series"] == {"start": None, "end": None, "slices": 12, "points": []}
    assert body["decisions"] == [] and body["stages"] == []
    assert body["plan"]["status"] == "ready"


def test_an_unknown_plan_is_a_404_in_the_error_shape(staff_api, ready_plan):
    response = staff_api.get(f"/api/analytics/rollouts/{ready_plan.pk + 1000}")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert response.json()["error"]["message"] == ERROR_PLAN_NOT_FOUND


@pytest.mark.parametrize("slices", ["0", str(MAX_SLICES + 1), "many", "-3", "2.5"])
def test_slices_out_of_range_is_a_400_naming_slices(staff_api, ready_plan, slices):
    response = staff_api.get(f"/api/analytics/rollouts/{ready_plan.pk}", {"slices": slices})

    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"slices": [ERROR_SLICES]}


@pytest.mark.parametrize("path", ["rollouts", "rollouts/{id}"])
def test_an_api_key_staff_without_the_rights_and_anonymous_visitors_may_not_read_plans(
    api, django_user_model, ready_plan, path
):
    url = "/api/analytics/" + path.format(id=ready_plan.pk)
    clerk = django_user_model.objects.create_user("clerk", password="x", is_staff=True)
    clerk_api = APIClient()
    clerk_api.force_login(clerk)

    for client in (api, clerk_api):
        response = client.get(url)
        assert response.status_code == 403
        assert response.json()["error"] == {
            "code": "permission_denied",
            "message": ERROR_ROLLOUTS_FORBIDDEN,
            "fields": {},
        }
    anonymous = APIClient().get(url)
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["message"] == ERROR_NOT_AUTHENTICATED


@pytest.mark.parametrize("path", ["rollouts", "rollouts/{id}"])
def test_a_routing_editor_reads_the_plans_it_may_view_in_the_admin(editor, ready_plan, path):
    editor_api = APIClient()
    editor_api.force_login(editor)

    assert editor_api.get("/api/analytics/" + path.format(id=ready_plan.pk)).status_code == 200


def test_a_user_with_the_permission_who_is_not_staff_may_not_read_plans(django_user_model, ready_plan):
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user("outside-analyst", password="x", is_staff=False)
    user.user_permissions.add(Permission.objects.get(codename="view_analytics"))
    client = APIClient()
    client.force_login(user)

    assert client.get("/api/analytics/rollouts").status_code == 403


def test_the_pages_send_anonymous_visitors_to_the_login_and_open_for_editors(
    client, django_user_model, editor, staff_user, ready_plan
):
    for url in ("/analytics/rollouts/", f"/analytics/rollouts/{ready_plan.pk}/"):
        assert "/admin/login/" in client.get(url)["Location"]
    client.force_login(django_user_model.objects.create_user("clerk", password="x", is_staff=True))
    assert client.get("/analytics/rollouts/").status_code == 403
    client.force_login(editor)
    for url in ("/analytics/rollouts/", f"/analytics/rollouts/{ready_plan.pk}/"):
        assert client.get(url).status_code == 200, url
    page = client.get(f"/analytics/rollouts/{ready_plan.pk}/").content.decode()
    assert 'href="/analytics/"' not in page  # the dashboard, which the editor may not read, is not linked
    assert 'id="rollout-admin-link"' in page
    client.force_login(staff_user)
    listed = client.get("/analytics/rollouts/")
    assert listed.status_code == 200
    assert f'href="/analytics/rollouts/{ready_plan.pk}/"' in listed.content.decode()
    assert client.get(f"/analytics/rollouts/{ready_plan.pk}/").status_code == 200
    assert client.get(f"/analytics/rollouts/{ready_plan.pk + 1000}/").status_code == 404


def test_the_list_reads_one_query_whatever_the_number_of_plans_and_the_view_the_same_whatever_the_slices(
    staff_api, ready_plan, django_assert_num_queries
):
    for n in range(3):
        RolloutPlan.objects.create(name=f"plan {n}", profile=ready_plan.profile)
    with django_assert_num_queries(1):
        assert len(rollout_plan_list()) == 4

    plan = started_plan()
    counts = {}
    for slices in (2, 4):
        with CaptureQueriesContext(connection) as queries:
            rollout_view(plan.pk, slices=slices)
        counts[slices] = len(queries)
    assert counts[2] == counts[4]  # every slice of both cohorts in the same queries
    # the plan and its decisions, then cohorts_figures' seven queries (and on SQLite the latencies' eighth)
    assert counts[4] <= 2 + 7 + (connection.vendor != "postgresql")
