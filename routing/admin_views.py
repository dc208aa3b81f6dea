"""Admin pages that are not a model's list or form: the route preview.

The preview runs the same decision the chat API runs (:func:`routing.stack.conversation_decide` over the current
compiled snapshot, with the conversation's open flows: its state and the earlier messages typed, played first) and
explains it, the conversation stack included; nothing is executed or stored.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync
from django import forms
from django.contrib.admin import ModelAdmin
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.views import View

from agents.models import AgentProfile, UsagePurpose
from agents.public import usage_outside_turns
from routing import snapshot
from routing.forms import LANGUAGE_NAMES, RoutePreviewForm
from routing.models import Intent, StatePolicy
from routing.router import RouteDecision
from routing.routing_test_drafts import RoutingTestDraft, test_case_add_url, test_case_expect, test_case_may_add
from routing.stack_explained import StackExplained, frames_top_first, step_explained
from routing.stack_replay import PlayedMessage, conversation_replay

logger = logging.getLogger(__name__)

# Publishing and reverting a profile's versions (the release pages are the releases app's): the routing pages ask it
# too, to link an edited draft to its "Publish draft" page.
PUBLISH_PERMISSION = "routing.add_routingversion"


def may_publish(request: HttpRequest) -> bool:
    """Publishing and reverting: ``routing.add_routingversion``."""
    return bool(request.user.has_perm(PUBLISH_PERMISSION))


METHOD_LABELS = {
    "small_talk": "Small talk (a greeting, thanks, a goodbye, a question about the assistant, asking for a person)",
    "state": "Conversation state policy",
    "keyword": "Keyword match",
    "examples": "Examples (similarity to the intents' example messages)",
    "llm": "LLM classifier",
    "llm_plan": "Supervisor plan by the model",
    "fallback": "Fallback specialist",
    "repair": "Conversation repair (cancel, correct, repeat, skip, already told)",
    "memory": "Customer memory (remember, forget, what do you know about me)",
}

ERROR_PROFILE_NOT_ROUTABLE = "Profile {agent_id} is not in the compiled routing (is it enabled?)."
ERROR_DECISION_FAILED = "The routing decision failed: {error}"
EARLIER_MAX_MESSAGES = 10
EARLIER_MAX_CHARS = 4000
ERROR_EARLIER_TOO_MANY = "At most {limit} earlier messages, one a line (there are {count})."
ERROR_EARLIER_TOO_LONG = "Earlier message {number} is longer than {limit} characters."


@dataclass
class Candidate:
    intent: str
    agent: str
    priority: int
    matched_keywords: list[str]
    lost_because: str
    url: str = ""


@dataclass(frozen=True)
class EarlierMessage:
    """An earlier message of the previewed conversation, as it was decided and what it did to the open flows."""

    text: str
    decision: RouteDecision
    stack: str  # what it did to the open flows, in one line (StackExplained.summary)

    @classmethod
    def of(cls, played: PlayedMessage) -> EarlierMessage:
        return cls(text=played.text, decision=played.decision, stack=step_explained(played.step).summary)


@dataclass(frozen=True)
class ConversationShown:
    """The conversation around the previewed message: the earlier messages played first, the flows open when the
    message came (the one its reply goes to first), and what the message did to them (events, the flows open after
    it, its repair pattern and requests)."""

    earlier: list[EarlierMessage]
    frames_before: list[str]
    after: StackExplained


@dataclass
class RoutePreview:
    """A decision with what a business user needs to understand it."""

    profile: AgentProfile
    decision: RouteDecision
    method_label: str
    matched_keywords: list[str]
    candidates: list[Candidate]
    excluded: list[str]  # a sentence per keyword an exclusion cancelled
    classifier: dict[str, Any] | None
    classifier_note: str
    examples: dict[str, Any] | None
    effective_mode: str
    draft: bool = False
    version_label: str = ""  # "live version 3", "the draft", "the draft (never published)"
    intent_url: str = ""
    decision_json: str = field(default="", repr=False)
    test_case_url: str = ""  # the pre-filled "Add as routing test case" form, for users who may add one
    conversation: ConversationShown | None = None


def _lost_because(candidate: dict[str, Any], *, winner_priority: int, winner_keywords: int) -> str:
    """Which rule of the documented tie-break order (see :mod:`routing.router`) put the candidate behind."""
    if candidate["priority"] > winner_priority:
        return f"Lower priority ({candidate['priority']} vs {winner_priority}; lower number wins)"
    if len(candidate["matched_keywords"]) < winner_keywords:
        return f"Fewer keywords matched ({len(candidate['matched_keywords'])} vs {winner_keywords})"
    return "Tie-break: longer keyword, then earlier match, then name"


def _classifier_note(decision: RouteDecision, *, llm_enabled: bool) -> str:
    classification = decision.metadata.get("classifier")
    if classification is not None:
        if decision.method == "llm":
            return "Consulted, and it decided."
        return "Consulted, but it did not decide (unknown intent or confidence below the threshold)."
    if not llm_enabled:
        return "Not consulted: the LLM classifier is switched off for this profile."
    if decision.method in ("state", "keyword", "repair"):
        return f"Not consulted: the {METHOD_LABELS[decision.method].lower()} decided first."
    if decision.method == "examples":
        return "Not consulted: the examples decided first."
    return "Not consulted: the profile has no enabled intents to classify into."


def _examples_explained(decision: RouteDecision) -> dict[str, Any] | None:
    """The examples tier's evidence with a sentence per ranked intent: why it won, or why it lost (to the rule, to
    another intent or to "none of these")."""
    evidence = decision.metadata.get("examples")
    if not evidence:
        return None
    threshold, margin = evidence["threshold"], evidence["margin"]
    ranking = evidence.get("ranking", [])
    none = evidence.get("none_of_these") or {"score": 0.0, "kind": "", "label": ""}
    decided = decision.method == "examples"
    rows = []
    for place, entry in enumerate(ranking):
        score = entry["score"]
        if place == 0:
            rival = max(ranking[1]["score"] if len(ranking) > 1 else 0.0, none["score"])
            if decided:
                why = f"Won: {score:.2f} ≥ threshold {threshold:.2f}, and {margin:.2f} or more ahead of the rest."
            elif none["score"] and none["score"] >= score:
                why = (
                    f"Likeliest intent, but the message reads as none of these ({none['label']}, {none['score']:.2f})."
                )
            elif score < threshold:
                # The recorded scores are rounded: a score shown as 1.00 may still be under a threshold of 1.00.
                why = f"Likeliest, but {score:.2f} is below the threshold {threshold:.2f}: the tier did not decide."
            else:
                why = f"Likeliest, but only {score - rival:.2f} ahead of the next (margin {margin:.2f}): too close."
        else:
            why = f"Less likely ({score:.2f} against {ranking[0]['score']:.2f})."
        rows.append({**entry, "why": why})
    if none["score"]:
        rows.append(
            {"intent": f"none of these ({none['label']})", "score": none["score"], "why": _none_why(none, ranking)}
        )
    return {**evidence, "rows": rows, "decided": decided}


def _none_why(none: dict[str, Any], ranking: list[dict[str, Any]]) -> str:
    """Why "none of these" won or lost: the small talk, off-topic and out-of-scope messages the intents compete with."""
    best = ranking[0]["score"] if ranking else 0.0
    if none["score"] >= best:
        return "The message is more like messages that belong to no intent than like any intent's examples."
    return f"Less likely than {ranking[0]['intent']} ({none['score']:.2f} against {best:.2f})."


def exclusion_sentence(entry: dict[str, Any]) -> str:
    """Why a keyword did not count, from a decision's ``metadata["excluded_keywords"]`` entry
    (:meth:`routing.keywords.KeywordExclusion.describe`)."""
    keyword, exclusion, intent = entry["keyword"], entry["exclusion"], entry["intent"]
    if entry.get("kind") == "context":
        return f"'{keyword}' did not count: '{exclusion}' is in the message, an exclusion of {intent}"
    return f"'{keyword}' did not count: it is inside '{exclusion}', an exclusion of {intent}"


def off_language_sentence(entry: dict[str, Any]) -> str:
    """Why a keyword did not count, from a decision's ``metadata["keywords_off_language"]`` entry
    (:meth:`routing.keywords.KeywordOffLanguage.describe`)."""
    read_as = LANGUAGE_NAMES.get(entry["language"], entry["language"])
    return (
        f"'{entry['keyword']}' of {entry['intent']} did not count: the message reads as {read_as}, "
        f"'{entry['keyword']}' is limited to {', '.join(entry['languages'])}"
    )


def exclusion_off_language_sentence(entry: dict[str, Any]) -> str:
    """Why an exclusion cancelled nothing, from a decision's ``metadata["exclusions_off_language"]`` entry
    (:meth:`routing.keywords.ExclusionOffLanguage.describe`)."""
    read_as = LANGUAGE_NAMES.get(entry["language"], entry["language"])
    return (
        f"'{entry['exclusion']}' did not cancel '{entry['keyword']}' of {entry['intent']}: the message reads as "
        f"{read_as}, '{entry['exclusion']}' is limited to {', '.join(entry['languages'])}"
    )


def set_aside_sentences(aside: dict[str, Any] | None) -> list[str]:
    """Why keywords that matched did not count: the keyword check read the message as none of these or as another
    intent (``metadata["keywords_set_aside"]``, :meth:`routing.router.CompiledRouter.checked_keyword_match`)."""
    if not aside:
        return []
    none, other = aside["none_of_these"], aside.get("reads_as")
    if other:
        reading = f"reads as {other['intent']} ({other['score']:.2f}"
    else:
        reading = f"reads as none of these ({none['label']}, {none['score']:.2f}"
    return [
        f"{', '.join(repr(k) for k in hit['matched_keywords'])} of {hit['intent']} did not count: the message as a "
        f"whole {reading}; at least {aside['bar']:.2f} sure it is not {hit['intent']}, the keyword check)"
        for hit in aside["keywords"]
    ]


def _version_label(released: int | None, *, draft: bool) -> str:
    if released is None:
        return "the draft (never published: customers are served it too)"
    return "the draft (not yet published)" if draft else f"live version {released}"


def route_preview(
    *,
    profile: AgentProfile,
    text: str,
    state: str = "",
    active_agent: str = "",
    draft: bool = False,
    earlier: Sequence[str] = (),
) -> RoutePreview:
    """Decide ``text`` for ``profile`` exactly as the chat API would, and explain the decision: with the version
    customers are served, or (``draft``) with the profile's draft. The conversation is in ``state`` with
    ``active_agent`` answering; its ``earlier`` messages, oldest first, are played from there before ``text``
    (:func:`routing.stack_replay.conversation_replay`), so the message meets the flows they left open.

    Raises :class:`LookupError` when the profile is not in the compiled snapshot.
    """
    current = snapshot.current()
    spec = current.profile(profile.agent_id, draft=draft)
    if spec is None:
        raise LookupError(ERROR_PROFILE_NOT_ROUTABLE.format(agent_id=profile.agent_id))
    with usage_outside_turns(purpose=UsagePurpose.ROUTE_PREVIEW, profile_id=profile.pk):  # a classifier may be asked
        played = async_to_sync(conversation_replay)(
            profile=spec, messages=[*earlier, text], now=timezone.now(), state=state, active_agent=active_agent
        )
    *before, last = played
    decision = last.decision

    matched = list(decision.metadata.get("matched_keywords", []))
    raw_candidates = list(decision.metadata.get("candidates", []))
    winner = spec.router.intents_by_name.get(decision.intent)
    intent_ids = dict(
        Intent.objects.filter(
            profile_id=profile.pk, name__in=[decision.intent, *(c["intent"] for c in raw_candidates)]
        ).values_list("name", "pk")
    )

    def url_for(name: str) -> str:
        pk = intent_ids.get(name)
        return reverse("admin:routing_intent_change", args=[pk]) if pk else ""

    candidates = [
        Candidate(
            intent=c["intent"],
            agent=c["agent"],
            priority=c["priority"],
            matched_keywords=list(c["matched_keywords"]),
            lost_because=_lost_because(
                c, winner_priority=winner.priority if winner else 0, winner_keywords=len(matched)
            ),
            url=url_for(c["intent"]),
        )
        for c in raw_candidates
    ]
    return RoutePreview(
        profile=profile,
        decision=decision,
        method_label=METHOD_LABELS.get(decision.method, decision.method),
        matched_keywords=matched,
        candidates=candidates,
        excluded=[
            *(exclusion_sentence(entry) for entry in decision.metadata.get("excluded_keywords", [])),
            *(off_language_sentence(entry) for entry in decision.metadata.get("keywords_off_language", [])),
            *(exclusion_off_language_sentence(entry) for entry in decision.metadata.get("exclusions_off_language", [])),
            *set_aside_sentences(decision.metadata.get("keywords_set_aside")),
        ],
        classifier=decision.metadata.get("classifier"),
        classifier_note=_classifier_note(decision, llm_enabled=spec.llm_router_enabled),
        examples=_examples_explained(decision),
        effective_mode=spec.effective_mode,
        draft=draft,
        version_label=_version_label(current.released.get(profile.agent_id), draft=draft),
        intent_url=url_for(decision.intent),
        decision_json=json.dumps(decision.as_dict(), ensure_ascii=False, indent=2),
        conversation=ConversationShown(
            earlier=[EarlierMessage.of(message) for message in before],
            frames_before=frames_top_first(last.frames_before),
            after=step_explained(last.step),
        ),
    )


class ConversationPreviewForm(RoutePreviewForm):
    """The route preview's form with the conversation's earlier messages, one a line, oldest first."""

    earlier = forms.CharField(
        label="Earlier messages",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 80, "class": "vLargeTextField"}),
        help_text=(
            f"Optional, up to {EARLIER_MAX_MESSAGES}: the customer's earlier messages in this conversation, one a "
            "line, oldest first. They are read first, from the state and specialist above, as the chat would: the "
            "message then meets the flows they left open."
        ),
    )
    field_order = ["profile", "text", "state", "active_specialist", "earlier", "version"]

    def clean_earlier(self) -> list[str]:
        lines = [line.strip() for line in self.cleaned_data.get("earlier", "").splitlines() if line.strip()]
        if len(lines) > EARLIER_MAX_MESSAGES:
            raise ValidationError(ERROR_EARLIER_TOO_MANY.format(limit=EARLIER_MAX_MESSAGES, count=len(lines)))
        for number, line in enumerate(lines, start=1):
            if len(line) > EARLIER_MAX_CHARS:
                raise ValidationError(ERROR_EARLIER_TOO_LONG.format(number=number, limit=EARLIER_MAX_CHARS))
        return lines


class RoutePreviewView(View):
    """``/admin/routing/intent/preview/``: for anyone who may view intents (routing editors too).

    The form is sent with GET: a preview changes nothing, and its URL can be shared.
    """

    model_admin: ModelAdmin | None = None
    template_name = "admin/routing/intent/route_preview.html"

    def get(self, request: HttpRequest) -> HttpResponse:
        assert self.model_admin is not None
        if not self.model_admin.has_view_permission(request):
            raise PermissionDenied
        form = ConversationPreviewForm(request.GET if "text" in request.GET else None)
        preview = None
        if form.is_bound and form.is_valid():
            data = form.cleaned_data
            specialist = data.get("active_specialist")
            try:
                preview = route_preview(
                    profile=data["profile"],
                    text=data["text"],
                    state=data["state"],
                    active_agent=specialist.name if specialist else "",
                    draft=data.get("version") == "draft",
                    earlier=data["earlier"],
                )
                if test_case_may_add(request):  # the earlier messages, as played, are the test's earlier turns
                    earlier = preview.conversation.earlier if preview.conversation else []
                    preview.test_case_url = test_case_add_url(
                        RoutingTestDraft(
                            profile_id=data["profile"].pk,
                            message=data["text"],
                            state=data["state"],
                            active_specialist=specialist.name if specialist else "",
                            expect=test_case_expect(intent=preview.decision.intent, agent=preview.decision.agent),
                            when=timezone.localdate(),
                            turns=tuple(
                                {
                                    "message": said.text,
                                    "expect": test_case_expect(intent=said.decision.intent, agent=said.decision.agent),
                                }
                                for said in earlier
                            ),
                        )
                    )
            except LookupError as exc:
                form.add_error("profile", str(exc))
            except Exception as exc:
                # A classifier that cannot reach its model must not turn the page into a 500.
                logger.exception("route preview failed")
                form.add_error(None, ERROR_DECISION_FAILED.format(error=exc))
        opts = Intent._meta
        context = {
            **self.model_admin.admin_site.each_context(request),
            "opts": opts,
            "app_label": opts.app_label,
            "title": "Route preview",
            "subtitle": None,
            "form": form,
            "preview": preview,
            "known_states": (
                StatePolicy.objects.filter(enabled=True).order_by("state").values_list("state", flat=True).distinct()
            ),
            "changelist_url": reverse("admin:routing_intent_changelist"),
        }
        return TemplateResponse(request, self.template_name, context)
