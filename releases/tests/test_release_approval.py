"""The two-person rule: a profile may need a second person to publish or to start a staged rollout. Then an editor's
publish or rollout becomes a request; a "Release approvers" member reviews it in words and approves (it is published,
or the plan starts) or declines it with a note; nobody approves their own request; a request whose draft, live
version or plan changed is out of date and refused; only approvers switch the rule; every path obeys it."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.management import CommandError, call_command

from agents.models import AgentProfile
from releases.approvals import publish_request, release_request_approve
from releases.models import ReleaseRequest, ReleaseStatus, RolloutDecision, RolloutPlan, RolloutPlanStatus
from releases.rollout.commands import plan_start
from releases.versions import ApprovalRequired, version_publish
from routing.models import Keyword, RoutingVersion
from routing.rollout_words import history_words
from routing.selectors import live_version
from tests.adminkit import change_url

pytestmark = pytest.mark.django_db


def publish_url(profile: AgentProfile) -> str:
    return f"/admin/agents/agentprofile/{profile.pk}/publish/"


def review_url(asked: ReleaseRequest) -> str:
    return f"/admin/releases/releaserequest/{asked.pk}/review/"


def switch_url(profile: AgentProfile) -> str:
    return f"/admin/agents/agentprofile/{profile.pk}/second-person/"


def messages_of(response) -> list[str]:
    return [str(message) for message in response.context["messages"]] if response.context else []


STAGED = {
    "how": "stages",
    "note": "modem goes to orders",
    "based_on": "1",
    "plan-stages": "10, 100",
    "plan-hold_minutes": "30",
    "plan-min_conversations": "50",
    "plan-max_errors": "20",
    "plan-guards_0": "25",  # fallback rate: at most 25 % worse than the control
}


def test_the_release_approvers_group_holds_the_permission_and_what_a_review_reads(approver):
    group = Group.objects.get(name="Release approvers")
    codenames = set(group.permissions.values_list("codename", flat=True))

    assert {"approve_release", "view_releaserequest", "view_agentprofile", "view_routingversion"} <= codenames
    assert {"view_rolloutplan", "view_rolloutdecision", "view_routingtestcase"} <= codenames
    assert not {name for name in codenames if name.startswith(("change_", "add_", "delete_"))}
    assert approver.has_perm("releases.approve_release")


@pytest.mark.sqlite_too
def test_only_an_approver_switches_the_rule_an_editor_sees_it_read_only(client, editor, approver, telecom):
    client.force_login(editor)
    page = client.get(change_url(telecom)).content.decode()
    assert "Publishing needs a second person" in page and 'id="second-person-switch"' not in page
    assert client.post(switch_url(telecom), {"needed": "off"}).status_code == 403
    # Even with the right to change profiles, the setting is not in the form: it is switched by its button only.
    editor.user_permissions.add(Permission.objects.get(codename="change_agentprofile"))
    assert 'name="release_needs_approval"' not in client.get(change_url(telecom)).content.decode()

    client.force_login(approver)
    assert 'id="second-person-switch"' in client.get(change_url(telecom)).content.decode()
    switched = client.post(switch_url(telecom), {"needed": "on"}, follow=True)

    telecom.refresh_from_db()
    assert telecom.release_needs_approval is True
    assert any("now needs a second person" in m for m in messages_of(switched))
    assert "Stop requiring a second person" in switched.content.decode()


@pytest.mark.sqlite_too
def test_an_editors_publish_becomes_a_request_that_an_approver_reviews_and_publishes(client, editor, approver, guarded):
    client.force_login(editor)
    page = client.get(publish_url(guarded)).content.decode()
    assert "Ask for approval to publish" in page and "needs a second person" in page
    asked = client.post(publish_url(guarded), {"how": "now", "note": "modem", "based_on": "1"}, follow=True)

    request = ReleaseRequest.objects.get()
    assert any("your request (publish to everyone) is waiting" in m for m in messages_of(asked))
    assert (request.kind, request.status, request.requested_by, request.based_on) == ("publish", "pending", editor, 1)
    assert live_version(guarded).number == 1  # nothing changed for customers

    client.force_login(approver)
    profile_page = client.get(change_url(guarded)).content.decode()
    assert "Waiting for a second person" in profile_page and "for you to review" in profile_page
    review = client.get(review_url(request)).content.decode()
    assert "keyword &#x27;modem&#x27; added to intent retail_order_tracking" in review
    assert "Asked by editor" in review and 'id="release-approve"' in review
    approve = {"_approve": "Approve and publish", "fingerprint": request.document_hash}  # as the page's button
    approved = client.post(review_url(request), approve, follow=True)

    assert any("Approved: telecom_contas version 2 is published" in m for m in messages_of(approved))
    version = live_version(guarded)
    assert (version.number, version.created_by, version.approved_by, version.note) == (2, editor, approver, "modem")
    request.refresh_from_db()
    assert (request.status, request.decided_by, request.version) == (ReleaseStatus.APPROVED, approver, version)
    client.force_login(editor)
    assert "approved by approver" in client.get(change_url(guarded)).content.decode()


@pytest.mark.sqlite_too
def test_an_editors_staged_rollout_waits_ready_and_the_approval_starts_it(client, editor, approver, guarded):
    client.force_login(editor)
    assert "Ask for approval to roll out in stages" in client.get(publish_url(guarded)).content.decode()
    client.post(publish_url(guarded), STAGED)

    plan = RolloutPlan.objects.get()
    request = ReleaseRequest.objects.get()
    assert plan.status == RolloutPlanStatus.READY and plan.candidate.number == 2 and live_version(guarded).number == 1
    assert (request.kind, request.plan, request.version) == ("rollout", plan, plan.candidate)

    client.force_login(approver)
    review = client.get(review_url(request)).content.decode()
    assert "Stages: 10 → 100 % of new conversations." in review
    assert "fallback rate: at most 25 % worse than the control" in review
    started = client.post(review_url(request), {"action": "approve", "fingerprint": request.document_hash})

    plan.refresh_from_db()
    assert started["Location"] == f"/analytics/rollouts/{plan.pk}/"
    assert (plan.status, plan.percentage, plan.control.number) == (RolloutPlanStatus.RUNNING, 10, 1)
    decision = RolloutDecision.objects.get(plan=plan)
    assert decision.actor == "admin: editor, approved by approver"
    assert history_words([decision], plan.stages)[0].endswith("by editor, approved by approver")


@pytest.mark.sqlite_too
def test_nobody_approves_their_own_request_not_even_an_approver(client, editor, approver, guarded):
    editor.groups.add(*approver.groups.all())  # an editor who is also an approver
    client.force_login(editor)
    client.post(publish_url(guarded), {"how": "now", "note": "mine", "based_on": "1"})
    request = ReleaseRequest.objects.get()

    review = client.get(review_url(request)).content.decode()
    refused = client.post(review_url(request), {"action": "approve", "fingerprint": request.document_hash})

    assert 'id="release-approve"' not in review and "nobody approves their own request" in review
    assert refused.status_code == 403
    assert live_version(guarded).number == 1 and ReleaseRequest.objects.get().status == ReleaseStatus.PENDING
    with pytest.raises(ApprovalRequired):  # the service says the same, whoever calls it
        version_publish(profile=guarded, user=editor, approved_by=editor)


@pytest.mark.sqlite_too
def test_a_request_whose_draft_changed_is_out_of_date_and_publishes_nothing(client, editor, approver, guarded):
    client.force_login(editor)
    client.post(publish_url(guarded), {"how": "now", "note": "modem", "based_on": "1"})
    request = ReleaseRequest.objects.get()
    Keyword.objects.create(intent=guarded.intents.get(name="retail_order_tracking"), text="roteador")

    client.force_login(approver)
    review = client.get(review_url(request)).content.decode()
    answer = client.post(review_url(request), {"action": "approve", "fingerprint": request.document_hash}, follow=True)

    assert "Out of date: The draft was edited since it was requested" in review and 'id="release-approve"' not in review
    assert any("The draft was edited since it was requested" in m for m in messages_of(answer))
    assert live_version(guarded).number == 1 and RoutingVersion.objects.filter(profile=guarded).count() == 1
    assert ReleaseRequest.objects.get().status == ReleaseStatus.STALE


def test_an_approval_of_a_page_showing_another_draft_is_refused(editor, approver, guarded):
    request = publish_request(profile=guarded, user=editor, note="modem", based_on=1)

    with pytest.raises(Exception, match="What your page showed is not what would be released now"):
        release_request_approve(request=request, user=approver, fingerprint="an older page")

    assert live_version(guarded).number == 1


def test_a_rollout_request_whose_plan_changed_is_out_of_date(client, editor, approver, guarded):
    client.force_login(editor)
    client.post(publish_url(guarded), STAGED)
    request = ReleaseRequest.objects.get()
    RolloutPlan.objects.filter(pk=request.plan_id).update(stages=[50, 100])  # edited while it waited

    client.force_login(approver)
    client.post(review_url(request), {"action": "approve", "fingerprint": request.document_hash})

    assert RolloutPlan.objects.get().status == RolloutPlanStatus.READY
    assert ReleaseRequest.objects.get().status == ReleaseStatus.STALE


def test_a_decline_needs_a_note_the_requester_reads_and_changes_nothing(client, editor, approver, guarded):
    client.force_login(editor)
    client.post(publish_url(guarded), {"how": "now", "note": "modem", "based_on": "1"})
    request = ReleaseRequest.objects.get()

    client.force_login(approver)
    without_note = client.post(review_url(request), {"action": "decline", "decision_note": " "})
    assert without_note.status_code == 200 and "Say why you decline it" in without_note.content.decode()
    client.post(review_url(request), {"_decline": "Decline", "decision_note": "modem is a product question"})

    request.refresh_from_db()
    assert (request.status, request.decided_by) == (ReleaseStatus.DECLINED, approver)
    client.force_login(editor)
    assert "modem is a product question" in client.get(review_url(request)).content.decode()
    assert live_version(guarded).number == 1


def test_the_requester_may_withdraw_and_others_may_not(client, editor, approver, guarded):
    request = publish_request(profile=guarded, user=editor, note="modem", based_on=1)
    client.force_login(approver)
    assert client.post(review_url(request), {"action": "withdraw"}).status_code == 403

    client.force_login(editor)
    client.post(review_url(request), {"action": "withdraw"})

    assert ReleaseRequest.objects.get().status == ReleaseStatus.WITHDRAWN


def test_the_plans_start_button_asks_for_approval_instead_of_starting(client, editor, guarded):
    candidate = version_publish(profile=guarded, note="candidate", release=False)
    plan = RolloutPlan.objects.create(name="modem", profile=guarded, candidate=candidate, stages=[10, 100])
    start = f"/admin/releases/rolloutplan/{plan.pk}/command/start/"
    client.force_login(editor)

    confirm = client.get(start).content.decode()
    client.post(start)

    assert "needs a second person" in confirm and "Yes, ask for approval to start it" in confirm
    plan.refresh_from_db()
    assert plan.status == RolloutPlanStatus.READY
    assert ReleaseRequest.objects.get().plan == plan
    assert "A request to start it is waiting already" in client.get(start).content.decode()


def test_every_path_obeys_the_rule_and_the_operator_at_the_shell_is_not_held(editor, approver, guarded):
    candidate = version_publish(profile=guarded, note="candidate", release=False)  # a candidate publishes nothing
    plan = RolloutPlan.objects.create(name="modem", profile=guarded, candidate=candidate, stages=[10, 100])

    with pytest.raises(ApprovalRequired, match="needs a second person"):
        version_publish(profile=guarded, user=editor)
    with pytest.raises(ApprovalRequired):
        plan_start(plan, actor="admin: editor", user=editor)
    with pytest.raises(CommandError, match="needs a second person"):
        call_command("routing_publish", "--profile", "telecom_contas", "--user", "editor", stdout=io.StringIO())
    assert live_version(guarded).number == 1

    plan_start(plan, actor="test", user=editor, approved_by=approver)  # approved: it starts
    assert RolloutPlan.objects.get().status == RolloutPlanStatus.RUNNING
    call_command("routing_publish", "--profile", "telecom_contas", stdout=io.StringIO())  # the operator
    assert live_version(guarded).number == 3


def test_without_the_rule_nothing_waits(client, editor, telecom):
    version_publish(profile=telecom, note="first")
    Keyword.objects.create(intent=telecom.intents.get(name="retail_order_tracking"), text="modem")
    client.force_login(editor)

    client.post(publish_url(telecom), {"how": "now", "note": "modem", "based_on": "1"})

    assert live_version(telecom).number == 2 and not ReleaseRequest.objects.exists()
