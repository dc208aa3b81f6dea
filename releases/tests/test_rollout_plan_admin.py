"""Rollout plans in the admin: create, start, pause, resume, abort; a started plan renamed from what its page shows;
every form error on the page; decisions listed; the rollback banner."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.template import Context, Template
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from agents.models import AgentProfile
from releases.admin.rollouts import RolloutPlanAdmin
from releases.models import RolloutPlan, RolloutPlanStatus
from releases.rollout.commands import plan_command, plan_start
from releases.versions import version_publish
from routing.models import Intent, Keyword
from routing.rollout_plans import GUARD_METRICS, default_rollout_stages
from tests.adminkit import error_messages, form_data, shown_fields, unread_errors, visible_text

pytestmark = pytest.mark.django_db


@pytest.fixture
def candidate(telecom):
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    version_publish(profile=profile, note="v1")
    Keyword.objects.create(intent=Intent.objects.get(profile=profile, name="billing_invoice_explanation"), text="zz")
    return version_publish(profile=profile, note="zz", release=False)


def command_url(plan, command):
    return reverse("admin:releases_rolloutplan_command", args=[plan.pk, command])


def guard_rows(**limits: tuple[str, str]) -> dict[str, str]:
    """The guards table's inputs (releases.rollout.forms.GuardsWidget): per metric its relative and absolute limit, as
    typed (percentages for rates); the metrics not named are left empty (not guarded)."""
    posted = {}
    for index, name in enumerate(GUARD_METRICS):
        relative, absolute = limits.get(name, ("", ""))
        posted[f"guards_{2 * index}"], posted[f"guards_{2 * index + 1}"] = relative, absolute
    return posted


def test_an_admin_creates_a_plan_starts_pauses_resumes_and_aborts_it(admin_client, candidate):
    added = admin_client.post(
        reverse("admin:releases_rolloutplan_add"),
        {
            "name": "zz for invoices",
            "target": "version",
            "profile": candidate.profile.pk,
            "candidate": candidate.pk,
            "stages": "10, 50, 100",
            "hold_minutes": 30,
            "min_conversations": 100,
            **guard_rows(fallback_rate=("25", "")),
            "max_errors": 5,
            "alpha": 0.01,
            "webhook_url": "",
            "decisions-TOTAL_FORMS": 0,
            "decisions-INITIAL_FORMS": 0,
        },
    )
    assert added.status_code == 302, added.content.decode()[:3000]
    plan = RolloutPlan.objects.get()
    page = admin_client.get(reverse("admin:releases_rolloutplan_change", args=[plan.pk])).content.decode()
    assert command_url(plan, "start") in page and command_url(plan, "pause") not in page

    started = admin_client.post(command_url(plan, "start"), follow=True).content.decode()
    assert "Started at 10 %" in started
    plan.refresh_from_db()
    assert plan.status == RolloutPlanStatus.RUNNING and plan.control.number == 1
    assert command_url(plan, "pause") in started and command_url(plan, "start") not in started
    # Started: what it rolls out and how can no longer be edited.
    assert 'name="stages"' not in started and 'name="name"' in started

    admin_client.post(command_url(plan, "pause"))
    plan.refresh_from_db()
    assert plan.status == RolloutPlanStatus.PAUSED
    admin_client.post(command_url(plan, "resume"))
    aborted = admin_client.post(command_url(plan, "abort"), follow=True).content.decode()
    plan.refresh_from_db()
    assert plan.status == RolloutPlanStatus.ABORTED and "Aborted by hand" in aborted
    assert plan.stages == [10, 50, 100] and plan.guards == [{"metric": "fallback_rate", "threshold": 0.25}]
    decisions = admin_client.get(reverse("admin:releases_rolloutdecision_changelist")).content.decode()
    assert decisions.count('<td class="field-actor_shown">admin</td>') >= 4


def test_a_plans_webhook_url_is_shown_masked_and_kept_when_sent_back_masked(admin_client, candidate):
    hook = "https://hooks.example/rollouts?sig=r0ll0ut-s1g"
    plan = RolloutPlan.objects.create(name="zz", profile=candidate.profile, candidate=candidate, webhook_url=hook)
    change = reverse("admin:releases_rolloutplan_change", args=[plan.pk])

    page = admin_client.get(change)
    listing = admin_client.get(reverse("admin:releases_rolloutplan_changelist")).content.decode()
    data = form_data(page)
    data["name"] = "zz, renamed"
    saved = admin_client.post(change, data)

    assert "r0ll0ut-s1g" not in page.content.decode() and "r0ll0ut-s1g" not in listing
    assert data["webhook_url"] == "https://hooks.example/rollouts?sig=***"
    assert saved.status_code == 302, error_messages(saved)
    plan.refresh_from_db()
    assert (plan.name, plan.webhook_url) == ("zz, renamed", hook)


def started(candidate, status: str) -> RolloutPlan:
    """A plan of ``candidate`` started by the operator, then paused when ``status`` says so."""
    plan = RolloutPlan.objects.create(
        name="zz", profile=candidate.profile, candidate=candidate, stages=[10, 50, 100], webhook_url=""
    )
    plan_start(plan, actor="operator")
    if status == RolloutPlanStatus.PAUSED:
        plan_command(plan, "pause", actor="operator")
    plan.refresh_from_db()
    assert plan.status == status
    return plan


@pytest.mark.sqlite_too
@pytest.mark.parametrize("status", [RolloutPlanStatus.RUNNING, RolloutPlanStatus.PAUSED])
def test_a_started_plan_is_renamed_with_what_its_page_shows(editor_client, candidate, status):
    plan = started(candidate, status)
    change = reverse("admin:releases_rolloutplan_change", args=[plan.pk])
    page = editor_client.get(change)
    data = form_data(page)  # what a browser sends: the stages and guards are text here
    data["name"] = "zz, renamed"

    saved = editor_client.post(change, data)

    assert saved.status_code == 302, error_messages(saved)
    plan.refresh_from_db()
    assert (plan.name, plan.status, plan.stages) == ("zz, renamed", status, [10, 50, 100])


@pytest.mark.sqlite_too
def test_a_started_plan_whose_stored_guards_todays_rules_refuse_says_so_on_its_page(editor_client, candidate):
    # A metric a later version no longer guards, say: the guards are read-only text now, and the plan's own check
    # of them (RolloutPlan.clean) named a field the form does not hold — Django answered 500.
    plan = started(candidate, RolloutPlanStatus.RUNNING)
    RolloutPlan.objects.filter(pk=plan.pk).update(guards=[{"metric": "retired_rate", "threshold": 0.5}])
    change = reverse("admin:releases_rolloutplan_change", args=[plan.pk])
    data = form_data(editor_client.get(change))
    data["name"] = "zz, renamed"

    answer = editor_client.post(change, data)

    assert answer.status_code == 200 and unread_errors(answer) == []
    assert "Guards: Guard 1: metric must be one of" in visible_text(answer.content.decode())
    plan.refresh_from_db()
    assert plan.name == "zz"


@pytest.mark.sqlite_too
def test_a_plans_form_has_no_field_its_page_does_not_show_ready_or_started(admin_client, candidate):
    ready = RolloutPlan.objects.create(name="ready", profile=candidate.profile, candidate=candidate)
    running = started(candidate, RolloutPlanStatus.RUNNING)
    for plan in (ready, running):
        page = admin_client.get(reverse("admin:releases_rolloutplan_change", args=[plan.pk]))
        assert set(page.context["adminform"].form.fields) == shown_fields(page), plan.status


@pytest.mark.sqlite_too
def test_a_field_a_plans_page_leaves_out_is_left_out_of_its_form(admin_client, candidate, monkeypatch):
    # An admin whose fieldsets leave out a field its form declares (how a started plan's stages once were): the form
    # does not require it, and the plan takes the model's default.
    shown = RolloutPlanAdmin.get_fieldsets

    def without_stages(self, request, obj=None):
        return [
            (title, {**o, "fields": [f for f in o["fields"] if f != "stages"]})
            for title, o in shown(self, request, obj)
        ]

    monkeypatch.setattr(RolloutPlanAdmin, "get_fieldsets", without_stages)
    add = reverse("admin:releases_rolloutplan_add")
    page = admin_client.get(add)
    assert "stages" not in page.context["adminform"].form.fields
    data = form_data(page)
    data.update(name="no stages", target="version", profile=candidate.profile.pk, candidate=candidate.pk)

    answer = admin_client.post(add, data)

    assert answer.status_code == 302, error_messages(answer)
    assert RolloutPlan.objects.get(name="no stages").stages == default_rollout_stages()


def test_a_plan_with_wrong_settings_is_refused_naming_the_field(admin_client, candidate):
    answer = admin_client.post(
        reverse("admin:releases_rolloutplan_add"),
        {
            "name": "bad",
            "target": "version",
            "profile": candidate.profile.pk,
            "candidate": candidate.pk,
            "stages": "50, 20",
            "hold_minutes": 30,
            "min_conversations": 100,
            **guard_rows(fallback_rate=("-5", ""), p95_latency_ms=("", "many")),
            "max_errors": 5,
            "alpha": 0.01,
            "decisions-TOTAL_FORMS": 0,
            "decisions-INITIAL_FORMS": 0,
        },
    )
    page = answer.content.decode()
    assert answer.status_code == 200 and not RolloutPlan.objects.exists()
    assert "Stages: each percentage must be higher than the one before it" in page
    assert "Guards, fallback rate: the relative limit is a percentage from 0 to 1000." in page
    assert "Guards, p95 latency: the absolute limit is a number from 0 to 600000 ms." in page


def test_a_command_needs_the_change_permission_and_a_post(client, candidate):
    plan = RolloutPlan.objects.create(name="p", profile=candidate.profile, candidate=candidate)
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_rolloutplan"))
    client.force_login(viewer)

    assert client.post(command_url(plan, "start")).status_code == 403
    assert client.get(command_url(plan, "start")).status_code == 403  # not even the confirmation page
    plan.refresh_from_db()
    assert plan.status == RolloutPlanStatus.READY


def test_every_admin_page_announces_a_plan_that_rolled_itself_back_today(admin_client, candidate):
    RolloutPlan.objects.create(
        name="bad invoices",
        profile=candidate.profile,
        candidate=candidate,
        status=RolloutPlanStatus.ROLLED_BACK,
        finished_at=timezone.now(),
    )

    page = admin_client.get(reverse("admin:index")).content.decode()

    assert "rollout-banner" in page and "bad invoices" in page and "rolled itself back" in page


def test_the_banner_reads_what_it_shows_in_one_query_however_many_plans_rolled_back(rf, admin_user, candidate):
    for name in ("bad invoices", "bad refunds"):
        RolloutPlan.objects.create(
            name=name,
            profile=candidate.profile,
            candidate=candidate if name == "bad invoices" else None,
            status=RolloutPlanStatus.ROLLED_BACK,
            finished_at=timezone.now(),
        )
    request = rf.get("/admin/")
    request.user = admin_user

    with CaptureQueriesContext(connection) as queries:
        banner = Template("{% load rollout_banner %}{% rollout_banner %}").render(Context({"request": request}))

    assert len(queries) == 1, [query["sql"] for query in queries]
    assert "bad invoices" in banner and f"{candidate.profile.agent_id} v{candidate.number}" in banner
    assert "bad refunds" in banner


def test_a_routing_editor_adds_a_plan_and_starts_it(editor_client, editor, candidate):
    add = reverse("admin:releases_rolloutplan_add")
    data = form_data(editor_client.get(add))
    data.update(name="zz for editors", target="version", profile=candidate.profile.pk, candidate=candidate.pk)

    added = editor_client.post(add, data)

    assert added.status_code == 302, error_messages(added)
    plan = RolloutPlan.objects.get()
    assert plan.created_by == editor
    page = editor_client.get(reverse("admin:releases_rolloutplan_change", args=[plan.pk])).content.decode()
    assert command_url(plan, "start") in page
    started = editor_client.post(command_url(plan, "start"), follow=True)
    assert started.status_code == 200
    plan.refresh_from_db()
    assert plan.status == RolloutPlanStatus.RUNNING
    decisions = editor_client.get(reverse("admin:releases_rolloutdecision_changelist"))
    assert decisions.status_code == 200 and plan.decisions.get().actor == "admin: editor"
    assert '<td class="field-actor_shown">editor</td>' in decisions.content.decode()  # who, as people say it


def test_a_routing_editor_may_not_delete_a_plan(editor_client, candidate):
    plan = RolloutPlan.objects.create(name="p", profile=candidate.profile, candidate=candidate)

    assert editor_client.get(reverse("admin:releases_rolloutplan_delete", args=[plan.pk])).status_code == 403
    assert RolloutPlan.objects.filter(pk=plan.pk).exists()


def test_the_rollback_banner_shows_to_the_routing_editors_and_opens_the_plan(editor_client, candidate):
    plan = RolloutPlan.objects.create(
        name="bad invoices",
        profile=candidate.profile,
        candidate=candidate,
        status=RolloutPlanStatus.ROLLED_BACK,
        finished_at=timezone.now(),
    )

    page = editor_client.get(reverse("admin:index")).content.decode()

    assert "rollout-banner" in page and "bad invoices" in page
    plan_url = reverse("admin:releases_rolloutplan_change", args=[plan.pk])
    assert f'href="{plan_url}"' in page
    assert editor_client.get(plan_url).status_code == 200


def test_the_rollback_banner_names_the_plan_without_a_link_for_who_may_publish_but_not_open_plans(client, candidate):
    RolloutPlan.objects.create(
        name="bad invoices",
        profile=candidate.profile,
        candidate=candidate,
        status=RolloutPlanStatus.ROLLED_BACK,
        finished_at=timezone.now(),
    )
    publisher = User.objects.create_user("publisher", password="pw", is_staff=True)
    publisher.user_permissions.add(Permission.objects.get(codename="add_routingversion"))
    client.force_login(publisher)

    page = client.get(reverse("admin:index")).content.decode()

    assert "bad invoices" in page and "rolloutplan" not in page


def test_the_rollback_banner_is_not_shown_to_staff_who_neither_edit_nor_release(client, candidate):
    RolloutPlan.objects.create(
        name="bad invoices",
        profile=candidate.profile,
        candidate=candidate,
        status=RolloutPlanStatus.ROLLED_BACK,
        finished_at=timezone.now(),
    )
    clerk = User.objects.create_user("clerk", password="pw", is_staff=True)
    clerk.user_permissions.add(Permission.objects.get(codename="view_conversation"))
    client.force_login(clerk)

    assert "bad invoices" not in client.get(reverse("admin:index")).content.decode()


def test_a_routing_editor_rolls_out_versions_but_not_the_multi_agent_flag(editor_client, candidate):
    add_page = editor_client.get(reverse("admin:releases_rolloutplan_add")).content.decode()
    flag_plan = RolloutPlan.objects.create(name="multi", target="multi_agent", profile=candidate.profile)

    page = editor_client.get(reverse("admin:releases_rolloutplan_change", args=[flag_plan.pk]))

    assert 'value="version"' in add_page and 'value="multi_agent"' not in add_page
    assert page.status_code == 200 and command_url(flag_plan, "start") not in page.content.decode()
    assert editor_client.post(command_url(flag_plan, "start")).status_code == 403
    flag_plan.refresh_from_db()
    assert flag_plan.status == RolloutPlanStatus.READY
