"""A rollout plan's admin page speaks in words and asks before it acts: stages as a list of percentages and guards as
a table (errors naming the field), the plan's history and its decisions in sentences, stages counted from 1 in the
admin, the rollout view and the list alike, a completed plan serving 100 %, confirmations for Start, Advance and
Abort, Pause/Resume styled as the admin's tools, a candidate made from the draft without a shell."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone

from agents.models import AgentProfile
from releases.models import RolloutDecision, RolloutPlan, RolloutPlanStatus
from releases.rollout.forms import GuardsField, StagesField
from releases.rollout.guard import guard_verdict
from releases.tests.test_rollout_guard import every_answer_slower
from releases.versions import version_publish
from routing.models import Intent, Keyword, RoutingVersion
from routing.rollout_plans import GUARD_METRICS, guard_errors
from routing.rollout_words import actor_words, history_words, plan_stage_words, stage_words
from routing.selectors import live_version
from tests.adminkit import form_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def candidate(telecom) -> RoutingVersion:
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    version_publish(profile=profile, note="v1")
    Keyword.objects.create(intent=Intent.objects.get(profile=profile, name="billing_invoice_explanation"), text="zz")
    return version_publish(profile=profile, note="zz", release=False)


def plan_url(plan: RolloutPlan) -> str:
    return reverse("admin:releases_rolloutplan_change", args=[plan.pk])


def command_url(plan: RolloutPlan, command: str) -> str:
    return reverse("admin:releases_rolloutplan_command", args=[plan.pk, command])


def decided(plan: RolloutPlan, action: str, stage: int, percentage: int, actor: str, minute: int, **figures):
    at = dt.datetime(2026, 11, 25, 16, minute, tzinfo=dt.UTC)
    return RolloutDecision.objects.create(
        plan=plan,
        action=action,
        stage=stage,
        percentage=percentage,
        reason=f"{action} reason",
        actor=actor,
        created_at=at,
        figures=figures,
    )


# -- the form ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "stages", "error"),
    [
        ("10, 50, 100", [10, 50, 100], ""),
        ("10 %\n50 %\n100 %", [10, 50, 100], ""),  # one a line, with the sign
        ("100", [100], ""),
        ("50, 20, 100", None, "Stages: each percentage must be higher than the one before it"),
        ("10, 10, 100", None, "Stages: each percentage must be higher than the one before it"),
        ("10, 50", None, "Stages: the last stage must be 100 %"),
        ("0, 100", None, "Stages: each stage is a whole percentage from 1 to 100"),
        ("10, 150", None, "Stages: each stage is a whole percentage from 1 to 100"),
        ("10.5, 100", None, "Stages: “10.5” is not a whole percentage"),
        ("", None, "Stages: give at least one percentage"),
    ],
)
def test_stages_are_a_list_of_percentages_rising_to_100_with_errors_naming_the_field(typed, stages, error):
    field = StagesField()
    if error:
        with pytest.raises(Exception, match=error):
            field.clean(typed)
    else:
        assert field.clean(typed) == stages


def test_guards_are_a_table_of_rows_stored_as_fractions_and_shown_back_as_typed():
    field = GuardsField(required=False)
    typed = [""] * (2 * len(GUARD_METRICS))
    typed[0], typed[1] = "25", "40"  # fallback rate: 25 % worse than the control, never above 40 %
    typed[11] = "0.6"  # judge score: never below 0.6
    typed[13] = "2500"  # p95 latency: never above 2.5 s

    guards = field.clean(typed)

    assert guards == [
        {"metric": "fallback_rate", "threshold": 0.25, "absolute": 0.4},
        {"metric": "judge_score", "absolute": 0.6},
        {"metric": "p95_latency_ms", "absolute": 2500.0},
    ]
    assert guard_errors(guards) == []
    # The escalation and abandonment rates, last, are not limited.
    assert field.widget.decompress(guards) == ["25", "40", *[None] * 9, "0.6", None, "2500", *[None] * 4]
    assert not field.has_changed(guards, field.widget.decompress(guards))


def test_a_guard_needs_a_known_metric_once_and_a_limit_each_error_naming_the_guard():
    errors = guard_errors(
        [
            {"metric": "happiness", "threshold": 0.1},
            {"metric": "fallback_rate"},
            {"metric": "judge_score", "absolute": 3},
            {"metric": "judge_score", "threshold": 0.1},
        ]
    )

    assert errors[0].startswith("Guard 1: metric must be one of fallback_rate")
    assert "Guard 2 (Fallback rate): give a relative limit, an absolute limit or both." in errors
    assert "Guard 3 (Judge score): absolute must be a number from 0 to 1." in errors
    assert "Guard 4 (Judge score): this metric is guarded already; give it one row." in errors


@pytest.mark.sqlite_too
def test_the_add_page_shows_stages_as_a_list_and_guards_as_a_table_with_no_json_nor_shell(admin_client, candidate):
    page = admin_client.get(reverse("admin:releases_rolloutplan_add")).content.decode()

    assert 'name="stages" value="5, 25, 50, 100"' in page
    assert 'class="rollout-guards"' in page and page.count('class="guard-relative"') == len(GUARD_METRICS)
    assert "Make the candidate from the draft" in page
    assert "telecom_contas version 2 (never served to everyone)" in page
    assert "telecom_contas version 1 (live now)" in page
    for internal in ("routing_publish", "--candidate", "manage.py", "docs/rollouts.md", '[{"metric"', "Stage:"):
        assert internal not in page, internal


def test_a_candidate_is_made_from_the_draft_in_the_plan_form_without_a_shell(admin_client, admin_user, telecom):
    version_publish(profile=telecom, note="v1")
    Keyword.objects.create(intent=Intent.objects.get(profile=telecom, name="billing_invoice_explanation"), text="zz")
    data = form_data(admin_client.get(reverse("admin:releases_rolloutplan_add")))
    data.update({"name": "zz", "profile": telecom.pk, "candidate": "", "from_draft": "on", "stages": "10, 100"})

    answer = admin_client.post(reverse("admin:releases_rolloutplan_add"), data)

    assert answer.status_code == 302, answer.content.decode()[-3000:]
    plan = RolloutPlan.objects.get()
    assert (plan.candidate.number, plan.candidate.created_by, plan.status) == (2, admin_user, RolloutPlanStatus.READY)
    assert live_version(telecom).number == 1
    assert plan.guards == RolloutPlan._meta.get_field("guards").get_default()  # the table's defaults, kept


def test_a_candidate_from_an_unchanged_draft_is_refused_on_its_field(admin_client, telecom):
    version_publish(profile=telecom, note="v1")
    data = form_data(admin_client.get(reverse("admin:releases_rolloutplan_add")))
    data.update({"name": "nothing", "profile": telecom.pk, "candidate": "", "from_draft": "on"})

    answer = admin_client.post(reverse("admin:releases_rolloutplan_add"), data)

    assert answer.status_code == 200 and not RolloutPlan.objects.exists()
    assert "is the same as the live version 1" in str(answer.context["adminform"].form.errors["from_draft"])


# -- words -------------------------------------------------------------------------------------------------------


@pytest.mark.sqlite_too
def test_a_plans_history_and_decisions_are_said_in_words(admin_client, candidate):
    plan = RolloutPlan.objects.create(
        name="zz for invoices",
        profile=candidate.profile,
        candidate=candidate,
        stages=[50, 100],
        status=RolloutPlanStatus.ROLLED_BACK,
        stage=1,
        history=[["2026-11-25T16:02:00+00:00", 50], ["2026-11-25T16:04:00+00:00", 100]],
    )
    decided(plan, "start", 0, 50, "admin: ana", 2)
    decided(plan, "hold", 0, 50, "beat", 3)
    decided(plan, "advance", 1, 100, "beat", 4)
    why = "negative-feedback rate 100 % against 0 % for the control (at most 0.5 % allowed; Fisher p = 9.6e-18)"
    decided(plan, "rollback", 1, 100, "watch", 5, why=why)

    page = admin_client.get(plan_url(plan)).content.decode()

    assert "Started at 50 % on 25 Nov 2026, 16:02 by ana" in page
    assert "The guard advanced to stage 2 of 2 (100 %) on 25 Nov 2026, 16:04" in page
    assert f"Rolled back automatically on 25 Nov 2026, 16:05: {why}" in page
    assert "rolled back at stage 2 of 2 (100 %)" in page
    assert "50 → 100 % of new conversations" in page
    assert "negative-feedback rate: at most 50 % worse than the control" in page
    assert "hold reason" not in page  # the holds are in the decisions' own list
    for internal in ("[[", "2026-11-25T16", "admin: ana", ">watch<", ">beat<", '"threshold"'):
        assert internal not in page, internal
    listed = admin_client.get(reverse("admin:releases_rolloutdecision_changelist")).content.decode()
    assert '<td class="field-actor_shown">the guard</td>' in listed and "admin: ana" not in listed


def test_who_decided_is_said_as_a_person_reads_it():
    assert actor_words("beat") == actor_words("watch") == "the guard"
    assert actor_words("admin: ana") == "ana"
    assert actor_words("admin: ana, approved by bob") == "ana, approved by bob"
    assert actor_words("manage.py rollout (ana)") == "ana (command line)"


# -- stage numbers -----------------------------------------------------------------------------------------------


@pytest.mark.sqlite_too
def test_stage_numbers_agree_between_the_admin_the_list_the_view_and_the_decisions(admin_client, candidate):
    plan = RolloutPlan.objects.create(
        name="zz", profile=candidate.profile, candidate=candidate, stages=[10, 50, 100], status="running", stage=1
    )
    decided(plan, "advance", 1, 50, "beat", 10)

    admin_page = admin_client.get(plan_url(plan)).content.decode()
    admin_list = admin_client.get(reverse("admin:releases_rolloutplan_changelist")).content.decode()
    rollouts = admin_client.get("/analytics/rollouts/").content.decode()
    view = admin_client.get(f"/api/analytics/rollouts/{plan.pk}").json()

    assert plan_stage_words(plan) == stage_words(1, [10, 50, 100]) == "stage 2 of 3 (50 %)"
    assert "stage 2 of 3 (50 %)" in admin_page and "stage 2 of 3 (50 %)" in admin_list
    assert "Stage 2 of 3 (50 %)" in rollouts
    assert view["plan"]["stage_label"] == "stage 2 of 3 (50 %)" and view["decisions"][0]["stage"] == 1
    assert ">1<" not in admin_page.split('id="rolloutdecision_set-group"')[-1].split("</table>")[0]


def test_a_completed_plan_serves_the_candidate_to_everyone_not_0_percent(candidate):
    plan = RolloutPlan(profile=candidate.profile, candidate=candidate, stages=[50, 100], stage=1, status="completed")

    assert plan.percentage == 100
    assert plan_stage_words(plan) == "completed: stage 2 of 2 (100 %)"
    plan.status = RolloutPlanStatus.ROLLED_BACK
    assert plan.percentage == 0


# -- confirmations -----------------------------------------------------------------------------------------------


@pytest.mark.sqlite_too
def test_start_advance_and_abort_ask_first_saying_what_happens_to_customers(admin_client, candidate):
    plan = RolloutPlan.objects.create(name="zz", profile=candidate.profile, candidate=candidate, stages=[10, 50, 100])

    page = admin_client.get(plan_url(plan)).content.decode()
    confirm_start = admin_client.get(command_url(plan, "start")).content.decode()
    plan.refresh_from_db()
    assert plan.status == RolloutPlanStatus.READY  # asking changed nothing
    assert f'<a href="{command_url(plan, "start")}" id="rollout-start">Start</a>' in page
    assert "10 % of new conversations will get version 2 (the others keep version 1, live now)" in confirm_start
    assert "Yes, start it" in confirm_start

    started = admin_client.post(command_url(plan, "start"), follow=True).content.decode()
    assert "Started at stage 1 of 3 (10 %): 10 % of new conversations get version 2." in started
    confirm_advance = admin_client.get(command_url(plan, "advance")).content.decode()
    confirm_abort = admin_client.get(command_url(plan, "abort")).content.decode()
    plan.refresh_from_db()
    assert (plan.status, plan.stage) == (RolloutPlanStatus.RUNNING, 0)
    assert "50 % of new conversations will get version 2 (now 10 %): stage 2 of 3" in confirm_advance
    assert "Every conversation goes back to version 1 from its next message (now 10 % get version 2)." in confirm_abort
    assert "Yes, abort it" in confirm_abort

    admin_client.post(command_url(plan, "abort"))
    plan.refresh_from_db()
    assert plan.status == RolloutPlanStatus.ABORTED


@pytest.mark.sqlite_too
def test_pause_and_resume_act_at_once_and_every_command_is_styled_as_the_admins_tools(admin_client, candidate):
    plan = RolloutPlan.objects.create(
        name="zz",
        profile=candidate.profile,
        candidate=candidate,
        stages=[10, 100],
        status="running",
        started_at=timezone.now(),
    )

    page = admin_client.get(plan_url(plan)).content.decode()
    tools = page.split('class="object-tools"')[1].split("</ul>")[0]

    assert '<button type="submit" class="object-tool" id="rollout-pause">Pause</button>' in tools
    assert f'<a href="{command_url(plan, "advance")}" id="rollout-advance">Advance now</a>' in tools
    assert f'<a href="{command_url(plan, "abort")}" id="rollout-abort">Abort</a>' in tools
    assert "button.object-tool" in page  # their style: the object tools' own colours and shape
    admin_client.post(command_url(plan, "pause"))
    plan.refresh_from_db()
    assert plan.status == RolloutPlanStatus.PAUSED


# -- absolute limits -------------------------------------------------------------------------------------------


def rate(x, n):
    return {"x": x, "n": n, "rate": x / n}


@pytest.mark.parametrize(
    ("candidate", "breached"),
    [
        (rate(45, 100), True),  # 45 % against a limit of 30 %: binomial p ≈ 0.0007
        (rate(4, 10), False),  # 40 %, but ten turns prove nothing
        (rate(25, 100), False),  # within the limit
    ],
)
def test_an_absolute_limit_rolls_back_what_passes_it_significantly_whatever_the_control(candidate, breached):
    guard = {"metric": "fallback_rate", "absolute": 0.3}

    verdict = guard_verdict(guard, {"fallback_rate": candidate}, {"fallback_rate": rate(50, 100)}, 0.01)

    assert verdict.breached is breached, verdict.reason
    assert "limit of 30 %" in verdict.reason


def test_a_judge_score_and_a_latency_have_absolute_limits_too():
    judge = {"metric": "judge_score", "absolute": 0.8}
    low = {"judge_score": {"n": 50, "mean": 0.6, "sd": 0.1}}
    fine = {"judge_score": {"n": 50, "mean": 0.85, "sd": 0.1}}
    latency = {"metric": "p95_latency_ms", "absolute": 1000}

    assert guard_verdict(judge, low, low, 0.01).breached  # the control is as low: the limit holds anyway
    assert not guard_verdict(judge, fine, low, 0.01).breached
    assert guard_verdict(
        latency, {"p95_latency_ms": 1200.0}, {"p95_latency_ms": 1300.0}, 0.01, slower=every_answer_slower
    ).breached
    verdict = guard_verdict(latency, {"p95_latency_ms": 900.0}, {"p95_latency_ms": 100.0}, 0.01)
    assert not verdict.breached and verdict.reason == "p95 latency 900 ms: within the limit of 1000 ms"


def test_both_limits_of_a_guard_are_judged_and_the_breached_one_is_said():
    guard = {"metric": "fallback_rate", "threshold": 0.25, "absolute": 0.3}

    verdict = guard_verdict(guard, {"fallback_rate": rate(45, 100)}, {"fallback_rate": rate(44, 100)}, 0.01)

    assert verdict.breached and "above the limit of 30 %" in verdict.reason and "against" not in verdict.reason


def test_a_plans_history_leaves_the_holds_out_and_reads_oldest_first(candidate):
    plan = RolloutPlan.objects.create(name="zz", profile=candidate.profile, candidate=candidate, stages=[10, 100])
    decided(plan, "pause", 0, 10, "admin: ana", 6)
    decided(plan, "start", 0, 10, "manage.py rollout (bob)", 1)
    decided(plan, "hold", 0, 10, "beat", 3)

    assert history_words(plan.decisions.all(), plan.stages) == [
        "Started at 10 % on 25 Nov 2026, 16:01 by bob (command line)",
        "Paused at 10 % on 25 Nov 2026, 16:06 by ana",
    ]
