"""A rollout plan's commands: start, pause, resume, advance, abort — and the completion that serves the candidate to
everyone. Each is recorded as a :class:`~releases.models.RolloutDecision`; those that move the plan are posted to its
webhook, signed with ``ROLLOUT_WEBHOOK_SECRET`` over a timestamp (:func:`webhook_headers`), to an address the outbound
policy allows (:func:`webhook_send`); the decision says whether it was delivered, never what answered.

These change configuration only: the profile's publish page starts a plan, and an approval starts one
(:mod:`releases.approvals`). What the guard decides from the stored turns (hold, advance, roll back) is
:mod:`releases.rollout.guard`'s, which calls :func:`plan_advance` and :func:`decision_record`.

**The two-person rule.** A version plan's candidate reaches customers only through the plan a second person approved,
on a profile that needs one (``AgentProfile.release_needs_approval``):

* **Start** takes another user's approval (``approved_by``, :func:`releases.versions.approval_check`): a person's
  start is refused with :class:`~releases.versions.ApprovalRequired` until one approves — of this very plan: given
  the ``fingerprint`` its approval was for, a plan changed since is not started (:class:`PlanChanged`).
* **What started is what moves on.** A plan keeps the fingerprint of its candidate and settings when it started
  (``started_as``, :func:`plan_fingerprint`); a plan whose candidate or settings changed since — by whatever wrote
  its row — is aborted at its next evaluation or command instead of advancing or completing
  (:data:`ERROR_PLAN_CHANGED`), and every conversation goes back to the control.
* **Advance by hand** skips the hold and the guards the approval was given with: on such a profile only someone with
  the right to approve releases who did not make or ask for the plan advances it by hand
  (:data:`ERROR_ADVANCE_SECOND_PERSON`); the guard advances it by itself.

The operator at the shell (``user`` ``None``) is not held. Pause, resume and abort are not held: they never put more
customers on the candidate, and stopping must never wait for a second person. A plan started before its profile
needed a second person runs to its end (an approver who switched the rule on may abort it).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any

import httpx
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from common.endpoints import endpoint_mask
from common.infra.bus import signed_headers
from common.outbound import OutboundRefused, outbound_client
from releases.models import RolloutDecision, RolloutDecisionAction, RolloutPlan, RolloutPlanStatus, RolloutPlanTarget
from releases.versions import (
    ApprovalRequired,
    approval_check,
    may_approve,
    needs_second_person,
    version_release,
)
from routing.models import RolloutFlag, RoutingVersion
from routing.public import MULTI_AGENT_FLAG, live_version, plan_fingerprint, stage_words

logger = logging.getLogger(__name__)

# What the admin asks of a person who makes or commands a plan, and so does a command's --user.
PLAN_ADD_PERMISSION = "releases.add_rolloutplan"
PLAN_CHANGE_PERMISSION = "releases.change_rolloutplan"
FLAG_PERMISSION = "routing.change_rolloutflag"  # a multi_agent plan moves the flag
ERROR_PLAN_CHANGED = (
    "The plan's candidate or settings changed since it started (what its start was approved for): aborted, every "
    "conversation is back on the control from its next message. Make a new plan for the change."
)
ERROR_ADVANCE_SECOND_PERSON = (
    "{agent_id} needs a second person: advancing a plan by hand, ahead of its guard, takes someone with the right to "
    "approve releases who did not make or ask for it. The guard advances it by itself."
)


class RolloutStateError(Exception):
    """A command that does not fit the plan's status (e.g. resuming a plan that is not paused)."""


class PlanChanged(RolloutStateError):
    """The plan is not what its approval was given for: its candidate or settings changed since."""


def decision_record(
    plan: RolloutPlan, action: str, reason: str, actor: str, figures: dict[str, Any] | None = None
) -> RolloutDecision:
    """Record one decision about ``plan`` at its stage (the caller holds the plan's row lock)."""
    return RolloutDecision.objects.create(
        plan=plan,
        action=action,
        stage=plan.stage,
        percentage=int(plan.stages[min(plan.stage, len(plan.stages) - 1)]),  # the stage's, whatever the status
        reason=reason,
        figures=figures or {},
        actor=actor,
    )


def _stage_begin(plan: RolloutPlan, now: dt.datetime) -> None:
    plan.stage_started_at = now
    plan.history = [*plan.history, [now.isoformat(), int(plan.stages[plan.stage])]]


def plan_flag_follow(plan: RolloutPlan, percentage: int) -> None:
    """A multi_agent plan moves the flag's percentage with its stages."""
    if plan.target == RolloutPlanTarget.MULTI_AGENT:
        flag, _ = RolloutFlag.objects.get_or_create(key=MULTI_AGENT_FLAG)
        flag.percentage = percentage
        flag.save(update_fields=["percentage", "updated_at"])


def plan_parts(plan: RolloutPlan) -> tuple[Any, RoutingVersion]:
    """A version plan's profile and candidate (a plan saved without them cannot run)."""
    if plan.profile is None or plan.candidate is None:
        raise RolloutStateError(f"Plan {plan} names no profile or no candidate version.")
    return plan.profile, plan.candidate


def _what(plan: RolloutPlan) -> str:
    if plan.target == RolloutPlanTarget.VERSION and plan.candidate is not None:
        return f"version {plan.candidate.number}"
    return "the multi-agent mode"


def plan_start(
    plan: RolloutPlan,
    *,
    actor: str,
    user: Any = None,
    approved_by: Any = None,
    fingerprint: str | None = None,
    now: dt.datetime | None = None,
) -> RolloutDecision:
    """Start a ready plan at its first stage; its control is the version live now. ``user`` starts it (``None``:
    the operator); a version plan of a profile that needs a second person takes ``approved_by`` (module docstring).
    ``fingerprint``: what the approval was given for — checked under the plan's row lock (:class:`PlanChanged`).
    The plan keeps what it started as (``started_as``).
    """
    now = now or timezone.now()
    with transaction.atomic():
        plan = RolloutPlan.objects.select_for_update().get(pk=plan.pk)
        if plan.status != RolloutPlanStatus.READY:
            raise RolloutStateError(f"Plan {plan} is {plan.get_status_display().lower()}: only a ready plan starts.")
        if fingerprint is not None and plan_fingerprint(plan) != fingerprint:
            raise PlanChanged(f"Plan {plan} was changed since it was approved: what would start is not what was.")
        if plan.target == RolloutPlanTarget.VERSION:
            profile, _ = plan_parts(plan)
            approval_check(profile=profile, user=user, approved_by=approved_by)
            live = live_version(profile)
            if live is None:
                raise RolloutStateError(f"{profile.agent_id} has no live version to compare the candidate with.")
            if plan.candidate_id == live.pk:
                raise RolloutStateError(f"Version {live.number} is live already: nothing to roll out.")
            busy = RolloutPlan.objects.filter(
                profile=plan.profile, status__in=[RolloutPlanStatus.RUNNING, RolloutPlanStatus.PAUSED]
            ).exclude(pk=plan.pk)
            if busy.exists():
                raise RolloutStateError(f"{profile.agent_id} already has a running plan: {busy.first()}.")
            plan.control = live
        plan.status, plan.stage, plan.started_at = RolloutPlanStatus.RUNNING, 0, now
        plan.started_as = plan_fingerprint(plan)
        if user is not None and getattr(user, "pk", None):
            plan.created_by = plan.created_by or user
        _stage_begin(plan, now)
        plan.save()
        plan_flag_follow(plan, plan.percentage)
        decision = decision_record(
            plan,
            RolloutDecisionAction.START,
            f"Started at {stage_words(plan.stage, plan.stages)}: {plan.percentage} % of new conversations get "
            f"{_what(plan)}.",
            actor,
        )
    return decision


def plan_command(
    plan: RolloutPlan, action: str, *, actor: str, user: Any = None, now: dt.datetime | None = None
) -> RolloutDecision:
    """pause | resume | advance | abort, by a person: ``user`` (``None``: the operator). An advance by hand is held
    for a second person (:func:`advance_check`); resuming or advancing a plan changed since it started aborts it
    (:func:`plan_changed_abort`)."""
    now = now or timezone.now()
    with transaction.atomic():
        plan = RolloutPlan.objects.select_for_update().get(pk=plan.pk)
        if action == RolloutDecisionAction.PAUSE:
            _expect(plan, RolloutPlanStatus.RUNNING, "pause")
            plan.status = RolloutPlanStatus.PAUSED
            reason = f"Paused at {plan.percentage} %: the stage holds; nothing advances or rolls back by itself."
        elif action == RolloutDecisionAction.RESUME:
            _expect(plan, RolloutPlanStatus.PAUSED, "resume")
            aborted = plan_changed_abort(plan, now, actor)
            if aborted is not None:
                return aborted
            plan.status = RolloutPlanStatus.RUNNING
            reason = f"Resumed at {plan.percentage} %."
        elif action == RolloutDecisionAction.ADVANCE:
            _expect(plan, RolloutPlanStatus.RUNNING, "advance")
            advance_check(plan, user)
            return plan_advance(plan, now, actor, {}, by_guard=False)
        elif action == RolloutDecisionAction.ABORT:
            if plan.status not in (RolloutPlanStatus.RUNNING, RolloutPlanStatus.PAUSED, RolloutPlanStatus.READY):
                raise RolloutStateError(f"Plan {plan} is {plan.get_status_display().lower()} already.")
            plan.status, plan.finished_at = RolloutPlanStatus.ABORTED, now
            plan_flag_follow(plan, 0)
            reason = "Aborted by hand: every conversation is back on the control from its next message."
        else:
            raise RolloutStateError(f"Unknown command {action!r}.")
        plan.save()
        decision = decision_record(plan, action, reason, actor)
    decision_webhook_later(decision)
    return decision


def _expect(plan: RolloutPlan, status: str, command: str) -> None:
    if plan.status != status:
        raise RolloutStateError(f"Plan {plan} is {plan.get_status_display().lower()}: it cannot {command}.")


def advance_check(plan: RolloutPlan, user: Any) -> None:
    """The two-person rule on advancing a version plan by hand: on a profile that needs a second person, ``user``
    (``None``: the operator, not held) must hold the right to approve releases and be neither who made the plan nor
    who asked for its start. Raises :class:`~releases.versions.ApprovalRequired`."""
    if user is None or plan.target != RolloutPlanTarget.VERSION or plan.profile is None:
        return
    if not needs_second_person(plan.profile):
        return
    asked = {plan.created_by_id, *plan.release_requests.values_list("requested_by_id", flat=True)}
    if user.pk in asked or not may_approve(user):
        raise ApprovalRequired(ERROR_ADVANCE_SECOND_PERSON.format(agent_id=plan.profile.agent_id))


def plan_changed_abort(plan: RolloutPlan, now: dt.datetime, actor: str) -> RolloutDecision | None:
    """Abort a started plan whose candidate or settings are no longer what it started as (``started_as``): the
    decision, or ``None`` when it is unchanged. The caller holds the plan's row lock."""
    if plan_fingerprint(plan) == plan.started_as:
        return None
    plan.status, plan.finished_at = RolloutPlanStatus.ABORTED, now
    plan.save()
    plan_flag_follow(plan, 0)
    decision = decision_record(plan, RolloutDecisionAction.ABORT, ERROR_PLAN_CHANGED, actor)
    decision_webhook_later(decision)
    return decision


def plan_advance(
    plan: RolloutPlan, now: dt.datetime, actor: str, figures: dict[str, Any], *, by_guard: bool
) -> RolloutDecision:
    """Next stage, or — after the last — complete: the candidate released to everyone. The caller holds the plan's
    row lock; ``by_guard``: every guard was clear (else a person advanced it by hand). A plan changed since it
    started is aborted instead (:func:`plan_changed_abort`)."""
    aborted = plan_changed_abort(plan, now, actor)
    if aborted is not None:
        return aborted
    if plan.stage + 1 < len(plan.stages):
        plan.stage += 1
        _stage_begin(plan, now)
        plan.save()
        plan_flag_follow(plan, plan.percentage)
        stage = stage_words(plan.stage, plan.stages)
        reason = f"Every guard clear: the guard advanced to {stage}." if by_guard else f"Advanced by hand to {stage}."
        decision = decision_record(plan, RolloutDecisionAction.ADVANCE, reason, actor, figures)
    else:
        plan.status, plan.finished_at = RolloutPlanStatus.COMPLETED, now
        plan.save()
        if plan.target == RolloutPlanTarget.VERSION:
            profile, candidate = plan_parts(plan)
            version_release(profile=profile, version=candidate)
            done = f"version {candidate.number} is live for every customer"
        else:
            plan_flag_follow(plan, 100)
            done = "the multi-agent mode is on for every conversation"
        why = "Every guard clear" if by_guard else "Advanced by hand"
        decision = decision_record(plan, RolloutDecisionAction.COMPLETE, f"{why}: completed, {done}.", actor, figures)
    decision_webhook_later(decision)
    return decision


# -- webhook -----------------------------------------------------------------------------------------------------

WEBHOOK_EVENT = "rollout.decision"  # X-Platform-Event of every post
# What a decision says of its post (an editor reads it): delivered or not, and why not only where the platform itself
# decided it. What the receiver answered, or failed with, is for the operator: it is in the server's log (an editor
# who aims the webhook must not learn from it what listens where).
WEBHOOK_DELIVERED = "delivered"
WEBHOOK_REFUSED = "not delivered: the address is internal and the operator does not allow it (OUTBOUND_ALLOWED)"
WEBHOOK_FAILED = "not delivered: the receiver did not take it (the server's log says why)"
WEBHOOK_UNSIGNED = "not delivered: ROLLOUT_WEBHOOK_SECRET is not set, or is another of the platform's secrets"


def webhook_secret() -> str:
    """The secret the posts are signed with: ``ROLLOUT_WEBHOOK_SECRET``, a secret of its own — ``""`` when it is
    unset or is one of the platform's other secrets (then nothing is posted: ``releases.W001``, ``releases.E001``)."""
    secret = settings.ROLLOUT_WEBHOOK_SECRET
    return "" if secret in {settings.SECRET_KEY, settings.EVENTS_WEBHOOK_SECRET} else secret


def webhook_headers(decision: RolloutDecision, body: bytes, *, timestamp: str | None = None) -> dict[str, str]:
    """A post's headers, signed over ``"<timestamp>.<body>"`` as the desks' and the events' posts are
    (:func:`common.infra.bus.signed_headers`; docs/rollouts.md has the receiver's check): the event id is the
    decision's, the timestamp now unless given."""
    return signed_headers(webhook_secret(), body, event=WEBHOOK_EVENT, event_id=str(decision.pk), timestamp=timestamp)


def webhook_body(decision: RolloutDecision) -> bytes:
    plan = decision.plan
    payload = {
        "plan": {"id": plan.pk, "name": plan.name, "target": plan.target, "status": plan.status},
        "profile": plan.profile.agent_id if plan.profile else None,
        "candidate": plan.candidate.number if plan.candidate else None,
        "control": plan.control.number if plan.control else None,
        "action": decision.action,
        "stage": decision.stage,
        "percentage": decision.percentage,
        "reason": decision.reason,
        "figures": decision.figures,
        "at": decision.created_at.isoformat(),
    }
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str).encode()


def decision_webhook_later(decision: RolloutDecision) -> None:
    """Post ``decision`` to its plan's webhook once the transaction commits (nothing without a webhook)."""
    if decision.plan.webhook_url:
        transaction.on_commit(lambda: webhook_send(decision.pk))


def webhook_send(decision_pk: int) -> str:
    """Post a decision to its plan's webhook, signed, under the outbound policy (:mod:`common.outbound`: never an
    internal address the operator does not allow, checked on the address the post goes to), and keep on the
    decision whether it was delivered (``WEBHOOK_*``); the server's log says what answered."""
    decision = RolloutDecision.objects.select_related("plan__profile", "plan__candidate", "plan__control").get(
        pk=decision_pk
    )
    shown = endpoint_mask(decision.plan.webhook_url)
    if not webhook_secret():
        outcome = WEBHOOK_UNSIGNED
        logger.warning("rollout webhook of plan %s not posted: ROLLOUT_WEBHOOK_SECRET is not its own", decision.plan_id)
    else:
        body = webhook_body(decision)
        try:
            with outbound_client(timeout=5.0) as client:
                answer = client.post(decision.plan.webhook_url, content=body, headers=webhook_headers(decision, body))
        except OutboundRefused as exc:
            outcome = WEBHOOK_REFUSED
            logger.warning("rollout webhook of plan %s to %s: %s", decision.plan_id, shown, exc)
        except httpx.HTTPError as exc:
            outcome = WEBHOOK_FAILED
            logger.warning("rollout webhook of plan %s to %s failed: %s", decision.plan_id, shown, type(exc).__name__)
        else:
            outcome = WEBHOOK_DELIVERED if answer.is_success else WEBHOOK_FAILED
            if not answer.is_success:
                logger.warning("rollout webhook of plan %s to %s: HTTP %s", decision.plan_id, shown, answer.status_code)
    RolloutDecision.objects.filter(pk=decision.pk).update(webhook=outcome[:200])
    return outcome
