"""The two-person rule holds on every path that makes a version live for customers.

A revert needs no second person only when it goes back to a version customers were all served before (released:
published, reverted to, or its rollout plan completed); a staged rollout's candidate reaches customers only through
its approved plan — the very plan the approval was given for, unchanged since it started, advanced by hand only by a
second person. The admin, the commands (``routing_revert``, ``rollout``, ``import_config --publish``) and the
services refuse alike, with the same message, and a refusal stores nothing. The operator at the shell is not held.
"""

from __future__ import annotations

import datetime as dt
import html
import re
from io import StringIO
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.messages.storage.cookie import CookieStorage
from django.core.management import CommandError, call_command
from django.utils import timezone

from agents.models import AgentProfile
from releases.admin.rollouts import ERROR_STARTED_MEANWHILE, RolloutPlanAdmin
from releases.approvals import draft_rollout, publish_request, release_request_approve
from releases.models import ReleaseRequest, ReleaseStatus, RolloutDecisionAction, RolloutPlan, RolloutPlanStatus
from releases.rollout.commands import (
    ERROR_ADVANCE_SECOND_PERSON,
    ERROR_PLAN_CHANGED,
    PlanChanged,
    plan_command,
    plan_start,
)
from releases.rollout.guard import plan_evaluate
from releases.tests.test_import_lands_in_draft import ROUTING as DRAFTED
from releases.tests.test_release_approval import STAGED, messages_of, publish_url
from releases.versions import (
    ERROR_APPROVAL_REQUIRED,
    ERROR_REVERT_NEVER_RELEASED,
    ApprovalRequired,
    version_publish,
    version_revert,
)
from routing import snapshot
from routing.documents import profile_documents
from routing.models import Keyword, LiveRollout, RoutingVersion
from routing.rollout_plans import plan_fingerprint
from routing.selectors import live_version

pytestmark = pytest.mark.django_db

HELD = ERROR_APPROVAL_REQUIRED.format(agent_id="telecom_contas")
QUICK = {"stages": [10, 100], "hold_minutes": 0, "min_conversations": 0}  # the guard moves it at each evaluation


def revert_url(version: RoutingVersion) -> str:
    return f"/admin/routing/routingversion/{version.pk}/revert/"


def command_url(plan: RolloutPlan, command: str) -> str:
    return f"/admin/releases/rolloutplan/{plan.pk}/command/{command}/"


def numbers(profile: AgentProfile) -> list[int]:
    return list(RoutingVersion.objects.filter(profile=profile).order_by("number").values_list("number", flat=True))


def plan_fields(plan: RolloutPlan) -> dict[str, Any]:
    """The plan's change form as its page would post it unchanged (guards left empty)."""
    return {
        "name": plan.name,
        "target": plan.target,
        "profile": plan.profile_id,
        "candidate": plan.candidate_id,
        "stages": ", ".join(str(stage) for stage in plan.stages),
        "hold_minutes": plan.hold_minutes,
        "min_conversations": plan.min_conversations,
        "max_errors": plan.max_errors,
        "alpha": plan.alpha,
        "webhook_url": plan.webhook_url,
    }


def approved_rollout(profile: AgentProfile, editor, approver, **settings) -> RolloutPlan:
    """The editor's staged rollout of the draft, approved by the approver: running at its first stage."""
    outcome = draft_rollout(profile=profile, user=editor, settings={**QUICK, **settings}, note="modem")
    assert outcome.request is not None
    release_request_approve(request=outcome.request, user=approver)
    outcome.plan.refresh_from_db()
    assert outcome.plan.status == RolloutPlanStatus.RUNNING
    return outcome.plan


@pytest.fixture
def lead(django_user_model, editor, approver):
    """A routing editor who may approve releases too, and asked for nothing."""
    user = django_user_model.objects.create_user("lead", "lead@example.com", "lead-password", is_staff=True)
    user.groups.add(*editor.groups.all(), *approver.groups.all())
    return user


# -- reverts --------------------------------------------------------------------------------------------------


@pytest.mark.sqlite_too
def test_an_editor_cannot_put_a_staged_candidate_live_by_reverting_to_it_in_the_admin(client, editor, guarded):
    client.force_login(editor)
    client.post(publish_url(guarded), STAGED)  # a request: candidate version 2 is stored, its plan stays ready
    candidate = RoutingVersion.objects.get(profile=guarded, number=2)
    assert live_version(guarded).number == 1 and ReleaseRequest.objects.get().status == ReleaseStatus.PENDING

    confirm = html.unescape(client.get(revert_url(candidate)).content.decode())
    refused = client.post(revert_url(candidate), follow=True)

    never = ERROR_REVERT_NEVER_RELEASED.format(number=2)
    assert any(HELD in message and never in message for message in messages_of(refused))
    assert live_version(guarded).number == 1 and numbers(guarded) == [1, 2]
    assert ReleaseRequest.objects.get().status == ReleaseStatus.PENDING
    assert HELD in confirm and never in confirm and "Yes, revert to version 2" not in confirm


def test_the_revert_command_and_the_service_refuse_it_with_the_same_message_the_operator_is_not_held(editor, guarded):
    draft_rollout(profile=guarded, user=editor, settings=QUICK)  # candidate version 2, waiting for approval

    with pytest.raises(CommandError) as command:
        call_command("routing_revert", profile="telecom_contas", to=2, user="editor", stdout=StringIO())
    with pytest.raises(ApprovalRequired) as service:
        version_revert(profile=guarded, to=2, user=editor)

    assert str(command.value) == service.value.message == f"{HELD} {ERROR_REVERT_NEVER_RELEASED.format(number=2)}"
    assert live_version(guarded).number == 1 and numbers(guarded) == [1, 2]
    call_command("routing_revert", "--profile", "telecom_contas", "--to", "2", stdout=StringIO())  # the operator
    assert (live_version(guarded).number, live_version(guarded).reverted_from) == (3, 2)


def test_an_editor_alone_reverts_to_any_version_customers_were_all_served(editor, approver, guarded):
    release_request_approve(request=publish_request(profile=guarded, user=editor, based_on=1), user=approver)
    assert live_version(guarded).number == 2

    back = version_revert(profile=guarded, to=1, user=editor)  # an incident: one person undoes
    forth = version_revert(profile=guarded, to=2, user=editor)

    assert (back.number, back.reverted_from, forth.number, forth.reverted_from) == (3, 1, 4, 2)
    assert live_version(guarded) == forth and forth.released_at is not None


def test_a_publish_naming_a_released_version_but_carrying_another_document_is_held(editor, guarded):
    draft = profile_documents(["telecom_contas"])["telecom_contas"]  # the draft, one keyword past version 1

    with pytest.raises(ApprovalRequired, match="needs a second person"):
        version_publish(profile=guarded, user=editor, document=draft, reverted_from=1)

    assert live_version(guarded).number == 1 and numbers(guarded) == [1]


def test_a_candidate_whose_plan_did_not_complete_reaches_everyone_only_with_an_approval(editor, approver, guarded):
    plan = approved_rollout(guarded, editor, approver)  # served to 10 % of new conversations
    plan_command(plan, RolloutDecisionAction.ABORT, actor="admin: editor", user=editor)  # stopping never waits
    candidate = RoutingVersion.objects.get(pk=plan.candidate_id)
    again = RolloutPlan.objects.create(name="again", profile=guarded, candidate=candidate, stages=[100])

    with pytest.raises(ApprovalRequired, match=re.escape(ERROR_REVERT_NEVER_RELEASED.format(number=2))):
        version_revert(profile=guarded, to=2, user=editor)
    with pytest.raises(ApprovalRequired, match="needs a second person"):
        plan_start(again, actor="admin: editor", user=editor)

    assert candidate.released_at is None and live_version(guarded).number == 1 and numbers(guarded) == [1, 2]


def test_the_guard_completing_an_approved_plan_releases_its_candidate_for_later_reverts(editor, approver, guarded):
    plan = approved_rollout(guarded, editor, approver)

    assert plan_evaluate(plan, actor="beat").action == RolloutDecisionAction.ADVANCE  # 100 %
    assert plan_evaluate(plan, actor="beat").action == RolloutDecisionAction.COMPLETE

    candidate = RoutingVersion.objects.get(pk=plan.candidate_id)
    assert live_version(guarded) == candidate and candidate.released_at is not None
    version_revert(profile=guarded, to=1, user=editor)
    assert version_revert(profile=guarded, to=2, user=editor).number == 4  # served to everyone before: not held


# -- rollout plans --------------------------------------------------------------------------------------------


def test_an_approval_starts_only_the_plan_it_was_given_for(editor, approver, guarded):
    outcome = draft_rollout(profile=guarded, user=editor, settings=QUICK)
    assert outcome.request is not None
    RolloutPlan.objects.filter(pk=outcome.plan.pk).update(stages=[100])  # changed after the approver's page

    with pytest.raises(PlanChanged):
        plan_start(
            outcome.plan,
            actor="admin: editor, approved by approver",
            user=editor,
            approved_by=approver,
            fingerprint=outcome.request.document_hash,
        )

    assert RolloutPlan.objects.get().status == RolloutPlanStatus.READY and live_version(guarded).number == 1


@pytest.mark.parametrize("changed, moved_by", [("candidate", "beat"), ("stages", "hand")])
def test_a_started_plan_whose_candidate_or_stages_changed_is_aborted_not_released(
    editor, approver, guarded, changed, moved_by
):
    plan = approved_rollout(guarded, editor, approver)
    Keyword.objects.create(intent=guarded.intents.get(name="retail_order_tracking"), text="roteador")
    unreviewed = version_publish(profile=guarded, note="nobody reviewed it", release=False)
    change = {"candidate": unreviewed} if changed == "candidate" else {"stages": [100]}
    RolloutPlan.objects.filter(pk=plan.pk).update(**change)  # whatever wrote the row

    if moved_by == "beat":
        decision = plan_evaluate(plan, actor="beat")
    else:
        decision = plan_command(plan, RolloutDecisionAction.ADVANCE, actor="manage.py rollout (ops)")

    plan.refresh_from_db()
    assert decision.action == RolloutDecisionAction.ABORT and ERROR_PLAN_CHANGED in decision.reason
    assert plan.status == RolloutPlanStatus.ABORTED and plan.percentage == 0
    assert live_version(guarded).number == 1
    assert not RoutingVersion.objects.filter(profile=guarded, released_at__isnull=False).exclude(number=1).exists()


@pytest.mark.parametrize("changed", ["candidate", "stages"])
def test_a_started_plan_changed_since_serves_every_conversation_the_control_before_its_next_evaluation(
    editor, approver, guarded, changed
):
    plan = approved_rollout(guarded, editor, approver, stages=[50, 100])
    assert snapshot.build(version=0, generation=0).rollouts["telecom_contas"].candidate.version == 2
    Keyword.objects.create(intent=guarded.intents.get(name="retail_order_tracking"), text="roteador")
    unreviewed = version_publish(profile=guarded, note="nobody reviewed it", release=False)
    change = {"candidate": unreviewed} if changed == "candidate" else {"stages": [100]}
    RolloutPlan.objects.filter(pk=plan.pk).update(**change)  # whatever wrote the row, before the guard looks

    served = snapshot.build(version=0, generation=0)

    assert "telecom_contas" not in served.rollouts and served.profiles["telecom_contas"].version == 1
    RolloutPlan.objects.filter(pk=plan.pk).update(candidate=plan.candidate, stages=plan.stages)  # back as approved
    assert snapshot.build(version=0, generation=0).rollouts["telecom_contas"].candidate.version == 2


def test_a_plan_started_while_its_change_page_was_open_keeps_what_it_started_as(rf, editor, approver, guarded):
    outcome = draft_rollout(profile=guarded, user=editor, settings=QUICK)
    Keyword.objects.create(intent=guarded.intents.get(name="retail_order_tracking"), text="roteador")
    unreviewed = version_publish(profile=guarded, note="nobody reviewed it", release=False)
    model_admin = RolloutPlanAdmin(RolloutPlan, admin.site)
    request = rf.post("/")
    request.user, request._messages = editor, CookieStorage(request)
    opened = RolloutPlan.objects.get(pk=outcome.plan.pk)  # the editor's page, read while the plan was ready
    form = model_admin.get_form(request, opened, change=True)(
        {**plan_fields(opened), "name": "renamed", "candidate": unreviewed.pk, "stages": "100"}, instance=opened
    )
    assert form.is_valid(), form.errors
    release_request_approve(request=outcome.request, user=approver)  # meanwhile: it starts

    model_admin.save_model(request, form.save(commit=False), form, change=True)

    plan = RolloutPlan.objects.get(pk=opened.pk)
    assert (plan.status, plan.candidate_id, plan.stages, plan.name) == (
        RolloutPlanStatus.RUNNING,
        outcome.candidate.pk,
        QUICK["stages"],
        "renamed",
    )
    assert plan.started_as == plan_fingerprint(plan)
    said = ERROR_STARTED_MEANWHILE.format(plan="renamed", status="running")
    assert [str(message) for message in request._messages._queued_messages] == [said]


@pytest.mark.sqlite_too
def test_only_a_second_person_advances_an_approved_plan_by_hand(client, editor, approver, lead, guarded):
    plan = approved_rollout(guarded, editor, approver, stages=[10, 50, 100])
    said = ERROR_ADVANCE_SECOND_PERSON.format(agent_id="telecom_contas")
    client.force_login(editor)

    refused = client.post(command_url(plan, RolloutDecisionAction.ADVANCE), follow=True)
    with pytest.raises(CommandError) as command:
        call_command("rollout", "advance", str(plan.pk), "--user", "editor", stdout=StringIO())
    client.post(command_url(plan, RolloutDecisionAction.PAUSE))  # stopping and going on never wait
    client.post(command_url(plan, RolloutDecisionAction.RESUME))

    assert any(said in message for message in messages_of(refused)) and str(command.value) == said
    plan.refresh_from_db()
    assert (plan.status, plan.percentage) == (RolloutPlanStatus.RUNNING, 10)
    client.force_login(lead)
    client.post(command_url(plan, RolloutDecisionAction.ADVANCE))
    plan.refresh_from_db()
    assert plan.percentage == 50
    for _ in ("100 %", "complete"):  # the operator at the shell
        call_command("rollout", "advance", str(plan.pk), stdout=StringIO())
    assert live_version(guarded).number == 2


def test_the_rollout_command_as_an_editor_is_held_as_the_admin_is_and_leaves_no_plan(editor, guarded):
    call_command("routing_publish", "--profile", "telecom_contas", "--candidate", "--user", "editor", stdout=StringIO())

    with pytest.raises(CommandError) as command:
        call_command(
            "rollout", "start", "--profile", "telecom_contas", "--version", "2", "--user", "editor", stdout=StringIO()
        )

    assert str(command.value) == HELD
    assert not RolloutPlan.objects.exists() and live_version(guarded).number == 1


# -- import -----------------------------------------------------------------------------------------------------

ROUTING = DRAFTED.replace("modem]", "modem, roteador]")  # one keyword past the draft


def test_an_import_with_publish_by_an_editor_is_refused_whole_with_the_same_message(editor, guarded, tmp_path):
    path = tmp_path / "routing.telecom_contas.yaml"
    path.write_text(ROUTING, encoding="utf-8")
    before = profile_documents(["telecom_contas"])

    with pytest.raises(CommandError) as command:
        call_command("import_config", str(path), "--publish", "--user", "editor", stdout=StringIO(), stderr=StringIO())

    assert str(command.value) == HELD
    assert profile_documents(["telecom_contas"]) == before and not Keyword.objects.filter(text="roteador").exists()
    assert live_version(guarded).number == 1
    call_command("import_config", str(path), "--user", "editor", stdout=StringIO(), stderr=StringIO())  # no publish
    assert Keyword.objects.filter(text="roteador").exists() and live_version(guarded).number == 1


# -- what the versions stored before recorded --------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_migration_marks_released_the_versions_customers_were_all_served_and_no_other(migrations):
    old = migrations.installed_at(("routing", "0032_history_user_ids_pseudonymised"))
    profile = AgentProfile.objects.create(agent_id="served", name="Served")  # agents' tables are at their latest
    stored, plans = old.get_model("routing", "RoutingVersion").objects, old.get_model("routing", "RolloutPlan").objects
    on = {"profile_id": profile.pk}
    version = {n: stored.create(**on, number=n, document={"n": n}) for n in range(1, 8)}
    stored.filter(number=1).update(published_from="admin")  # published in the admin
    stored.filter(number=4).update(published_from="command", reverted_from=1)  # a revert
    stored.filter(number__in=[5, 7]).update(published_from="command")  # 7: stored with --candidate
    finished = timezone.now() - dt.timedelta(days=1)
    plans.create(**on, name="done", candidate=version[2], control=version[1], status="completed", finished_at=finished)
    plans.create(**on, name="stopped", candidate=version[3], control=version[2], status="aborted")
    plans.create(**on, name="running", candidate=version[6], control=version[5], status="running")
    plans.create(**on, name="ready", candidate=version[7], status="ready")
    old.get_model("routing", "ProfileRelease").objects.create(**on, version=version[5])

    migrated = migrations.forward_to(("routing", "0033_version_released_at")).get_model("routing", "RoutingVersion")

    released = dict(migrated.objects.filter(profile_id=profile.pk).values_list("number", "released_at"))
    assert sorted(number for number, at in released.items() if at is not None) == [1, 2, 4, 5]
    assert released[2] == finished  # when its plan completed


@pytest.mark.django_db(transaction=True)
def test_the_migrations_give_each_started_plan_the_fingerprint_of_what_it_holds_and_serve_it(migrations):
    old = migrations.installed_at(("routing", "0033_version_released_at"))
    profile = AgentProfile.objects.create(agent_id="started", name="Started")
    stored, plans = old.get_model("routing", "RoutingVersion").objects, old.get_model("routing", "RolloutPlan").objects
    control, candidate = (stored.create(profile_id=profile.pk, number=n, document={}) for n in (1, 2))
    on = {"profile_id": profile.pk, "candidate": candidate}
    plans.create(**on, name="running", control=control, status="running", stages=[10, 100], guards=[])
    plans.create(**on, name="ready", status="ready")
    old.get_model("routing", "ProfileRelease").objects.create(profile_id=profile.pk, version=control)

    migrations.forward()

    running = RolloutPlan.objects.get(name="running")
    assert running.started_as == plan_fingerprint(running)
    assert list(LiveRollout.objects.values_list("plan_id", "started_as")) == [(running.pk, running.started_as)]
    assert plan_evaluate(running, actor="beat").action != RolloutDecisionAction.ABORT  # it goes on as it was
    assert RolloutPlan.objects.get(name="ready").started_as == ""
