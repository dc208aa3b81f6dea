"""Rollout plans (docs/rollouts.md): what a plan may say, and which version serves a conversation while one runs.

A plan rolls a profile's published routing version (the *candidate*) out against the version live when it
started (the *control*) in stages — shares of new conversations, e.g. 5 → 25 → 50 → 100 % — or moves the
``multi_agent`` flag's percentage the same way. This module is configuration: it checks a plan
(:func:`plan_errors`) and, from the compiled snapshot, says which version serves a conversation
(:class:`VersionRollout`), with no query, and whether a started plan is still what it started as
(:func:`plan_fingerprint`). The decisions (advance, hold, roll back) are the engine's, from the
stored turns: :mod:`releases.rollout.guard`.

**Sticky cohorts.** A conversation gets the candidate when its bucket — Unleash's ``normalized`` hash of the
conversation key under the group ``rollout-<plan id>`` (:func:`routing.rollout.bucket`), the same as the flags —
is within the percentage of the stage *that was running when the conversation started*. Later stages never move
a conversation: the percentage it is judged by is fixed by its start. A rollback takes the candidate away from
every conversation on its next message (safety before stickiness); a completion releases the candidate to all.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from common.fingerprint import document_fingerprint
from routing.rollout import rollout_includes
from routing.specs import ProfileSpec


@dataclass(frozen=True)
class GuardMetric:
    name: str
    label: str
    kind: str  # rate (compared with Fisher's exact test), mean (Welch's t-test), latency (p95, binomial test)
    worse: str  # "higher" or "lower"
    description: str


GUARD_METRICS: dict[str, GuardMetric] = {
    metric.name: metric
    for metric in (
        GuardMetric(
            "fallback_rate", "Fallback rate", "rate", "higher", "Share of turns the router sent to the fallback."
        ),
        GuardMetric(
            "loop_stop_rate",
            "Loop-stop rate",
            "rate",
            "higher",
            "Share of turns whose moves loop safety stopped (ping-pong, repeated path, handoff or step limit).",
        ),
        GuardMetric(
            "tool_error_rate",
            "Tool error rate",
            "rate",
            "higher",
            "Share of tool calls that failed (error, timeout, server unavailable); permission asks are not errors.",
        ),
        GuardMetric("handoff_rate", "Handoff rate", "rate", "higher", "Share of turns with a handoff."),
        GuardMetric(
            "negative_feedback_rate",
            "Negative-feedback rate",
            "rate",
            "higher",
            "Share of rated answers rated down.",
        ),
        GuardMetric("judge_score", "Judge score", "mean", "lower", "The rule-based judge's mean score of answers."),
        GuardMetric(
            "p95_latency_ms", "p95 latency", "latency", "higher", "The 95th percentile of the turn's time (ms)."
        ),
        GuardMetric(
            "escalation_rate",
            "Escalation rate",
            "rate",
            "higher",
            "Share of the cohort's conversations handed to a person (a completed human handoff).",
        ),
        GuardMetric(
            "abandonment_rate",
            "Abandonment rate",
            "rate",
            "higher",
            "Share of the cohort's decided conversations abandoned: no customer message for the profile's timeout.",
        ),
    )
}

# Relative limits: how much worse than the control the candidate may be (0.25: 25 % worse). A guard may also hold an
# absolute limit ("absolute"): a rate or a judge score as a fraction, a latency in ms, whatever the control does.
DEFAULT_GUARDS: tuple[Mapping[str, Any], ...] = (
    {"metric": "fallback_rate", "threshold": 0.25},
    {"metric": "loop_stop_rate", "threshold": 0.5},
    {"metric": "tool_error_rate", "threshold": 0.5},
    {"metric": "handoff_rate", "threshold": 0.5},
    {"metric": "negative_feedback_rate", "threshold": 0.5},
    {"metric": "judge_score", "threshold": 0.1},
    {"metric": "p95_latency_ms", "threshold": 0.3},
    {"metric": "escalation_rate", "threshold": 0.5},
    {"metric": "abandonment_rate", "threshold": 0.5},
)
RELATIVE_MAX = 10  # a relative limit of 10 is "ten times worse": anything looser guards nothing
LATENCY_MAX_MS = 600_000

ERROR_STAGES_NUMBERS = "Stages: each stage is a whole percentage from 1 to 100, e.g. 10, 50, 100."
ERROR_STAGES_RISING = "Stages: each percentage must be higher than the one before it, e.g. 10, 50, 100."
ERROR_STAGES_LAST = "Stages: the last stage must be 100 % (every new conversation)."


def default_rollout_stages() -> list[int]:
    """A new plan's stages (a model field's default: old migrations name it here)."""
    return [5, 25, 50, 100]


def default_rollout_guards() -> list[dict[str, object]]:
    """A new plan's guards, a copy of :data:`DEFAULT_GUARDS` (a model field's default: old migrations name it here)."""
    return [dict(guard) for guard in DEFAULT_GUARDS]


def stages_errors(stages: Any) -> list[str]:
    """What is wrong with a plan's stages (``[]``: nothing): whole percentages from 1 to 100, rising, ending at 100."""
    if (
        not isinstance(stages, list)
        or not stages
        or not all(isinstance(item, int) and not isinstance(item, bool) and 0 < item <= 100 for item in stages)
    ):
        return [ERROR_STAGES_NUMBERS]
    if any(later <= earlier for earlier, later in itertools.pairwise(stages)):
        return [ERROR_STAGES_RISING]
    if stages[-1] != 100:
        return [ERROR_STAGES_LAST]
    return []


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def absolute_range(metric: GuardMetric) -> tuple[float, float]:
    """The values an absolute limit of ``metric`` may take: a fraction (rates, scores), or milliseconds (latency)."""
    return (0.0, float(LATENCY_MAX_MS)) if metric.kind == "latency" else (0.0, 1.0)


def guard_errors(guards: Any) -> list[str]:
    """What is wrong with a plan's guards (``[]``: nothing), each message naming the guard: a known metric, guarded
    once, with a relative limit (``threshold``, 0 to 10), an absolute limit (``absolute``), or both."""
    if not isinstance(guards, list):
        return ['Guards: a list of {"metric": …, "threshold": …, "absolute": …}.']
    errors: list[str] = []
    seen: set[str] = set()
    for index, guard in enumerate(guards):
        metric_name = guard.get("metric") if isinstance(guard, dict) else None
        if metric_name not in GUARD_METRICS:
            errors.append(f"Guard {index + 1}: metric must be one of {', '.join(GUARD_METRICS)}.")
            continue
        metric = GUARD_METRICS[metric_name]
        said = f"Guard {index + 1} ({metric.label})"
        if metric_name in seen:
            errors.append(f"{said}: this metric is guarded already; give it one row.")
        seen.add(metric_name)
        unknown = sorted(set(guard) - {"metric", "threshold", "absolute"})
        if unknown:
            errors.append(f"{said}: unknown key {unknown[0]!r} (allowed: metric, threshold, absolute).")
        threshold, absolute = guard.get("threshold"), guard.get("absolute")
        if threshold is None and absolute is None:
            errors.append(f"{said}: give a relative limit, an absolute limit or both.")
        if threshold is not None and (not _number(threshold) or not 0 <= threshold <= RELATIVE_MAX):
            errors.append(f"{said}: threshold must be a number from 0 to {RELATIVE_MAX}.")
        low, high = absolute_range(metric)
        if absolute is not None and (not _number(absolute) or not low <= absolute <= high):
            unit = " ms" if metric.kind == "latency" else ""
            errors.append(f"{said}: absolute must be a number from {low:g} to {high:g}{unit}.")
    return errors


def plan_errors(
    *, target: str, stages: Any, guards: Any, profile: Any = None, candidate: Any = None
) -> dict[str, list[str]]:
    """What is wrong with a plan's settings, by field (``{}``: nothing); each message names its field."""
    errors: dict[str, list[str]] = {}
    if found := stages_errors(stages):
        errors["stages"] = found
    if found := guard_errors(guards):
        errors["guards"] = found
    if target == "version":
        if profile is None:
            errors["profile"] = ["Profile: a version is rolled out for a profile."]
        if candidate is None:
            errors["candidate"] = ["Candidate: name the version to roll out."]
        elif profile is not None and candidate.profile_id != profile.pk:
            errors["candidate"] = [f"Candidate: version {candidate.number} is not a version of {profile.agent_id}."]
    elif candidate is not None:
        errors["candidate"] = ["Candidate: the multi_agent flag's plan rolls no version out."]
    return errors


# A plan's settings: with its candidate, what a second person approves and what its start fixes (plan_fingerprint).
PLAN_SETTINGS = ("stages", "hold_minutes", "min_conversations", "guards", "max_errors", "alpha")


def plan_fingerprint(plan: Any) -> str:
    """What an approver of a rollout reviews, and what a started plan must stay (its ``started_as``): its candidate and
    its settings (:data:`PLAN_SETTINGS`). ``plan`` is a :class:`~releases.models.RolloutPlan`, or a mapping of the same
    fields (``candidate_id`` and the settings) as the snapshot reads them."""
    read = plan.get if isinstance(plan, Mapping) else partial(getattr, plan)
    return document_fingerprint({"candidate": read("candidate_id"), **{name: read(name) for name in PLAN_SETTINGS}})


def rollout_group(plan_id: int) -> str:
    """The bucket group of a plan's conversations (as a flag's key is for a flag)."""
    return f"rollout-{plan_id}"


@dataclass(frozen=True)
class VersionRollout:
    """A running (or paused) version plan, as the message path needs it: no query."""

    plan_id: int
    agent_id: str
    candidate: ProfileSpec
    control_version: int | None
    history: tuple[tuple[dt.datetime, int], ...]  # (stage started at, percentage), in order

    def percentage_at(self, when: dt.datetime | None) -> int:
        """The candidate's share of new conversations at ``when`` (``None``: now, the running stage)."""
        share = 0
        for started, percentage in self.history:
            if when is not None and started > when:
                break
            share = percentage
        return share

    def serves_candidate(self, conversation_key: str, started_at: dt.datetime | None) -> bool:
        """Whether the conversation (which started at ``started_at``; ``None``: starts now) gets the candidate."""
        return rollout_includes(self.percentage_at(started_at), rollout_group(self.plan_id), conversation_key)


def history_parse(history: Sequence[Any]) -> tuple[tuple[dt.datetime, int], ...]:
    """A plan's stored ``history`` (``[[iso time, percentage], …]``) as datetimes, in order."""
    return tuple(sorted((dt.datetime.fromisoformat(str(at)), int(percentage)) for at, percentage in history))


PLAN_VIEW_PERMISSION = "releases.view_rolloutplan"
ANALYTICS_PERMISSION = "analytics.view_analytics"


def may_view_plans(user: Any) -> bool:
    """Who reads rollout plans and their live view (``/analytics/rollouts/``): staff who may view plans in the admin
    (the "Routing editors", the "Release approvers") or read the analytics. A plan is configuration across tenants:
    its view shows counts and rates per cohort, never a conversation."""
    return bool(
        getattr(user, "is_staff", False)
        and getattr(user, "is_active", False)
        and (user.has_perm(PLAN_VIEW_PERMISSION) or user.has_perm(ANALYTICS_PERMISSION))
    )
