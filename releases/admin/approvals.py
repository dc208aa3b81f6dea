"""Requests for a second person's approval in the admin: the list, and a review page to approve or decline one.

A profile that needs a second person (``AgentProfile.release_needs_approval``) turns a publish or a staged rollout
into a :class:`~releases.models.ReleaseRequest` (:mod:`releases.approvals`). Whoever may read requests
(``releases.view_releaserequest``: the "Routing editors" and the "Release approvers") sees them listed, newest first,
and each one's review page: what it would change for customers, in words, the saved routing tests run against it,
and — for a rollout — the plan's stages and guards. Someone with ``releases.approve_release`` who did not ask for it
approves it (then it is published, or the plan starts) or declines it with a note; the requester may withdraw it.
A request whose draft, live version or plan changed since it was asked for is out of date: the page says so and
approving it is refused. The profile's page shows its pending requests too (:mod:`releases.admin.versions`).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from common.adminkit import ReadOnlyAdminMixin
from common.errors import DomainError
from releases.admin.versions import changes_html, draft_document, version_line
from releases.approvals import (
    release_request_approve,
    release_request_decline,
    release_request_fingerprint,
    release_request_stale_reason,
    release_request_withdraw,
)
from releases.evals.gate import release_gate
from releases.models import ReleaseKind, ReleaseRequest, ReleaseStatus
from releases.versions import document_diff, may_approve
from routing.public import live_version, may_view_plans, plan_settings_words, when_words

APPROVE, DECLINE, WITHDRAW = "approve", "decline", "withdraw"


class DecisionForm(forms.Form):
    decision_note = forms.CharField(
        required=False,
        label="Note",
        widget=forms.Textarea(attrs={"rows": 2, "cols": 80}),
        help_text="Optional when you approve; when you decline, say why: the requester reads it.",
    )
    fingerprint = forms.CharField(required=False, widget=forms.HiddenInput)


@admin.register(ReleaseRequest)
class ReleaseRequestAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Release requests, read-only; decided on their review page."""

    list_display = ["profile", "kind", "status", "requested_by", "requested_at", "note", "decided_by", "review"]
    list_filter = ["status", "kind", "profile"]
    list_select_related = ["profile", "requested_by", "decided_by"]
    search_fields = ["note", "profile__agent_id", "requested_by__username", "decision_note"]
    fields = (
        "profile",
        "kind",
        "status",
        "note",
        "requested_by",
        "requested_at",
        "based_on",
        "plan",
        "version",
        "decided_by",
        "decided_at",
        "decision_note",
    )
    readonly_fields = fields
    change_form_template = "admin/releases/releaserequest/change_form.html"

    @admin.display(description="")
    def review(self, obj: ReleaseRequest) -> str:
        label = "Review and decide" if obj.status == ReleaseStatus.PENDING else "Details"
        return format_html('<a href="{}">{}</a>', reverse("admin:releases_releaserequest_review", args=[obj.pk]), label)

    def get_urls(self) -> list[Any]:
        return [
            path(
                "<path:object_id>/review/",
                self.admin_site.admin_view(self.review_view),
                name="releases_releaserequest_review",
            ),
            *super().get_urls(),
        ]

    def review_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        asked = self.get_object(request, unquote(object_id))
        if asked is None:
            raise Http404
        if not self.has_view_permission(request, asked):
            raise PermissionDenied
        here = reverse("admin:releases_releaserequest_review", args=[asked.pk])
        pending = asked.status == ReleaseStatus.PENDING
        mine = asked.requested_by_id == request.user.pk
        may_decide = pending and may_approve(request.user) and not mine
        form = DecisionForm(request.POST or None, initial={"fingerprint": release_request_fingerprint(asked)})
        if request.method == "POST":
            # The page's buttons: _approve, _decline or _withdraw ("action" names one too).
            action = request.POST.get("action") or next(
                (name.lstrip("_") for name in ("_approve", "_decline", "_withdraw") if name in request.POST), ""
            )
            if (action in (APPROVE, DECLINE) and not may_decide) or (action == WITHDRAW and not (pending and mine)):
                raise PermissionDenied
            if form.is_valid():
                note = form.cleaned_data["decision_note"]
                try:
                    if action == APPROVE:
                        release_request_approve(
                            request=asked, user=request.user, note=note, fingerprint=form.cleaned_data["fingerprint"]
                        )
                        done = self._approved_message(asked)
                    elif action == DECLINE:
                        release_request_decline(request=asked, user=request.user, note=note)
                        done = f"Declined: {asked.requested_by or 'the requester'} reads your note on the request."
                    elif action == WITHDRAW:
                        release_request_withdraw(request=asked, user=request.user)
                        done = "Your request is withdrawn."
                    else:
                        raise PermissionDenied
                except DomainError as exc:
                    if "decision_note" in exc.fields:
                        form.add_error("decision_note", exc.message)
                    else:
                        self.message_user(request, exc.message, messages.ERROR)
                        return HttpResponseRedirect(here)
                else:
                    self.message_user(request, done, messages.SUCCESS)
                    return HttpResponseRedirect(self._after(request, asked))
        return TemplateResponse(
            request, "admin/releases/releaserequest/review.html", self._context(request, asked, form, may_decide, mine)
        )

    def _approved_message(self, asked: ReleaseRequest) -> str:
        asked.refresh_from_db()
        if asked.kind == ReleaseKind.PUBLISH and asked.version is not None:
            return (
                f"Approved: {asked.profile.agent_id} version {asked.version.number} is published; customers get it "
                "from their next message."
            )
        return f"Approved: the rollout of {asked.profile.agent_id} started. The guard advances it, or rolls it back."

    def _after(self, request: HttpRequest, asked: ReleaseRequest) -> str:
        asked.refresh_from_db()
        if asked.status == ReleaseStatus.APPROVED and asked.plan_id and may_view_plans(request.user):
            return reverse("analytics-rollout-page", args=[asked.plan_id])
        return reverse("admin:releases_releaserequest_review", args=[asked.pk])

    def _context(
        self, request: HttpRequest, asked: ReleaseRequest, form: DecisionForm, may_decide: bool, mine: bool
    ) -> dict[str, Any]:
        profile = asked.profile
        live = live_version(profile)
        pending = asked.status == ReleaseStatus.PENDING
        stale = release_request_stale_reason(asked) if pending else ""
        if asked.kind == ReleaseKind.PUBLISH:
            document = draft_document(profile) if pending else (asked.version.document if asked.version else None)
            title = f"Publish the draft of {profile.agent_id} to everyone"
        else:
            document = asked.version.document if asked.version else None
            number = asked.version.number if asked.version else "?"
            title = f"Roll {profile.agent_id} version {number} out in stages"
        changes = document_diff(live.document, document) if live is not None and document is not None else []
        tests = (
            release_gate(profile=profile, document=document, enforce=False).summary
            if pending and document is not None
            else {}
        )
        opts = self.model._meta
        return {
            **self.admin_site.each_context(request),
            "opts": opts,
            "app_label": opts.app_label,
            "title": title,
            "subtitle": None,
            "original": asked,
            "asked_by": asked.requested_by.get_username() if asked.requested_by else "someone who has left",
            "asked_at": when_words(asked.requested_at),
            "decided_by": asked.decided_by.get_username() if asked.decided_by else "",
            "decided_at": when_words(asked.decided_at) if asked.decided_at else "",
            "live": version_line(live),
            "changes": changes_html(changes, empty="Nothing differs from the live version."),
            "tests": tests,
            "plan_lines": plan_settings_words(asked.plan) if asked.plan is not None else [],
            "plan_url": reverse("admin:releases_rolloutplan_change", args=[asked.plan_id])
            if asked.plan_id and request.user.has_perm("releases.view_rolloutplan")
            else "",
            "stale": stale,
            "form": form,
            "may_approve": may_decide and not stale,
            "may_decline": may_decide,
            "may_withdraw": pending and mine,
            "mine": mine,
            "profile_url": reverse("admin:agents_agentprofile_change", args=[profile.pk]),
            "list_url": reverse("admin:releases_releaserequest_changelist"),
        }
