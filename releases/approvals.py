"""Releasing a profile's draft: to everyone at once, or in stages — alone, or with a second person's approval.

**In stages** (:func:`draft_rollout`): the draft becomes a candidate version (:func:`releases.versions.version_publish`
with ``release=False``, so the saved routing tests gate it as they gate a publish), a rollout plan is made for it with
the given settings, and the plan starts (:func:`releases.rollout.commands.plan_start`) — against the version live now.

**The two-person rule.** A profile may need a second person (``AgentProfile.release_needs_approval``, switched only
by users with :data:`~releases.versions.APPROVE_PERMISSION` and superusers: :func:`second_person_switch`; a new
profile needs one when another profile does). Its customers are then served only a version, never its draft, and a
person's publish becomes a :class:`~releases.models.ReleaseRequest` (:func:`publish_request`), and so does a staged
rollout (the candidate and the plan are made, the plan stays ready: :func:`draft_rollout`, :func:`rollout_request`).
Another person with the permission reviews it and approves (:func:`release_request_approve`: then it is published, or
the plan starts) or declines it with a note (:func:`release_request_decline`); the requester may withdraw it. Nobody
approves their own request.

**Out of date.** A request holds what its requester reviewed: the live version then (``based_on``) and a fingerprint
(``document_hash``) of the draft — or, for a rollout, of the plan's candidate and settings. When either no longer
matches (the draft was edited, another version went live, the plan was changed), the request is out of date: its
approval is refused and it is marked so, since approving it would release something nobody reviewed
(:func:`release_request_stale_reason`) — checked again under the plan's row lock when an approval starts it. A
rollback by the guard never waits for anyone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from rest_framework import status

from agents.models import AgentProfile
from common.errors import DomainError
from common.fingerprint import document_fingerprint
from releases.evals.gate import release_gate
from releases.models import (
    ReleaseKind,
    ReleaseRequest,
    ReleaseStatus,
    RolloutDecision,
    RolloutPlan,
    RolloutPlanStatus,
    RolloutPlanTarget,
)
from releases.rollout.commands import PlanChanged, RolloutStateError, plan_start
from releases.versions import (
    ERROR_APPROVER_SAME,
    UNSET,
    NothingToPublish,
    VersionConflict,
    documents_same,
    may_approve,
    model_settings_check,
    needs_second_person,
    served_draft_publish,
    version_publish,
)
from routing.models import RoutingVersion
from routing.public import PLAN_SETTINGS, live_version, plan_errors, plan_fingerprint, profile_documents

ERROR_NOT_PENDING = "This request was {status} already: nothing to decide."
ERROR_DECLINE_NOTE = "Say why you decline it: the requester reads your note."
ERROR_NOT_APPROVER = "You may not approve releases (it takes the permission to approve publishes and rollout starts)."
ERROR_REQUESTER_GONE = "The requester's account is no longer active: ask someone to request it again."
ERROR_ALREADY_WAITING = "The same {kind} of {agent_id} is waiting for approval already (requested by {who})."
ERROR_WITHDRAW_OTHERS = "Only the person who asked may withdraw a request."
SWITCH_NOTE = "What customers were served when publishing started to need a second person"


class ReleaseRequestStale(DomainError):
    status_code = status.HTTP_409_CONFLICT
    code = "release_request_stale"


class ReleaseRequestRefused(DomainError):
    status_code = status.HTTP_403_FORBIDDEN
    code = "permission_denied"


class ReleaseRequestDecided(DomainError):
    status_code = status.HTTP_409_CONFLICT
    code = "release_request_decided"


class RolloutNotPossible(DomainError):
    status_code = status.HTTP_409_CONFLICT
    code = "rollout_not_possible"


def _draft(profile: Any) -> dict[str, Any]:
    return profile_documents([profile.agent_id])[profile.agent_id]


def _username(user: Any) -> str:
    return user.get_username() if user is not None else "someone who has left"


def _admin_actor(user: Any, approved_by: Any = None) -> str:
    """A decision's actor, as routing.rollout_words reads it: "admin: ana" (", approved by bob")."""
    actor = f"admin: {_username(user)}"
    return f"{actor}, approved by {_username(approved_by)}" if approved_by is not None else actor


# -- reads -------------------------------------------------------------------------------------------------------


def release_requests_pending(*, profile: Any = None) -> QuerySet[ReleaseRequest]:
    """Requests waiting for a second person, oldest first (of one profile, or of every one)."""
    pending = ReleaseRequest.objects.filter(status=ReleaseStatus.PENDING).select_related(
        "profile", "requested_by", "plan", "version"
    )
    if profile is not None:
        pending = pending.filter(profile=profile)
    return pending.order_by("requested_at", "id")


def release_request_stale_reason(request: ReleaseRequest) -> str:
    """Why approving ``request`` would release something its requester did not review ("" when it would not)."""
    live = live_version(request.profile)
    live_number = live.number if live else None
    if live_number != request.based_on:
        then = f"version {request.based_on}" if request.based_on is not None else "no version"
        now = f"version {live_number}" if live_number is not None else "none"
        return f"The live version changed since it was requested ({then} then, {now} now)."
    if request.kind == ReleaseKind.PUBLISH:
        if document_fingerprint(_draft(request.profile)) != request.document_hash:
            return "The draft was edited since it was requested: what would be published is not what was reviewed."
        return ""
    plan = request.plan
    if plan is None or plan.status != RolloutPlanStatus.READY:
        shown = plan.get_status_display().lower() if plan is not None else "gone"
        return f"The rollout plan is {shown}: only a ready plan starts."
    if plan_fingerprint(plan) != request.document_hash:
        return "The rollout plan was changed since it was requested: what would start is not what was reviewed."
    return ""


def release_request_fingerprint(request: ReleaseRequest) -> str:
    """The fingerprint of what the request would release now (an approval page sends it back: the approver
    approves what their page showed)."""
    if request.kind == ReleaseKind.PUBLISH:
        return document_fingerprint(_draft(request.profile))
    return plan_fingerprint(request.plan) if request.plan is not None else ""


# -- the rule ----------------------------------------------------------------------------------------------------


def second_person_switch(
    *, profile: AgentProfile, user: Any, needed: bool, published_from: str = ""
) -> RoutingVersion | None:
    """Switch the two-person rule of ``profile`` on or off, as ``user``, who must be able to approve releases
    (:class:`ReleaseRequestRefused`). Switched on for a profile never published — whose customers are served its
    draft — the draft as they are served it now is first published as its first version by ``user``, its note
    :data:`SWITCH_NOTE` (:func:`releases.versions.served_draft_publish`): from then on customers get only what a
    second person approved, and no draft edit reaches them. Returns that version (``None``: none was needed). The
    publish's refusals (a model key variable nobody may publish) leave the rule as it was. A profile that needs a
    second person already serves no draft: switching it on again publishes nothing."""
    if not may_approve(user):
        raise ReleaseRequestRefused(ERROR_NOT_APPROVER)
    first = None
    if needed and not needs_second_person(profile):
        first = served_draft_publish(profile=profile, user=user, note=SWITCH_NOTE, published_from=published_from)
    if profile.release_needs_approval != needed:
        profile.release_needs_approval = needed
        profile.save(update_fields=["release_needs_approval", "updated_at"])  # recorded in the field history
    return first


# -- requests ----------------------------------------------------------------------------------------------------


def _already_waiting(profile: Any, kind: str, fingerprint: str) -> None:
    same = release_requests_pending(profile=profile).filter(kind=kind, document_hash=fingerprint).first()
    if same is not None:
        raise DomainError(
            ERROR_ALREADY_WAITING.format(
                kind=same.get_kind_display().lower(), agent_id=profile.agent_id, who=_username(same.requested_by)
            )
        )


def publish_request(
    *, profile: Any, user: Any, note: str = "", based_on: int | None = UNSET, forced_reason: str = ""
) -> ReleaseRequest:
    """Ask a second person to publish the profile's draft as it is now. Refused as the publish itself would be:
    another version went live since the review (:class:`VersionConflict`), nothing to publish, the user's model
    settings (:func:`model_settings_check`), failing routing tests or required conversation tests without a reason
    from a user who may give one."""
    draft = _draft(profile)
    live = live_version(profile)
    live_number = live.number if live else None
    if based_on is not UNSET and based_on != live_number:
        raise VersionConflict(
            f"Version {live_number} of {profile.agent_id} was published meanwhile: review what changed and ask "
            "again. Your draft is unchanged.",
            fields={"based_on": [f"The live version is {live_number}."]},
        )
    if live is not None and documents_same(live.document, draft):
        raise NothingToPublish(f"The draft of {profile.agent_id} is the same as the live version {live.number}.")
    model_settings_check(profile=profile, document=draft, served=live.document if live else draft, user=user)
    fingerprint = document_fingerprint(draft)
    _already_waiting(profile, ReleaseKind.PUBLISH, fingerprint)
    gated = release_gate(profile=profile, document=draft, user=user, forced_reason=forced_reason)
    return ReleaseRequest.objects.create(
        profile=profile,
        kind=ReleaseKind.PUBLISH,
        based_on=live_number,
        document_hash=fingerprint,
        note=note,
        forced_reason=gated.forced_reason,
        requested_by=user,
    )


def rollout_request(*, plan: RolloutPlan, user: Any, note: str = "") -> ReleaseRequest:
    """Ask a second person to start a ready version plan (its candidate made already)."""
    if plan.status != RolloutPlanStatus.READY or plan.target != RolloutPlanTarget.VERSION or plan.profile is None:
        raise RolloutNotPossible(f"Plan {plan} is not a ready plan of a routing version: nothing to ask for.")
    live = live_version(plan.profile)
    if live is None:
        raise RolloutNotPossible(f"{plan.profile.agent_id} has no live version to compare the candidate with.")
    fingerprint = plan_fingerprint(plan)
    _already_waiting(plan.profile, ReleaseKind.ROLLOUT, fingerprint)
    return ReleaseRequest.objects.create(
        profile=plan.profile,
        kind=ReleaseKind.ROLLOUT,
        based_on=live.number,
        document_hash=fingerprint,
        plan=plan,
        version=plan.candidate,
        note=note,
        requested_by=user,
    )


@dataclass(frozen=True)
class RolloutOutcome:
    """What :func:`draft_rollout` made: the candidate and its plan, started (``decision``) or waiting for a second
    person (``request``)."""

    candidate: RoutingVersion
    plan: RolloutPlan
    decision: RolloutDecision | None = None
    request: ReleaseRequest | None = None


def draft_rollout(
    *,
    profile: Any,
    user: Any,
    settings: Mapping[str, Any],
    note: str = "",
    based_on: int | None = UNSET,
    forced_reason: str = "",
    name: str = "",
) -> RolloutOutcome:
    """Roll the profile's draft out in stages: make the candidate from it (the routing tests gate it), a plan with
    ``settings`` (:data:`PLAN_SETTINGS`, validated by the plan's rules), and start the plan — or, when the profile
    needs a second person and ``user`` is someone, leave it ready with a :class:`ReleaseRequest` for it.

    Checked before anything is stored: a live version to compare with, no other plan running for the profile, the
    settings. Raises :class:`RolloutNotPossible`, the publish's refusals (conflict, nothing to publish, failing tests,
    model settings) and :class:`django.core.exceptions.ValidationError` for wrong settings."""
    live = live_version(profile)
    if live is None:
        raise RolloutNotPossible(
            f"{profile.agent_id} was never published: a staged rollout compares the draft with the live version. "
            "Publish it to everyone first."
        )
    busy = RolloutPlan.objects.filter(
        profile=profile, status__in=[RolloutPlanStatus.RUNNING, RolloutPlanStatus.PAUSED]
    ).first()
    if busy is not None:
        raise RolloutNotPossible(
            f"{profile.agent_id} already has a rollout running ({busy.name}): let it finish, or abort it, first."
        )
    values = {name: settings[name] for name in PLAN_SETTINGS if name in settings}
    plan = RolloutPlan(target=RolloutPlanTarget.VERSION, profile=profile, created_by=user, **values)
    errors = plan_errors(target=plan.target, stages=plan.stages, guards=plan.guards, profile=profile)
    errors.pop("candidate", None)  # made below, from the draft
    try:
        plan.clean_fields(exclude=["name", "candidate", "control", "created_by", "profile"])
    except ValidationError as exc:
        errors.update(exc.message_dict)
    if errors:
        raise ValidationError(errors)
    held = user is not None and needs_second_person(profile)
    candidate = version_publish(
        profile=profile, user=user, note=note, based_on=based_on, forced_reason=forced_reason, release=False
    )
    with transaction.atomic():
        plan.candidate = candidate
        plan.name = (name or f"{profile.agent_id} version {candidate.number}")[:200]
        plan.save()
        if held:
            request = rollout_request(plan=plan, user=user, note=note)
            return RolloutOutcome(candidate=candidate, plan=plan, request=request)
    try:
        decision = plan_start(plan, actor=_admin_actor(user) if user is not None else "admin", user=user)
    except RolloutStateError as exc:
        raise RolloutNotPossible(f"{exc} The plan {plan.name} was made and is ready: start it from its page.") from exc
    plan.refresh_from_db()
    return RolloutOutcome(candidate=candidate, plan=plan, decision=decision)


# -- decisions ---------------------------------------------------------------------------------------------------


def _claim(request: ReleaseRequest, user: Any, new_status: str, note: str) -> ReleaseRequest:
    """Mark a pending request decided, once: a second approver at the same moment finds it decided."""
    now = timezone.now()
    claimed = ReleaseRequest.objects.filter(pk=request.pk, status=ReleaseStatus.PENDING).update(
        status=new_status, decided_by=user, decided_at=now, decision_note=note
    )
    if not claimed:
        request.refresh_from_db()
        raise ReleaseRequestDecided(ERROR_NOT_PENDING.format(status=request.get_status_display().lower()))
    request.refresh_from_db()
    return request


def _reopen(request: ReleaseRequest) -> None:
    ReleaseRequest.objects.filter(pk=request.pk).update(
        status=ReleaseStatus.PENDING, decided_by=None, decided_at=None, decision_note=""
    )


def release_request_approve(
    *, request: ReleaseRequest, user: Any, note: str = "", fingerprint: str | None = None
) -> ReleaseRequest:
    """Approve ``request`` as ``user``: publish the draft (as its requester, approved by ``user``) or start the plan.

    Refused (nothing released) when ``user`` may not approve or asked for it (:class:`ReleaseRequestRefused`), when it
    was decided already (:class:`ReleaseRequestDecided`), when it is out of date — or ``fingerprint``, what the
    approver's page showed, is not what would be released — (:class:`ReleaseRequestStale`; the request is marked
    out of date), and with the publish's or the start's own refusals (the request stays pending)."""
    if not may_approve(user):
        raise ReleaseRequestRefused(ERROR_NOT_APPROVER)
    if request.requested_by_id == user.pk:
        raise ReleaseRequestRefused(ERROR_APPROVER_SAME)
    if request.status != ReleaseStatus.PENDING:
        raise ReleaseRequestDecided(ERROR_NOT_PENDING.format(status=request.get_status_display().lower()))
    requester = request.requested_by
    if requester is None or not requester.is_active:
        raise ReleaseRequestRefused(ERROR_REQUESTER_GONE)
    stale = release_request_stale_reason(request)
    if not stale and fingerprint is not None and fingerprint != request.document_hash:
        stale = "What your page showed is not what would be released now: reload it and review again."
    if stale:
        _claim(request, user, ReleaseStatus.STALE, stale)
        raise ReleaseRequestStale(f"{stale} The request is out of date: ask for it again.")
    profile = AgentProfile.objects.get(pk=request.profile_id)
    _claim(request, user, ReleaseStatus.APPROVED, note)
    try:
        if request.kind == ReleaseKind.PUBLISH:
            draft = _draft(profile)
            if document_fingerprint(draft) != request.document_hash:  # edited between the check and now
                raise VersionConflict("The draft was edited a moment ago: review it again.")
            version = version_publish(
                profile=profile,
                user=requester,
                note=request.note,
                based_on=request.based_on,
                document=draft,
                forced_reason=request.forced_reason,
                approved_by=user,
            )
            ReleaseRequest.objects.filter(pk=request.pk).update(version=version)
        else:
            assert request.plan is not None  # a rollout request holds its plan (release_request_stale_reason)
            plan_start(
                request.plan,
                actor=_admin_actor(requester, approved_by=user),
                user=requester,
                approved_by=user,
                fingerprint=request.document_hash,  # checked under the plan's lock: changed a moment ago, not started
            )
    except (VersionConflict, PlanChanged) as exc:
        said = exc.message if isinstance(exc, VersionConflict) else str(exc)
        ReleaseRequest.objects.filter(pk=request.pk).update(status=ReleaseStatus.STALE, decision_note=said)
        raise ReleaseRequestStale(f"{said} The request is out of date: ask for it again.") from exc
    except RolloutStateError as exc:
        _reopen(request)
        raise RolloutNotPossible(str(exc)) from exc
    except DomainError:
        _reopen(request)
        raise
    request.refresh_from_db()
    return request


def release_request_decline(*, request: ReleaseRequest, user: Any, note: str) -> ReleaseRequest:
    """Decline ``request`` with a note saying why (required). A declined rollout's plan stays ready: its requester
    may change it and ask again, or abort it."""
    if not may_approve(user):
        raise ReleaseRequestRefused(ERROR_NOT_APPROVER)
    if not note.strip():
        raise DomainError(ERROR_DECLINE_NOTE, fields={"decision_note": [ERROR_DECLINE_NOTE]})
    return _claim(request, user, ReleaseStatus.DECLINED, note.strip())


def release_request_withdraw(*, request: ReleaseRequest, user: Any) -> ReleaseRequest:
    """The requester takes their request back."""
    if request.requested_by_id != getattr(user, "pk", None):
        raise ReleaseRequestRefused(ERROR_WITHDRAW_OTHERS)
    return _claim(request, user, ReleaseStatus.WITHDRAWN, "")
