"""The release gate on answers: a profile's enabled saved conversation tests played against the version about to be
published (:func:`conversation_tests_gate`), beside its saved routing tests (:func:`release_gate`, what every publish
path calls).

* A failing **required** test refuses the publish (:class:`ConversationTestsFailed`, 409), naming each failed test and
  its first failed check ("conversation test 'fatura', turn 2 of 2 (“obrigado”): answer_language: expected 'en', got
  'pt'") — unless a user with ``routing.publish_failing_version`` gives a written reason, as for routing tests; a
  reason from anyone else is refused (``PublishForbidden``, 403).
* A failing test that is not required never refuses: it is kept with the version as a warning
  (``test_summary["conversation_tests"]["warnings"]``) and the publish page and command say it.
* A rollout stage is held while a required test fails against the plan's candidate (:func:`stage_tests_failures`,
  which :mod:`releases.rollout.guard` asks before it advances a stage).

Cost: the suite is played in full at each publish (and at a stage's advance), :data:`releases.evals.run.CONCURRENCY`
tests at once on PostgreSQL; docs/benchmarks.md has the figures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import status

from common.errors import DomainError
from releases.evals.files import conversation_tests_saved
from releases.evals.run import CaseResult, SuiteRun, conversation_tests_run
from releases.routing_tests import GateOutcome, forced_reason_checked, routing_tests_gate
from routing.public import ProfileSpec, backends_load, profile_compile

SUMMARY_KEY = "conversation_tests"  # where a version's test_summary keeps this gate's run
SHOWN = 5  # failures named in a refusal


class ConversationTestsFailed(DomainError):
    status_code = status.HTTP_409_CONFLICT
    code = "conversation_tests_failed"


def gate_line(result: CaseResult) -> str:
    """A failed test in a sentence: ``conversation test 'X', turn 2 of 3 (“…”): answer_language: expected …``."""
    rate = f" (passed {result.pass_rate:.0%} of {len(result.attempts)} runs)" if len(result.attempts) > 1 else ""
    first = result.failure_lines()[:1] or ["failed"]
    return f"conversation test {result.case.name!r}{rate}, {first[0]}"


def gate_summary(run: SuiteRun) -> dict[str, Any]:
    """What a version keeps of a gate's run: the counts, the required tests' failures (``failures``) and the others'
    (``warnings``), each named by :func:`gate_line`."""
    required = run.required_failures
    return {
        "total": run.total,
        "passed": run.passed,
        "failed": run.failed,
        "required_failed": len(required),
        "failures": [gate_line(result) for result in required[:SHOWN]],
        "warnings": [gate_line(result) for result in run.failures if not result.case.required][:SHOWN],
    }


def version_spec(profile: Any, document: Mapping[str, Any]) -> ProfileSpec:
    """``document`` compiled as the profile's version under test (its saved model backends)."""
    backends = backends_load([profile.pk]).get(profile.pk, {})
    return profile_compile(document, pk=profile.pk, backends=backends)


def conversation_tests_gate(
    *, profile: Any, document: Mapping[str, Any], user: Any = None, forced_reason: str = "", enforce: bool = True
) -> GateOutcome:
    """Play the profile's enabled saved conversation tests against ``document`` (the one about to be published).

    A failing required test refuses it (:class:`ConversationTestsFailed`) unless ``forced_reason`` is given by a user
    with ``routing.publish_failing_version`` (anyone else's reason: ``PublishForbidden``); without ``enforce`` (a
    revert, a review page) the run is only recorded. The summary (:func:`gate_summary`; ``{}``: no tests) says
    ``forced`` when a reason let failures through. Runs outside any transaction of the caller's: the turns may call
    models."""
    reason = forced_reason_checked(user=user, forced_reason=forced_reason, tests="conversation tests")
    cases = conversation_tests_saved(profile)
    if not cases:
        return GateOutcome(summary={})
    run = conversation_tests_run(version_spec(profile, document), cases)
    summary = gate_summary(run)
    if not run.required_failures:
        return GateOutcome(summary=summary)
    if reason or not enforce:
        return GateOutcome(summary={**summary, "forced": bool(reason)}, forced_reason=reason)
    failed = len(run.required_failures)
    required = sum(case.required for case in cases)
    raise ConversationTestsFailed(
        f"{failed} of {required} required conversation tests of {profile.agent_id} fail: "
        + "; ".join(summary["failures"])
        + (" …" if failed > len(summary["failures"]) else "")
        + ". Fix the draft, or publish anyway with a written reason (it takes the permission to publish failing "
        "versions).",
        fields={"conversation_tests": summary["failures"]},
    )


def release_gate(
    *, profile: Any, document: Mapping[str, Any], user: Any = None, forced_reason: str = "", enforce: bool = True
) -> GateOutcome:
    """Both gates, routing tests first (they decide without the database, in a moment): the routing tests' summary
    with the conversation tests' under :data:`SUMMARY_KEY`, and the reason kept when either let failures through.
    Raises what either raises (:func:`releases.routing_tests.routing_tests_gate`, :func:`conversation_tests_gate`)."""
    routed = routing_tests_gate(
        profile=profile, document=document, user=user, forced_reason=forced_reason, enforce=enforce
    )
    answered = conversation_tests_gate(
        profile=profile, document=document, user=user, forced_reason=forced_reason, enforce=enforce
    )
    summary = dict(routed.summary)
    if answered.summary:
        summary[SUMMARY_KEY] = answered.summary
    return GateOutcome(summary=summary, forced_reason=routed.forced_reason or answered.forced_reason)


def gate_warnings(summary: Mapping[str, Any]) -> list[str]:
    """The failing tests that are not required, of a version's ``test_summary``: said, never refused."""
    return list((summary.get(SUMMARY_KEY) or {}).get("warnings") or ())


def stage_tests_failures(profile: Any, candidate: Any) -> list[str]:
    """The required conversation tests that fail against a rollout plan's candidate version, each by
    :func:`gate_line` (``[]``: none fails, or the candidate was published with a reason past failing tests — that
    reason covers its rollout; a person may still advance a held stage by hand)."""
    if candidate.forced_reason:
        return []
    cases = [case for case in conversation_tests_saved(profile) if case.required]
    if not cases:
        return []
    run = conversation_tests_run(version_spec(profile, candidate.document), cases)
    return [gate_line(result) for result in run.required_failures]
