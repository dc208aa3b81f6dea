"""Rollout plans (W2 5/8): what a plan may say, and which version serves a conversation while one runs.

A plan rolls a profile's published routing version (the *candidate*) out against the version live when it
started (the *control*) in stages — shares of new conversations, e.g. 5 → 25 → 50 → 100 % — or moves the
``multi_agent`` flag's percentage the same way. This module is configuration: it checks a plan
(:func:`plan_errors`) and, from the compiled snapshot, says which version serves a conversation
(:class:`VersionRollout`), with no query. The decisions (advance, hold, roll back) are the engine's, from the
stored turns: :mod:`conversations.rollout_guard`.

**Sticky cohorts.** A conversation gets the candidate when its bucket — Unleash's ``normalized`` hash of the
conversation key under the group ``rollout-<plan id>`` (:func:`routing.rollout.bucket`), the same as the flags —
is within the percentage of the stage *that was running when the conversation started*. Later stages never move
a conversation: the percentage it is judged by is fixed by its start. A rollback takes the candidate away from
every conversation on its next message (safety before stickiness); a completion releases the candidate to all.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from routing.rollout import rollout_includes

if TYPE_CHECKING:
    from routing.snapshot import ProfileSpec


@dataclass(frozen=True)
class GuardMetric:
    name: str
    label: str
    kind: str  # rate (compared with Fisher's exact test), mean (Welch's t-test), latency (p95 rule)
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
    )
}

# Relative thresholds: how much worse than the control the candidate may be (0.25: 25 % worse).
DEFAULT_GUARDS: tuple[Mapping[str, Any], ...] = (
    {"metric": "fallback_rate", "threshold": 0.25},
    {"metric": "loop_stop_rate", "threshold": 0.5},
    {"metric": "tool_error_rate", "threshold": 0.5},
    {"metric": "handoff_rate", "threshold": 0.5},
    {"metric": "negative_feedback_rate", "threshold": 0.5},
    {"metric": "judge_score", "threshold": 0.1},
    {"metric": "p95_latency_ms", "threshold": 0.3},
)


def plan_errors(
    *, target: str, stages: Any, guards: Any, profile: Any = None, candidate: Any = None
) -> dict[str, list[str]]:
    """What is wrong with a plan's settings, by field (``{}``: nothing)."""
    errors: dict[str, list[str]] = {}
    if (
        not isinstance(stages, list)
        or not stages
        or not all(isinstance(item, int) and not isinstance(item, bool) and 0 < item <= 100 for item in stages)
    ):
        errors["stages"] = ["A list of percentages between 1 and 100, e.g. [5, 25, 50, 100]."]
    elif stages != sorted(set(stages)) or stages[-1] != 100:
        errors["stages"] = ["The percentages must rise and end at 100."]
    guard_errors = []
    if not isinstance(guards, list):
        guard_errors.append('A list of {"metric": …, "threshold": …}.')
    else:
        for index, guard in enumerate(guards):
            metric = guard.get("metric") if isinstance(guard, dict) else None
            threshold = guard.get("threshold") if isinstance(guard, dict) else None
            if metric not in GUARD_METRICS:
                guard_errors.append(f"Guard {index + 1}: metric must be one of {', '.join(GUARD_METRICS)}.")
            elif not isinstance(threshold, int | float) or isinstance(threshold, bool) or not 0 <= threshold <= 10:
                guard_errors.append(f"Guard {index + 1} ({metric}): threshold must be a number from 0 to 10.")
    if guard_errors:
        errors["guards"] = guard_errors
    if target == "version":
        if profile is None:
            errors["profile"] = ["A version is rolled out for a profile."]
        if candidate is None:
            errors["candidate"] = ["Name the version to roll out."]
        elif profile is not None and candidate.profile_id != profile.pk:
            errors["candidate"] = [f"Version {candidate.number} is not a version of {profile.agent_id}."]
    elif candidate is not None:
        errors["candidate"] = ["The multi_agent flag's plan rolls no version out."]
    return errors


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
