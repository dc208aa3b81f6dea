"""Versions of a profile's behaviour: publish the draft, revert to an earlier version, say what changed.

The draft is what editors change in the admin (profiles, specialists and prompts, intents and keywords, state
policies, goals and capabilities, tool rights); :func:`routing.documents.profile_documents` reads it as one
document. Publishing stores that document as the next immutable :class:`~routing.models.RoutingVersion` and
points the profile's :class:`~routing.models.ProfileRelease` at it, in one transaction; a revert publishes an
earlier version's document again under a new number. Two editors publishing at once: the profile's row is
locked while one publishes, and the other's ``based_on`` (the live number they reviewed) no longer matches, so
they get :class:`VersionConflict` and nothing of theirs is lost — their draft is still there.

Publishing applies only what the acting user may change: a version whose model endpoint, model or key variable
differs from what customers are served now is published (or reverted to) only by a user with the operator's
permission (:class:`ModelSettingsForbidden`; ``user`` ``None`` is the operator at the shell), and a version naming a
model key variable outside the operator's allow-list by no one (:class:`ModelKeyVariableRefused`).

**A second person** (the two-person rule, per profile: ``AgentProfile.release_needs_approval``). When a profile asks
for it, a user's publish is refused (:class:`ApprovalRequired`) unless another user with
:data:`APPROVE_PERMISSION` approved it (``approved_by``): in the admin a publish becomes a request that an approver
reviews (:mod:`releases.approvals`). The operator at the shell (``user`` ``None``) is not held. Nor is a revert to a
version every customer was served before (``RoutingVersion.released_at``: in an incident one person must be able to
undo) — but a revert to one never released, a staged rollout's candidate whose plan did not complete, is a publish
of something nobody approved for everyone, and is held as one (:func:`release_check`). Storing a candidate
(``release=False``) publishes nothing: it reaches customers through its rollout plan, whose start is held instead
(:mod:`releases.rollout.commands`), or through a held revert. :func:`version_release` records a version's first
release, whoever calls it.

:func:`document_diff` says what changed between two documents in words a business user reads ("keyword
'portabilidade' added to intent portabilidade_numero", "intent billing: priority 15 → 10"), with a text diff
for prompts and other long texts. It reads the documents' shape only: a top-level mapping whose values are all
mappings is a collection of named entries (intents, specialists…), any other mapping is a set of settings.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone
from rest_framework import status

from agents.models import MODEL_ENDPOINT_FIELDS, MODEL_ENDPOINT_PERMISSION, AgentProfile
from agents.public import KnowledgeSettings, model_key_variable_refusal
from common.config_version import config_version_bump
from common.endpoints import endpoint_mask
from common.errors import DomainError, NotFound
from knowledge.public import documents_hold
from releases.evals.gate import release_gate
from releases.models import RolloutPlan, RolloutPlanStatus
from routing.models import ProfileRelease, RoutingVersion
from routing.public import document_complete, live_version, profile_documents

ADDED, REMOVED, CHANGED = "added", "removed", "changed"
UNSET: Any = object()  # based_on not given: publish whatever is live
# The rollout plans whose candidate may still be served: its documents are kept for it.
PLANS_HOLDING = (RolloutPlanStatus.READY, RolloutPlanStatus.RUNNING, RolloutPlanStatus.PAUSED)

# Fields whose values are long texts: a change is shown as a text diff, not "old → new".
LONG_TEXTS = frozenset({"prompt", "policy", "synthesis_prompt", "description"})
# Addresses a document holds (llm_base_url, a backend's base_url, a server's endpoint) may carry credentials: they
# are shown, diffed and downloaded masked, never as stored.
ADDRESS_SUFFIXES = ("url", "endpoint")
# How a collection, or a list field, is named in a sentence (else: the name with underscores as spaces, less a final s).
NAMES = {
    "state_policies": "state policy",
    "capabilities": "capability",
    "mcp_tools": "MCP tool",
    "allowed_tools": "allowed tool",
    "handoff_targets": "handoff target",
    "goal_domains": "goal domain",
    "entities_schema": "entities",
    "out_of_scope_examples": "out-of-scope example",
    "knowledge": "knowledge source",
    "knowledge_synonyms": "knowledge synonyms",
}


class VersionConflict(DomainError):
    status_code = status.HTTP_409_CONFLICT
    code = "version_conflict"


class NothingToPublish(DomainError):
    status_code = status.HTTP_409_CONFLICT
    code = "nothing_to_publish"


class ModelSettingsForbidden(DomainError):
    status_code = status.HTTP_403_FORBIDDEN
    code = "permission_denied"


class ModelKeyVariableRefused(DomainError):
    code = "invalid"


class ApprovalRequired(DomainError):
    status_code = status.HTTP_403_FORBIDDEN
    code = "approval_required"


class PermissionMissing(DomainError):
    status_code = status.HTTP_403_FORBIDDEN
    code = "permission_denied"


ERROR_PERMISSION = "{user} may not {doing} (it takes the permission {permission})."
ERROR_NOT_STAFF = "{user} may not use the admin (an active staff account), nor act as it by command."


def permission_check(*, user: Any, permission: str, doing: str) -> None:
    """Does ``user`` hold ``permission``, the one the admin's page asks for the same act? For a user acting on another
    path (a command's ``--user``): a role's powers are the same on every path. ``doing`` says the act in the refusal
    ("publish telecom_contas"). ``user`` ``None`` is the operator at the shell, who may do everything; any other
    user must be one the admin lets in (active staff). Raises :class:`PermissionMissing`."""
    if user is None:
        return
    if not (user.is_active and user.is_staff):
        raise PermissionMissing(ERROR_NOT_STAFF.format(user=user.get_username()))
    if not user.has_perm(permission):
        raise PermissionMissing(ERROR_PERMISSION.format(user=user.get_username(), doing=doing, permission=permission))


APPROVE_PERMISSION = "releases.approve_release"
ERROR_APPROVAL_REQUIRED = (
    "{agent_id} needs a second person to publish or to start a rollout: ask for approval (the publish page does it), "
    "and someone with the right to approve releases approves it."
)
ERROR_APPROVER_SAME = "Nobody approves their own request: another person with the right to approve releases does."
ERROR_APPROVER_RIGHT = "{user} may not approve releases (it takes the permission {permission})."
ERROR_REVERT_NEVER_RELEASED = (
    "Version {number} was never served to every customer (a candidate whose rollout did not complete): without a "
    "second person, a revert goes back only to a version that was. Roll it out with a plan, whose start is approved."
)


def needs_second_person(profile: Any) -> bool:
    """Whether ``profile`` holds publishes and rollout starts for a second person's approval (read fresh: the
    setting may have changed since ``profile`` was loaded)."""
    return bool(
        AgentProfile.objects.filter(pk=profile.pk).values_list("release_needs_approval", flat=True).first() or False
    )


def may_approve(user: Any) -> bool:
    """Whether ``user`` may approve publishes and rollout starts (:data:`APPROVE_PERMISSION`)."""
    return bool(user is not None and getattr(user, "pk", None) and user.has_perm(APPROVE_PERMISSION))


def approval_check(*, profile: Any, user: Any, approved_by: Any) -> None:
    """The two-person rule: when ``profile`` needs a second person, ``user`` (``None``: the operator, never held)
    may publish or start a rollout only with the approval of ``approved_by``, another user with
    :data:`APPROVE_PERMISSION`. Raises :class:`ApprovalRequired`."""
    if user is None or not needs_second_person(profile):
        return
    if approved_by is None:
        raise ApprovalRequired(ERROR_APPROVAL_REQUIRED.format(agent_id=profile.agent_id))
    if getattr(approved_by, "pk", None) == getattr(user, "pk", None):
        raise ApprovalRequired(ERROR_APPROVER_SAME)
    if not may_approve(approved_by):
        raise ApprovalRequired(
            ERROR_APPROVER_RIGHT.format(user=approved_by.get_username(), permission=APPROVE_PERMISSION)
        )


def release_check(
    *, profile: Any, document: Mapping[str, Any], user: Any, approved_by: Any, reverted_from: int | None = None
) -> None:
    """The two-person rule on serving ``document`` to every customer of ``profile`` (:func:`approval_check`), but for
    a revert to a version every customer was served before: version ``reverted_from``, released
    (``released_at``), whose document ``document`` is. A revert to a version never released is held as a publish,
    the refusal saying why (:data:`ERROR_REVERT_NEVER_RELEASED`). Raises :class:`ApprovalRequired`."""
    target = None
    if reverted_from is not None:
        target = RoutingVersion.objects.filter(profile=profile, number=reverted_from).first()
        if target is not None and target.released_at is not None and target.document == document:
            return
    try:
        approval_check(profile=profile, user=user, approved_by=approved_by)
    except ApprovalRequired as exc:
        if target is None or target.released_at is not None:
            raise
        raise ApprovalRequired(f"{exc.message} {ERROR_REVERT_NEVER_RELEASED.format(number=target.number)}") from None


ERROR_MODEL_SETTINGS = (
    "Publishing this would change the model settings of {agent_id} ({fields}), which needs the permission "
    "{permission}: an operator publishes it. Nothing was published."
)


def model_settings_check(*, profile: Any, document: Mapping[str, Any], served: Mapping[str, Any], user: Any) -> None:
    """May ``user`` make ``document`` what customers of ``profile`` are served instead of ``served``? Refuses a model
    key variable outside the allow-list for everyone (:class:`ModelKeyVariableRefused`), and a change of the model
    endpoint, model or key variable for a user without :data:`agents.models.MODEL_ENDPOINT_PERMISSION`
    (:class:`ModelSettingsForbidden`, naming the fields). ``user`` ``None`` is the operator."""
    settings = document.get("profile", {})
    variable = settings.get("llm_api_key_env", "")
    refusal = model_key_variable_refusal(variable) if variable else None
    if refusal is not None:
        raise ModelKeyVariableRefused(
            f"{profile.agent_id} cannot be published: {refusal}", fields={"llm_api_key_env": [refusal]}
        )
    if user is None or user.has_perm(MODEL_ENDPOINT_PERMISSION):
        return
    now = served.get("profile", {})
    changed = [name for name in MODEL_ENDPOINT_FIELDS if settings.get(name, "") != now.get(name, "")]
    if changed:
        message = ERROR_MODEL_SETTINGS.format(
            agent_id=profile.agent_id, fields=", ".join(changed), permission=MODEL_ENDPOINT_PERMISSION
        )
        raise ModelSettingsForbidden(message, fields={name: [message] for name in changed})


def document_masked(document: Mapping[str, Any]) -> dict[str, Any]:
    """``document`` as it may be shown or downloaded: the profile's addresses masked (:data:`ADDRESS_SUFFIXES`)."""
    shown = copy.deepcopy(dict(document))
    profile = shown.get("profile")
    if isinstance(profile, dict):
        for name, value in profile.items():
            if name.endswith(ADDRESS_SUFFIXES) and isinstance(value, str):
                profile[name] = endpoint_mask(value)
    return shown


def _draft_document(agent_id: str) -> dict[str, Any]:
    return profile_documents([agent_id])[agent_id]


def _served(
    profile: Any, live: RoutingVersion | None, content: Mapping[str, Any], document: Mapping[str, Any] | None
) -> Mapping[str, Any]:
    """What customers of ``profile`` are served now: the live version, or the draft of a profile never published
    (``content`` when it is that draft)."""
    if live is not None:
        return live.document
    return content if document is None else _draft_document(profile.agent_id)


def documents_same(one: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    """Whether two documents configure the same behaviour: equal once the keys either lacks for having been published
    before them are filled in (:func:`document_complete`), as :func:`document_diff` compares them."""
    return one == other or document_complete(one) == document_complete(other)


def version_publish(
    *,
    profile: Any,
    user: Any = None,
    note: str = "",
    based_on: int | None = UNSET,
    document: Mapping[str, Any] | None = None,
    reverted_from: int | None = None,
    forced_reason: str = "",
    release: bool = True,
    published_from: str = "",
    approved_by: Any = None,
) -> RoutingVersion:
    """Publish ``document`` (default: the profile's draft) as the profile's next version, live at once — or, with
    ``release=False``, stored as a candidate for a rollout plan while the live version stays live.

    ``based_on`` is the live version number the editor reviewed (``None``: never published); when another
    version went live meanwhile the publish is refused with :class:`VersionConflict`. Publishing what is already
    live is refused with :class:`NothingToPublish` (a revert may).

    The gate (:func:`releases.evals.gate.release_gate`): the profile's enabled saved routing tests and conversation
    tests run against ``document`` first, outside the transaction; a failing routing test or required conversation
    test refuses the publish (``RoutingTestsFailed``, ``ConversationTestsFailed``, 409) unless ``forced_reason`` is
    given by a user with ``routing.publish_failing_version`` (a reason from anyone else: ``PublishForbidden``, 403);
    a failing conversation test that is not required only warns. The runs' summary is kept with the version
    (``test_summary``), the reason only when tests failed. A revert is not refused (it
    goes back to what was live before; its run is recorded).

    ``published_from`` (a :class:`~routing.models.PublishedFrom`) says where, for a version nobody signed.
    ``user`` publishes: :func:`model_settings_check` first, against what is served now (``None``: the operator);
    when the profile needs a second person, ``approved_by`` is who approved it (:func:`release_check`, before
    anything runs: a revert to a version every customer was served before and a candidate are not held).
    """
    content = dict(document) if document is not None else _draft_document(profile.agent_id)
    if release:
        release_check(
            profile=profile, document=content, user=user, approved_by=approved_by, reverted_from=reverted_from
        )
    live = live_version(profile)
    model_settings_check(profile=profile, document=content, served=_served(profile, live, content, document), user=user)
    summary: dict[str, Any] = {}
    if live is None or not documents_same(live.document, content) or reverted_from is not None:  # else: said below
        gated = release_gate(
            profile=profile, document=content, user=user, forced_reason=forced_reason, enforce=reverted_from is None
        )
        summary, forced_reason = gated.summary, gated.forced_reason
    return _version_store(
        profile=profile,
        user=user,
        note=note,
        based_on=based_on,
        content=content,
        reverted_from=reverted_from,
        forced_reason=forced_reason,
        test_summary=summary,
        release=release,
        published_from=published_from,
        approved_by=approved_by,
    )


@transaction.atomic
def _version_store(
    *,
    profile: Any,
    user: Any,
    note: str,
    based_on: int | None,
    content: dict[str, Any],
    reverted_from: int | None,
    forced_reason: str,
    test_summary: dict[str, Any],
    release: bool = True,
    published_from: str = "",
    approved_by: Any = None,
) -> RoutingVersion:
    AgentProfile.objects.select_for_update().filter(pk=profile.pk).first()  # one publisher per profile at a time
    live = live_version(profile)
    live_number = live.number if live else None
    if based_on is not UNSET and based_on != live_number:
        raise VersionConflict(
            f"Version {live_number} of {profile.agent_id} was published meanwhile (you reviewed "
            f"{'no version' if based_on is None else f'version {based_on}'}): review what changed and publish "
            "again. Your draft is unchanged.",
            fields={"based_on": [f"The live version is {live_number}."]},
        )
    if live is not None and documents_same(live.document, content) and reverted_from is None:
        raise NothingToPublish(f"The draft of {profile.agent_id} is the same as the live version {live.number}.")
    if live is not None:  # another version may have gone live since the check: check again against it, locked
        model_settings_check(profile=profile, document=content, served=live.document, user=user)
    latest = RoutingVersion.objects.filter(profile=profile).aggregate(latest=Max("number"))["latest"] or 0
    version = RoutingVersion.objects.create(
        profile=profile,
        number=latest + 1,
        document=content,
        note=note,
        reverted_from=reverted_from,
        forced_reason=forced_reason,
        test_summary=test_summary,
        created_by=user if getattr(user, "pk", None) else None,
        published_from=published_from,
        approved_by=approved_by if getattr(approved_by, "pk", None) else None,
    )
    if release:
        version_release(profile=profile, version=version, user=version.created_by)
    documents_held(profile=profile, stored=version)
    return version


def documents_held(*, profile: Any, stored: RoutingVersion | None = None) -> None:
    """Tell the profile's knowledge which versions are served — the live one, the candidates of its rollout plans not
    ended, and ``stored`` (just stored) — so that it keeps the documents they hold and deletes the replaced ones none
    holds any more, and embeds them when one of them searches with vectors
    (:func:`knowledge.services.documents_hold`)."""
    served = RoutingVersion.objects.filter(profile=profile).filter(
        Q(pk=getattr(stored, "pk", None))
        | Q(pk__in=ProfileRelease.objects.filter(profile=profile).values("version_id"))
        | Q(pk__in=RolloutPlan.objects.filter(profile=profile, status__in=PLANS_HOLDING).values("candidate_id"))
    )
    documents = dict(served.values_list("number", "document"))
    documents_hold(
        profile_pk=profile.pk,
        versions={number: document.get("knowledge") for number, document in documents.items()},
        vectors=any(
            KnowledgeSettings.from_json(document["profile"].get("knowledge")).vectors for document in documents.values()
        ),
    )


def served_draft_publish(*, profile: Any, user: Any, note: str, published_from: str = "") -> RoutingVersion | None:
    """Publish what customers of a profile never published are served — its draft — as its first version, before the
    profile starts to need a second person (:func:`releases.approvals.second_person_switch`): for customers nothing
    changes, so neither the two-person rule nor the saved tests hold it (their run is recorded, as a revert's
    is); the model settings' checks apply as to any publish. ``None`` when a version is live (then customers are not
    served the draft)."""
    if live_version(profile) is not None:
        return None
    content = _draft_document(profile.agent_id)
    model_settings_check(profile=profile, document=content, served=content, user=user)
    gated = release_gate(profile=profile, document=content, user=user, enforce=False)
    try:
        return _version_store(
            profile=profile,
            user=user,
            note=note,
            based_on=None,
            content=content,
            reverted_from=None,
            forced_reason="",
            test_summary=gated.summary,
            published_from=published_from,
        )
    except VersionConflict:  # published meanwhile: the draft is not served any more
        return None


def version_release(*, profile: Any, version: RoutingVersion, user: Any = None) -> None:
    """Serve ``version`` (already stored) to the profile's customers: a publish, or a rollout plan's completion. The
    first time, it is recorded as released (``released_at``): a revert may come back to it without a second person.
    The caller checked the two-person rule."""
    now = timezone.now()
    ProfileRelease.objects.update_or_create(
        profile=profile,
        defaults={"version": version, "published_by": user if getattr(user, "pk", None) else None, "published_at": now},
    )
    if version.released_at is None:
        RoutingVersion.objects.filter(pk=version.pk, released_at__isnull=True).update(released_at=now)
        version.released_at = now
    config_version_bump()  # with the transaction: every process rebuilds its snapshot on its next message


def version_revert(
    *,
    profile: Any,
    to: int,
    user: Any = None,
    note: str = "",
    published_from: str = "",
    approved_by: Any = None,
) -> RoutingVersion:
    """Publish version ``to`` again, as a new number (the draft is left as it is). Held for a second person's approval
    (``approved_by``) when ``to`` was never served to every customer and the profile needs one (:func:`release_check`).
    """
    target = RoutingVersion.objects.filter(profile=profile, number=to).first()
    if target is None:
        raise NotFound(f"{profile.agent_id} has no version {to}.", fields={"to": [f"No version {to}."]})
    return version_publish(
        profile=profile,
        user=user,
        note=note or f"Revert to version {to}",
        document=target.document,
        reverted_from=to,
        published_from=published_from,
        approved_by=approved_by,
    )


# -- what changed --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One difference between two documents, as a sentence (``text``) and, for long texts, a diff (``detail``)."""

    kind: str  # added | removed | changed
    where: str  # "intent portabilidade_numero", "profile"
    field: str
    old: Any
    new: Any
    text: str
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "where": self.where,
            "field": self.field,
            "old": self.old,
            "new": self.new,
            "text": self.text,
            "detail": self.detail,
        }


def _name(key: str) -> str:
    if key in NAMES:
        return NAMES[key]
    words = key.replace("_", " ")
    return words[:-1] if words.endswith("s") and not words.endswith("ss") else words


def _words(key: str) -> str:
    """A field's name in a sentence, as it is (``max_input_chars`` → ``max input chars``)."""
    return key.replace("_", " ")


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return f"'{value}'" if value else "(empty)"
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _is_collection(value: Any) -> bool:
    return isinstance(value, Mapping) and bool(value) and all(isinstance(item, Mapping) for item in value.values())


def document_diff(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[Change]:
    """What changed from ``old`` to ``new`` (``old`` ``None``: everything is new), in document order. Keys a document
    gained after one of them was published are compared as that one was served (:func:`document_complete`): no
    change where the other holds their default."""
    old = document_complete(old) if old else {}
    new = document_complete(new)
    changes: list[Change] = []
    for key in _keys(old, new):
        if key == "schema":
            continue
        before, after = old.get(key), new.get(key)
        if _is_collection(before) or _is_collection(after):
            changes.extend(_collection_diff(key, before or {}, after or {}))
        elif isinstance(before, Mapping) or isinstance(after, Mapping):
            changes.extend(_fields_diff(_name(key), before or {}, after or {}))
        elif before != after:
            changes.extend(_field_diff("profile", key, before, after))
    return changes


def document_summary(document: Mapping[str, Any]) -> list[str]:
    """What a document holds, a sentence per kind of row, its names sorted: "4 specialists: billing_agent, …"."""
    said = []
    for key, value in document_complete(document).items():
        if key != "schema" and _is_collection(value):
            kind = _name(key) if len(value) == 1 else key.replace("_", " ")
            said.append(f"{len(value)} {kind}: {', '.join(sorted(value))}")
    return said


def _keys(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    return list(new) + [key for key in old if key not in new]


def _collection_diff(key: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Change]:
    kind = _name(key)
    changes = []
    for name in _keys(before, after):
        where = f"{kind} {name}"
        if name not in before:
            changes.append(Change(ADDED, where, "", None, after[name], f"{kind} {name} added"))
        elif name not in after:
            changes.append(Change(REMOVED, where, "", before[name], None, f"{kind} {name} removed"))
        elif key == "knowledge" and isinstance(before[name], Mapping) and isinstance(after[name], Mapping):
            changes.extend(_documents_diff(where, before[name], after[name]))
        else:
            changes.extend(_fields_diff(where, before[name], after[name]))
    return changes


def _documents_diff(where: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Change]:
    """A knowledge source's documents (file name → SHA-256), one sentence each: "knowledge source Help centre:
    document 'faq.md' replaced"."""
    changes = []
    for name in _keys(before, after):
        if before.get(name) == after.get(name):
            continue
        kind = ADDED if name not in before else REMOVED if name not in after else CHANGED
        said = {ADDED: "added", REMOVED: "removed", CHANGED: "replaced"}[kind]
        text = f"{where}: document {_shown(name)} {said}"
        changes.append(Change(kind, where, name, before.get(name), after.get(name), text))
    return changes


def _fields_diff(where: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Change]:
    changes = []
    for field in _keys(before, after):
        if before.get(field) != after.get(field):
            changes.extend(_field_diff(where, field, before.get(field), after.get(field)))
    return changes


def _field_diff(where: str, field: str, before: Any, after: Any) -> list[Change]:
    if field.endswith(ADDRESS_SUFFIXES):
        before, after = (endpoint_mask(value) if isinstance(value, str) else value for value in (before, after))
    if field == "enabled" and isinstance(before, bool) and isinstance(after, bool):
        return [Change(CHANGED, where, field, before, after, f"{where} {'enabled' if after else 'disabled'}")]
    if field == "keyword_exclusions" and isinstance(before, Mapping) and isinstance(after, Mapping):
        return _exclusions_diff(where, before, after)
    if field == "keyword_languages" and isinstance(before, Mapping) and isinstance(after, Mapping):
        return _keyword_languages_diff(where, before, after)
    if field == "keyword_exclusion_languages" and isinstance(before, Mapping) and isinstance(after, Mapping):
        return _exclusion_languages_diff(where, before, after)
    if field == "translations" and isinstance(before, Mapping | None) and isinstance(after, Mapping | None):
        return _translations_diff(where, before or {}, after or {})
    if field == "examples_reliability":  # a table only calibration writes: the change says so, not every row
        return [Change(CHANGED, where, field, before, after, "the examples tier's reliability table was recalibrated")]
    if isinstance(before, Mapping) and isinstance(after, Mapping):  # settings within settings (guardrails)
        return _fields_diff(f"{where}, {_words(field)}", before, after)
    items = (before or []) + (after or []) if _is_list(before) and _is_list(after) else None
    if items is not None and all(not isinstance(item, Mapping | list) for item in items):
        return _list_diff(where, field, before or [], after or [])
    if field in LONG_TEXTS and isinstance(before, str | None) and isinstance(after, str | None):
        detail = "".join(
            difflib.unified_diff(
                (before or "").splitlines(keepends=True),
                (after or "").splitlines(keepends=True),
                fromfile="before",
                tofile="after",
            )
        )
        return [Change(CHANGED, where, field, before, after, f"{where}: {_words(field)} changed", detail)]
    return [
        Change(CHANGED, where, field, before, after, f"{where}: {_words(field)} {_shown(before)} → {_shown(after)}")
    ]


def _exclusions_diff(where: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Change]:
    """An intent's keyword exclusions, one sentence per phrase: "keyword 'conta' of billing: not in 'me conta'
    added"."""
    owner = where.removeprefix("intent ")
    changes = []
    for keyword in _keys(before, after):
        old, new = list(before.get(keyword) or ()), list(after.get(keyword) or ())
        said = f"keyword {_shown(keyword)} of {owner}: not in"
        changes += [
            Change(ADDED, where, "keyword_exclusions", None, phrase, f"{said} {_shown(phrase)} added")
            for phrase in new
            if phrase not in old
        ]
        changes += [
            Change(REMOVED, where, "keyword_exclusions", phrase, None, f"{said} {_shown(phrase)} removed")
            for phrase in old
            if phrase not in new
        ]
    return changes


def _keyword_languages_diff(where: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Change]:
    """An intent's keywords limited to languages, one sentence per keyword whose limit changed: "keyword 'pedido' of
    orders: limited to pt (before: every language)"."""
    owner = where.removeprefix("intent ")
    changes = []
    for keyword in _keys(before, after):
        old, new = list(before.get(keyword) or ()), list(after.get(keyword) or ())
        if old != new:
            said = f"keyword {_shown(keyword)} of {owner}: {_languages_said(new)} (before: {_languages_said(old)})"
            changes.append(Change(CHANGED, where, "keyword_languages", old or None, new or None, said))
    return changes


def _exclusion_languages_diff(where: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Change]:
    """An intent's keyword exclusions limited to languages, one sentence per exclusion whose limit changed: "keyword
    'conta' of billing: not in 'me conta' limited to pt (before: every language)"."""
    owner = where.removeprefix("intent ")
    changes = []
    for keyword in _keys(before, after):
        old_limits, new_limits = before.get(keyword) or {}, after.get(keyword) or {}
        for phrase in _keys(old_limits, new_limits):
            old, new = list(old_limits.get(phrase) or ()), list(new_limits.get(phrase) or ())
            if old != new:
                said = (
                    f"keyword {_shown(keyword)} of {owner}: not in {_shown(phrase)} {_languages_said(new)} "
                    f"(before: {_languages_said(old)})"
                )
                changes.append(Change(CHANGED, where, "keyword_exclusion_languages", old or None, new or None, said))
    return changes


def _translations_diff(where: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Change]:
    """A row's texts in other languages, one sentence per text that changed: "specialist billing_agent: display name
    in en (none) → 'Billing'"."""
    changes = []
    for language in _keys(before, after):
        old_texts, new_texts = before.get(language) or {}, after.get(language) or {}
        for field in _keys(old_texts, new_texts):
            old, new = old_texts.get(field), new_texts.get(field)
            if old != new:
                said = f"{where}: {_words(field)} in {language} {_shown(old)} → {_shown(new)}"
                changes.append(Change(CHANGED, where, f"translations.{language}.{field}", old, new, said))
    return changes


def _languages_said(languages: list[str]) -> str:
    return f"limited to {', '.join(languages)}" if languages else "every language"


def _is_list(value: Any) -> bool:
    return value is None or isinstance(value, list)


def _list_diff(where: str, field: str, before: list[Any], after: list[Any]) -> list[Change]:
    item = _name(field)
    changes = [
        Change(ADDED, where, field, None, value, f"{item} {_shown(value)} added to {where}")
        for value in after
        if value not in before
    ]
    changes += [
        Change(REMOVED, where, field, value, None, f"{item} {_shown(value)} removed from {where}")
        for value in before
        if value not in after
    ]
    if not changes and before != after:  # the same items in another order (a priority list)
        changes.append(Change(CHANGED, where, field, before, after, f"{where}: {_words(field)} reordered"))
    return changes
