"""Rollout plans' guard (W2 5/8): from the stored turns, advance, hold or roll back each running plan.

Every minute (Celery beat's ``conversations.rollout_evaluate``; without a broker, the embedded server's timer) each
running plan (:class:`routing.models.RolloutPlan`) is evaluated on the turns of its running stage:

* **Cohorts.** A version plan's candidate cohort is the turns its candidate version served
  (``routing_version``), its control cohort the turns the control version served, both of the plan's profile;
  a ``multi_agent`` plan's are the turns of cohort ``multi_agent`` and ``single_agent``.
* **Figures** per cohort: conversations and turns; fallback, loop-stop, handoff and tool-error rates; the
  negative-feedback rate of rated answers; the judge's mean score; the p95 latency; errors (failed specialist
  parts and tool errors). At the last stage (100 %) new conversations have no control: the control's figures
  are those of the whole plan.
* **No decisions on noise.** Below ``min_conversations`` in either cohort nothing moves — except the absolute
  error guard, which rolls back as soon as the candidate's errors pass ``max_errors``. A rate guard is breached
  when the candidate is worse than the control by more than its threshold (relative: 0.25 = 25 % worse, plus
  half a percentage point so that a control near zero does not make every difference relative infinity) *and*
  Fisher's exact test says the candidate's rate is higher with p < ``alpha`` (one-sided, ``scipy.stats``); the
  judge score likewise with Welch's t-test; latency by the rule p95(candidate) > p95(control) × (1 + threshold)
  + 50 ms, no test (percentiles have none that is cheap; the minimum sample and the 50 ms are its guards).
* **Decisions.** A breach rolls back at once; with every guard clear, the stage advances once it ran
  ``hold_minutes`` and both cohorts reached the minimum; after the last stage the plan completes and the
  candidate is released to every customer (:func:`routing.versions.version_release`). Otherwise it holds. Each
  decision is a :class:`~routing.models.RolloutDecision` with the figures that drove it; those that move the
  plan are posted to its webhook, signed (``X-Rollout-Signature: sha256=<HMAC of the body>``); a rollback is also
  published as the operational event ``rollout.rolled_back`` (:mod:`common.bus`).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import (
    Aggregate,
    Avg,
    Count,
    Exists,
    FloatField,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    StdDev,
    Value,
)
from django.utils import timezone

from common.bus import hmac_signature, publish_event
from common.config_version import config_version_bump
from conversations.models import (
    PART_FAILED,
    FeedbackRating,
    Message,
    MessageFeedback,
    MessageRole,
    RouteDecisionRecord,
    ToolCall,
    ToolCallStatus,
)
from handoffs.models import Handoff, HandoffKind, HandoffStatus
from routing.models import (
    RolloutDecision,
    RolloutDecisionAction,
    RolloutPlan,
    RolloutPlanStatus,
    RolloutPlanTarget,
    RoutingVersion,
)
from routing.rollout import COHORT_MULTI_AGENT, COHORT_SINGLE_AGENT
from routing.rollout_plans import GUARD_METRICS

logger = logging.getLogger(__name__)

CANDIDATE, CONTROL = "candidate", "control"
RATE_FLOOR = 0.005  # added to a rate guard's allowance: half a percentage point
LATENCY_FLOOR_MS = 50.0  # added to the p95 allowance: a few milliseconds of a busy machine are not a regression
TOOL_ERRORS = (ToolCallStatus.ERROR, ToolCallStatus.TIMEOUT, ToolCallStatus.UNAVAILABLE)
TOOL_COUNTED = (*TOOL_ERRORS, ToolCallStatus.OK, ToolCallStatus.INVALID)  # not permission asks, not unoffered tools


class RolloutStateError(Exception):
    """A command that does not fit the plan's status (e.g. resuming a plan that is not paused)."""


# -- figures ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CohortWindow:
    """One cohort of a plan over ``[since, until)``: the rows whose figures :func:`cohorts_figures` reads."""

    plan: RolloutPlan
    cohort: str
    since: dt.datetime
    until: dt.datetime

    def rows(self, time_field: str = "created_at") -> Q:
        """The window's rows of any table carrying ``profile``, ``routing_version``, ``cohort`` and a time column:
        a version plan's cohort is its profile's turns of the cohort's version, a multi_agent plan's the turns of
        the cohort's mode (of its profile, if it has one)."""
        plan = self.plan
        if plan.target == RolloutPlanTarget.VERSION:
            version = plan.candidate if self.cohort == CANDIDATE else plan.control
            selected = Q(routing_version=version.number if version else -1)
        else:
            selected = Q(cohort=COHORT_MULTI_AGENT if self.cohort == CANDIDATE else COHORT_SINGLE_AGENT)
        if plan.profile_id:
            selected &= Q(profile_id=plan.profile_id)
        return selected & Q(**{f"{time_field}__gte": self.since, f"{time_field}__lt": self.until})


class _Percentile95(Aggregate):
    """PostgreSQL's ``percentile_cont(0.95) WITHIN GROUP (ORDER BY …)``."""

    function = "percentile_cont"
    template = "%(function)s(0.95) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


def _p95_python(answers: QuerySet[Any]) -> float | None:
    """The 95th percentile of the answers' ``latency_ms``, sorted in Python (databases without percentile_cont)."""
    ordered = sorted(answers.exclude(latency_ms=None).values_list("latency_ms", flat=True))
    return float(ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]) if ordered else None


def _each(
    queryset: QuerySet[Any], windows: list[CohortWindow], time_field: str, **measures: Any
) -> list[dict[str, Any]]:
    """``measures`` of each window over ``queryset``, in one query: one aggregate per window (each an index range
    of its own, index-only where the indexes cover the measures), joined by ``UNION ALL`` — so a row in two
    windows (a version's turn is also some mode's) counts in both."""
    parts = [
        queryset.filter(window.rows(time_field)).annotate(window=Value(index, IntegerField())).values("window")
        for index, window in enumerate(windows)
    ]
    aggregated = [part.annotate(**measures).order_by() for part in parts]
    rows = aggregated[0].union(*aggregated[1:], all=True) if len(aggregated) > 1 else aggregated[0]
    found = {row.pop("window"): row for row in rows}
    return [found.get(index, {}) for index in range(len(windows))]


def cohorts_figures(windows: list[CohortWindow]) -> list[dict[str, Any]]:
    """Every guard metric of each window — what the guard reads for every running plan at each tick, and what the
    dashboard's rollout view reads for every slice of time: six queries, whatever the number of windows."""
    asked, answered = Q(role=MessageRole.USER), Q(role=MessageRole.ASSISTANT)
    postgres = connection.vendor == "postgresql"
    measures: dict[str, Any] = {
        "turns": Count("role", filter=asked),  # a column of the covering index: no table row read
        "conversations": Count("conversation_id", filter=asked, distinct=True),
        "judged": Count("judge_score", filter=answered),
        "judge_mean": Avg("judge_score", filter=answered),
        "judge_sd": StdDev("judge_score", filter=answered),
    }
    if postgres:
        measures["p95"] = _Percentile95("latency_ms", filter=answered & Q(latency_ms__isnull=False))
    messages = _each(Message.objects.all(), windows, "created_at", **measures)
    # Failed specialist parts are few: read apart through their own partial index, so the turns' query above reads
    # no message's metadata.
    failed = _each(Message.objects.filter(PART_FAILED), windows, "created_at", n=Count("id"))
    routed = _each(
        RouteDecisionRecord.objects.all(),
        windows,
        "created_at",
        n=Count("method"),  # columns of the covering indexes (*_version_time): no table row read
        fallback=Count("method", filter=Q(method="fallback")),
    )
    moved = _each(
        Handoff.objects.all(),
        windows,
        "created_at",
        stops=Count("conversation_id", filter=Q(status=HandoffStatus.STOPPED)),
        handoffs=Count("kind", filter=Q(kind=HandoffKind.HANDOFF, status=HandoffStatus.COMPLETED)),
    )
    called = _each(
        ToolCall.objects.filter(status__in=TOOL_COUNTED),
        windows,
        "created_at",
        n=Count("status"),
        errors=Count("status", filter=Q(status__in=TOOL_ERRORS)),
    )
    # Feedback counts by when its answer was given (conversations.feedback), from the feedback table alone.
    rated = _each(
        MessageFeedback.objects.all(),
        windows,
        "answered_at",
        n=Count("pk"),
        down=Count("pk", filter=Q(rating=FeedbackRating.DOWN)),
    )
    figures = []
    for index, window in enumerate(windows):
        asked_rows = messages[index]
        turns = asked_rows.get("turns", 0)
        p95 = asked_rows.get("p95") if postgres else _p95_python(Message.objects.filter(window.rows(), answered))
        decided = routed[index] or {"n": 0, "fallback": 0}
        stopped = moved[index] or {"stops": 0, "handoffs": 0}
        tools = called[index] or {"n": 0, "errors": 0}
        ratings = rated[index] or {"n": 0, "down": 0}
        figures.append(
            {
                "conversations": asked_rows.get("conversations", 0),
                "turns": turns,
                "fallback_rate": _rate(decided["fallback"], decided["n"]),
                "loop_stop_rate": _rate(stopped["stops"], turns),
                "handoff_rate": _rate(stopped["handoffs"], turns),
                "tool_error_rate": _rate(tools["errors"], tools["n"]),
                "negative_feedback_rate": _rate(ratings["down"], ratings["n"]),
                "judge_score": {
                    "n": asked_rows.get("judged", 0),
                    "mean": asked_rows.get("judge_mean"),
                    "sd": asked_rows.get("judge_sd"),
                },
                "p95_latency_ms": p95,
                "errors": failed[index].get("n", 0) + tools["errors"],
            }
        )
    return figures


def _rate(hits: int, total: int) -> dict[str, Any]:
    return {"x": hits, "n": total, "rate": hits / total if total else None}


# -- verdicts ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    metric: str
    breached: bool
    reason: str
    p_value: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "breached": self.breached, "reason": self.reason, "p_value": self.p_value}


def guard_verdict(guard: dict[str, Any], candidate: dict[str, Any], control: dict[str, Any], alpha: float) -> Verdict:
    """Whether the candidate is worse than the control on ``guard`` beyond its threshold, and significantly."""
    from scipy import stats

    name, threshold = guard["metric"], float(guard["threshold"])
    metric = GUARD_METRICS[name]
    cand, ctrl = candidate[name], control[name]
    if metric.kind == "rate":
        if not cand["n"] or not ctrl["n"]:
            return Verdict(name, False, "no sample")
        allowed = ctrl["rate"] * (1 + threshold) + RATE_FLOOR
        if cand["rate"] <= allowed:
            return Verdict(name, False, f"{cand['rate']:.3f} within {allowed:.3f} (control {ctrl['rate']:.3f})")
        table = [[cand["x"], cand["n"] - cand["x"]], [ctrl["x"], ctrl["n"] - ctrl["x"]]]
        p_value = float(stats.fisher_exact(table, alternative="greater").pvalue)
        breached = p_value < alpha
        return Verdict(
            name,
            breached,
            f"{cand['rate']:.3f} against control {ctrl['rate']:.3f} (allowed {allowed:.3f}); Fisher p = {p_value:.2g}"
            + ("" if breached else f" ≥ alpha {alpha}: not significant yet"),
            p_value,
        )
    if metric.kind == "mean":
        if cand["n"] < 2 or ctrl["n"] < 2:
            return Verdict(name, False, "no sample")
        allowed = ctrl["mean"] * (1 - threshold)
        if cand["mean"] >= allowed:
            return Verdict(name, False, f"{cand['mean']:.3f} within {allowed:.3f} (control {ctrl['mean']:.3f})")
        p_value = float(
            stats.ttest_ind_from_stats(
                cand["mean"],
                cand["sd"] or 0.0,
                cand["n"],
                ctrl["mean"],
                ctrl["sd"] or 0.0,
                ctrl["n"],
                equal_var=False,
                alternative="less",
            ).pvalue
        )
        p_value = 0.0 if math.isnan(p_value) else p_value  # both without spread: the difference is certain
        breached = p_value < alpha
        return Verdict(
            name,
            breached,
            f"{cand['mean']:.3f} against control {ctrl['mean']:.3f} (allowed {allowed:.3f}); Welch p = {p_value:.2g}",
            p_value,
        )
    if cand is None or ctrl is None:
        return Verdict(name, False, "no sample")
    allowed = ctrl * (1 + threshold) + LATENCY_FLOOR_MS
    breached = cand > allowed
    return Verdict(name, breached, f"p95 {cand:.0f} ms against control {ctrl:.0f} ms (allowed {allowed:.0f} ms)")


# -- decisions ---------------------------------------------------------------------------------------------


def _record(
    plan: RolloutPlan, action: str, reason: str, actor: str, figures: dict[str, Any] | None = None
) -> RolloutDecision:
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


def _flag_follow(plan: RolloutPlan, percentage: int) -> None:
    """A multi_agent plan moves the flag's percentage with its stages."""
    from routing.models import RolloutFlag
    from routing.rollout import MULTI_AGENT_FLAG

    if plan.target == RolloutPlanTarget.MULTI_AGENT:
        flag, _ = RolloutFlag.objects.get_or_create(key=MULTI_AGENT_FLAG)
        flag.percentage = percentage
        flag.save(update_fields=["percentage", "updated_at"])


def plan_start(plan: RolloutPlan, *, actor: str, user: Any = None, now: dt.datetime | None = None) -> RolloutDecision:
    """Start a ready plan at its first stage; its control is the version live now."""
    from routing.versions import live_version

    now = now or timezone.now()
    with transaction.atomic():
        plan = RolloutPlan.objects.select_for_update().get(pk=plan.pk)
        if plan.status != RolloutPlanStatus.READY:
            raise RolloutStateError(f"Plan {plan} is {plan.get_status_display().lower()}: only a ready plan starts.")
        if plan.target == RolloutPlanTarget.VERSION:
            profile, _ = _version_parts(plan)
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
        if user is not None and getattr(user, "pk", None):
            plan.created_by = plan.created_by or user
        _stage_begin(plan, now)
        plan.save()
        _flag_follow(plan, plan.percentage)
        decision = _record(plan, RolloutDecisionAction.START, f"Started at {plan.percentage} %.", actor)
    return decision


def plan_command(plan: RolloutPlan, action: str, *, actor: str, now: dt.datetime | None = None) -> RolloutDecision:
    """pause | resume | advance | abort, by a person."""
    now = now or timezone.now()
    with transaction.atomic():
        plan = RolloutPlan.objects.select_for_update().get(pk=plan.pk)
        if action == RolloutDecisionAction.PAUSE:
            _expect(plan, RolloutPlanStatus.RUNNING, "pause")
            plan.status = RolloutPlanStatus.PAUSED
            reason = f"Paused at {plan.percentage} %: the stage holds; nothing advances or rolls back by itself."
        elif action == RolloutDecisionAction.RESUME:
            _expect(plan, RolloutPlanStatus.PAUSED, "resume")
            plan.status = RolloutPlanStatus.RUNNING
            reason = f"Resumed at {plan.percentage} %."
        elif action == RolloutDecisionAction.ADVANCE:
            _expect(plan, RolloutPlanStatus.RUNNING, "advance")
            return _advance(plan, now, actor, {}, "Advanced by hand")
        elif action == RolloutDecisionAction.ABORT:
            if plan.status not in (RolloutPlanStatus.RUNNING, RolloutPlanStatus.PAUSED, RolloutPlanStatus.READY):
                raise RolloutStateError(f"Plan {plan} is {plan.get_status_display().lower()} already.")
            plan.status, plan.finished_at = RolloutPlanStatus.ABORTED, now
            _flag_follow(plan, 0)
            reason = "Aborted by hand: every conversation is back on the control from its next message."
        else:
            raise RolloutStateError(f"Unknown command {action!r}.")
        plan.save()
        decision = _record(plan, action, reason, actor)
    _webhook_later(decision)
    return decision


def _version_parts(plan: RolloutPlan) -> tuple[Any, RoutingVersion]:
    """A version plan's profile and candidate (a plan saved without them cannot run)."""
    if plan.profile is None or plan.candidate is None:
        raise RolloutStateError(f"Plan {plan} names no profile or no candidate version.")
    return plan.profile, plan.candidate


def _expect(plan: RolloutPlan, status: str, command: str) -> None:
    if plan.status != status:
        raise RolloutStateError(f"Plan {plan} is {plan.get_status_display().lower()}: it cannot {command}.")


def _advance(plan: RolloutPlan, now: dt.datetime, actor: str, figures: dict[str, Any], why: str) -> RolloutDecision:
    """Next stage, or — after the last — complete: the candidate released to everyone."""
    from routing.versions import version_release

    if plan.stage + 1 < len(plan.stages):
        plan.stage += 1
        _stage_begin(plan, now)
        plan.save()
        _flag_follow(plan, plan.percentage)
        decision = _record(plan, RolloutDecisionAction.ADVANCE, f"{why}: now {plan.percentage} %.", actor, figures)
    else:
        plan.status, plan.finished_at = RolloutPlanStatus.COMPLETED, now
        plan.save()
        if plan.target == RolloutPlanTarget.VERSION:
            profile, candidate = _version_parts(plan)
            version_release(profile=profile, version=candidate)
            done = f"version {candidate.number} is live for every customer"
        else:
            _flag_follow(plan, 100)
            done = "the multi_agent flag is at 100 %"
        decision = _record(plan, RolloutDecisionAction.COMPLETE, f"{why}: completed, {done}.", actor, figures)
    _webhook_later(decision)
    return decision


def _windows(plan: RolloutPlan, now: dt.datetime) -> tuple[CohortWindow, CohortWindow]:
    """What a running plan is judged on: both cohorts' turns of its running stage — at the last stage (100 %) new
    conversations have no control, so the control's are those of the whole plan."""
    since = plan.stage_started_at or plan.started_at or now
    last = plan.stage == len(plan.stages) - 1
    until = now + dt.timedelta(seconds=1)  # the turn of this second too
    return (
        CohortWindow(plan, CANDIDATE, since, until),
        CohortWindow(plan, CONTROL, plan.started_at if last and plan.started_at else since, until),
    )


Prepared = dict[int, tuple[tuple[CohortWindow, CohortWindow], list[dict[str, Any]]]]


def plan_evaluate(
    plan: RolloutPlan, *, now: dt.datetime | None = None, actor: str = "beat", prepared: Prepared | None = None
) -> RolloutDecision:
    """One evaluation of a running plan: advance, hold or roll back, recorded with its figures. ``prepared``: the
    figures :func:`plans_evaluate` read for every plan at once, used when they are still the plan's windows."""
    from routing.versions import live_version

    now = now or timezone.now()
    with transaction.atomic():
        plan = (
            RolloutPlan.objects.select_for_update(of=("self",))
            .select_related("candidate", "control", "profile")
            .get(pk=plan.pk)
        )
        if plan.status != RolloutPlanStatus.RUNNING:
            raise RolloutStateError(
                f"Plan {plan} is {plan.get_status_display().lower()}: only a running plan is evaluated."
            )
        if plan.target == RolloutPlanTarget.VERSION:
            profile, _ = _version_parts(plan)
            live = live_version(profile)
            if live is None or live.pk != plan.control_id:
                plan.status, plan.finished_at = RolloutPlanStatus.ABORTED, now
                plan.save()
                decision = _record(
                    plan,
                    RolloutDecisionAction.ABORT,
                    f"The live version of {profile.agent_id} changed under the plan (now "
                    f"{live.number if live else 'none'}, control {plan.control.number if plan.control else '?'}): "
                    "aborted.",
                    actor,
                )
                _webhook_later(decision)
                return decision
        windows = _windows(plan, now)
        ready = (prepared or {}).get(plan.pk)
        both = ready[1] if ready and ready[0] == windows else cohorts_figures(list(windows))
        since = windows[0].since
        figures: dict[str, Any] = {CANDIDATE: both[0], CONTROL: both[1], "since": since.isoformat()}
        cand, ctrl = figures[CANDIDATE], figures[CONTROL]
        if cand["errors"] > plan.max_errors:
            return _rollback(plan, now, actor, figures, f"errors: {cand['errors']} > {plan.max_errors}")
        sampled = cand["conversations"] >= plan.min_conversations and ctrl["conversations"] >= plan.min_conversations
        verdicts = [guard_verdict(guard, cand, ctrl, plan.alpha) for guard in plan.guards] if sampled else []
        figures["verdicts"] = [verdict.as_dict() for verdict in verdicts]
        breached = [verdict for verdict in verdicts if verdict.breached]
        if breached:
            return _rollback(plan, now, actor, figures, "; ".join(f"{v.metric}: {v.reason}" for v in breached))
        held = now - since >= dt.timedelta(minutes=plan.hold_minutes)
        if sampled and held:
            return _advance(plan, now, actor, figures, "Every guard clear")
        missing = []
        if not sampled:
            missing.append(
                f"samples {cand['conversations']} (candidate) and {ctrl['conversations']} (control) of "
                f"{plan.min_conversations} conversations"
            )
        if not held:
            missing.append(f"held {int((now - since).total_seconds() // 60)} of {plan.hold_minutes} minutes")
        return _record(plan, RolloutDecisionAction.HOLD, "Holding: " + "; ".join(missing) + ".", actor, figures)


def _rollback(plan: RolloutPlan, now: dt.datetime, actor: str, figures: dict[str, Any], why: str) -> RolloutDecision:
    plan.status, plan.finished_at = RolloutPlanStatus.ROLLED_BACK, now
    plan.save()
    _flag_follow(plan, 0)
    config_version_bump()
    decision = _record(
        plan,
        RolloutDecisionAction.ROLLBACK,
        f"Rolled back at {plan.stages[plan.stage]} %: {why}. Every conversation is back on the control from its next "
        "message.",
        actor,
        figures,
    )
    _webhook_later(decision)
    rolled_back = {
        "plan": plan.pk,
        "name": plan.name,
        "target": plan.target,
        "stage": decision.stage,
        "percentage": decision.percentage,
        "candidate": plan.candidate.number if plan.candidate else None,
        "control": plan.control.number if plan.control else None,
        "reason": why,
        "actor": actor,
    }
    profile = plan.profile.agent_id if plan.profile else ""
    transaction.on_commit(lambda: publish_event("rollout.rolled_back", rolled_back, tenant="", profile=profile))
    return decision


def plans_evaluate(
    *, now: dt.datetime | None = None, actor: str = "beat", interval: float | None = None
) -> list[RolloutDecision]:
    """Evaluate every running plan (the beat task, or ``manage.py rollout watch``); a plan that fails to evaluate is
    logged and skipped. A plan evaluated less than half an interval ago is left alone, so two schedulers running
    at once (beat and a watch) do not double the decisions."""
    now = now or timezone.now()
    interval = float(interval if interval is not None else settings.ROLLOUT_EVALUATE_SECONDS)
    recent = now - dt.timedelta(seconds=interval / 2)
    decisions = []
    just_decided = RolloutDecision.objects.filter(plan=OuterRef("pk"), created_at__gt=recent)
    running = list(
        RolloutPlan.objects.filter(status=RolloutPlanStatus.RUNNING)
        .exclude(Exists(just_decided))
        .select_related("candidate", "control")
        .order_by("pk")
    )
    # Every plan's figures in a few grouped queries; each plan then checks, under its lock, that they are its own.
    windows = [_windows(plan, now) for plan in running]
    figures = cohorts_figures([window for pair in windows for window in pair]) if running else []
    prepared: Prepared = {
        plan.pk: (pair, figures[2 * index : 2 * index + 2])
        for index, (plan, pair) in enumerate(zip(running, windows, strict=True))
    }
    for plan in running:
        try:
            decisions.append(plan_evaluate(plan, now=now, actor=actor, prepared=prepared))
        except RolloutStateError:
            continue  # paused or finished since the list was read
        except Exception:
            logger.exception("rollout plan %s could not be evaluated", plan.pk)
    return decisions


# -- webhook -----------------------------------------------------------------------------------------------


def webhook_signature(body: bytes) -> str:
    """``sha256=<hex HMAC-SHA256 of the body>`` with ``ROLLOUT_WEBHOOK_SECRET``."""
    return hmac_signature(settings.ROLLOUT_WEBHOOK_SECRET, body)


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


def _webhook_later(decision: RolloutDecision) -> None:
    if decision.plan.webhook_url:
        transaction.on_commit(lambda: webhook_send(decision.pk))


def webhook_send(decision_pk: int) -> str:
    """Post a decision to its plan's webhook; what it answered is kept on the decision."""
    import httpx

    decision = RolloutDecision.objects.select_related("plan__profile", "plan__candidate", "plan__control").get(
        pk=decision_pk
    )
    body = webhook_body(decision)
    headers = {"Content-Type": "application/json", "X-Rollout-Signature": webhook_signature(body)}
    try:
        answer = httpx.post(decision.plan.webhook_url, content=body, headers=headers, timeout=5.0)
        outcome = f"HTTP {answer.status_code}"
    except httpx.HTTPError as exc:
        outcome = f"failed: {type(exc).__name__}"
        logger.warning("rollout webhook of plan %s %s", decision.plan_id, outcome)
    RolloutDecision.objects.filter(pk=decision.pk).update(webhook=outcome[:200])
    return outcome
