"""Rollout plans' guard (docs/rollouts.md): from the stored turns, advance, hold or roll back each running plan.

Every minute (Celery beat's ``conversations.rollout_evaluate``; without a broker, the embedded server's timer) each
running plan (:class:`releases.models.RolloutPlan`) is evaluated on the turns of its running stage:

* **Cohorts.** A version plan's candidate cohort is the turns its candidate version served
  (``routing_version``), its control cohort the turns the control version served, both of the plan's profile;
  a ``multi_agent`` plan's are the turns of cohort ``multi_agent`` and ``single_agent``.
* **Figures** per cohort: conversations and turns; fallback, loop-stop, handoff and tool-error rates; the
  negative-feedback rate of rated answers; the escalation rate (conversations handed to a person, of the
  conversations) and the abandonment rate (abandoned, of the outcomes decided in the window); the judge's mean
  score; the p95 latency; errors (failed specialist parts and tool errors). At the last stage (100 %) new
  conversations have no control: the control's figures are those of the whole plan.
* **No decisions on noise.** Below ``min_conversations`` in either cohort nothing moves — except the absolute
  error guard, which rolls back as soon as the candidate's errors pass ``max_errors``. A rate guard's relative
  limit is breached when the candidate is worse than the control by more than its threshold (0.25 = 25 % worse,
  plus half a percentage point so that a control near zero does not make every difference relative infinity)
  *and* Fisher's exact test says the candidate's rate is higher with p < ``alpha`` (one-sided, ``scipy.stats``);
  the judge score likewise with Welch's t-test; latency when p95(candidate) > p95(control) × (1 + threshold) +
  50 ms *and* more of the candidate's answers are slower than that than the 5 % a p95 there allows (a one-sided
  binomial test's p < ``alpha``: one or two stalls of a busy machine move a small sample's p95, not the test). A
  guard's absolute limit (``absolute``) is breached when the candidate's rate is above it with a one-sided binomial
  test's p < ``alpha``, its judge score below it with a one-sample t-test's, or its p95 latency above it with the
  same test as the relative limit's.
* **Decisions.** A plan whose candidate or settings changed since it started is aborted, not judged
  (:func:`releases.rollout.commands.plan_changed_abort`). A breach rolls back at once; with every guard clear, the
  stage advances once it ran ``hold_minutes`` and both cohorts reached the minimum — and no required conversation
  test fails against the candidate (:func:`releases.evals.gate.stage_tests_failures`, played then, before the plan's
  lock is taken: a test added since the candidate was made holds the stage until it passes or a person advances by
  hand); after the last stage the plan completes and the candidate is released to every customer
  (:func:`releases.rollout.commands.plan_advance`). Otherwise it holds.
  Each decision is a :class:`~releases.models.RolloutDecision` with the figures that drove it and a reason in words
  (:mod:`routing.rollout_words`); those that move the plan are posted to its webhook; a rollback is also published
  as the operational event ``rollout.rolled_back`` (:mod:`common.infra.bus`).

The commands a person gives a plan (start, pause, resume, advance, abort) live beside it
(:mod:`releases.rollout.commands`); they are re-exported here for the guard's callers.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import (
    Aggregate,
    Avg,
    Count,
    Exists,
    F,
    FloatField,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    StdDev,
    Sum,
    Value,
)
from django.utils import timezone

from common.config_version import config_version_bump
from common.infra.bus import publish_event
from conversations.models import (
    PART_FAILED,
    ConversationOutcome,
    FeedbackRating,
    Message,
    MessageFeedback,
    MessageRole,
    Outcome,
    RouteDecisionRecord,
    ToolCall,
    ToolCallStatus,
)
from handoffs.models import Handoff, HandoffKind, HandoffStatus
from releases.evals.gate import stage_tests_failures
from releases.models import RolloutDecision, RolloutDecisionAction, RolloutPlan, RolloutPlanStatus, RolloutPlanTarget
from releases.rollout.commands import (
    RolloutStateError,
    decision_record,
    decision_webhook_later,
    plan_advance,
    plan_changed_abort,
    plan_command,
    plan_flag_follow,
    plan_parts,
    plan_start,
    webhook_body,
    webhook_headers,
    webhook_send,
)
from routing.public import (
    COHORT_MULTI_AGENT,
    COHORT_SINGLE_AGENT,
    GUARD_METRICS,
    live_version,
    metric_words,
    percent_words,
    stage_words,
    value_words,
)

__all__ = [  # the commands, re-exported for the guard's callers (management command, admin, tests)
    "RolloutStateError",
    "plan_command",
    "plan_start",
    "webhook_body",
    "webhook_headers",
    "webhook_send",
]

logger = logging.getLogger(__name__)

CANDIDATE, CONTROL = "candidate", "control"
RATE_FLOOR = 0.005  # added to a rate guard's allowance: half a percentage point
LATENCY_FLOOR_MS = 50.0  # added to the p95 allowance: a few milliseconds of a busy machine are not a regression
TOOL_ERRORS = (ToolCallStatus.ERROR, ToolCallStatus.TIMEOUT, ToolCallStatus.UNAVAILABLE)
TOOL_COUNTED = (*TOOL_ERRORS, ToolCallStatus.OK, ToolCallStatus.INVALID)  # not permission asks, not unoffered tools


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


def _p95_python(windows: list[CohortWindow], answered: Q) -> list[float | None]:
    """The 95th percentile of each window's answers' ``latency_ms``, sorted in Python (databases without
    percentile_cont): every window's latencies in one query, as :func:`_each` reads its measures."""
    parts = [
        Message.objects.filter(window.rows(), answered, latency_ms__isnull=False)
        .annotate(window=Value(index, IntegerField()))
        .values_list("window", "latency_ms")
        .order_by()
        for index, window in enumerate(windows)
    ]
    rows = parts[0].union(*parts[1:], all=True) if len(parts) > 1 else parts[0]
    latencies: dict[int, list[float]] = {}
    for index, latency in rows:
        if latency is not None:  # filtered out above; the column is nullable
            latencies.setdefault(index, []).append(latency)
    figures: list[float | None] = []
    for index in range(len(windows)):
        ordered = sorted(latencies.get(index, ()))
        figures.append(float(ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]) if ordered else None)
    return figures


def _deviation(row: dict[str, Any]) -> float | None:
    """The judge scores' (population) standard deviation from their count, mean and sum of squares (``judged``,
    ``judge_mean``, ``judge_squares``); null without a score, as PostgreSQL's ``stddev_pop``."""
    n, mean, squares = row.get("judged", 0), row.get("judge_mean"), row.get("judge_squares")
    if not n or mean is None or squares is None:
        return None
    return math.sqrt(max(0.0, squares / n - mean * mean))


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
    dashboard's rollout view reads for every slice of time: seven queries, whatever the number of windows (eight
    on SQLite, which has no percentile_cont: the latencies read apart, in one query)."""
    asked, answered = Q(role=MessageRole.USER), Q(role=MessageRole.ASSISTANT)
    postgres = connection.vendor == "postgresql"
    measures: dict[str, Any] = {
        "turns": Count("role", filter=asked),  # a column of the covering index: no table row read
        "conversations": Count("conversation_id", filter=asked, distinct=True),
        "judged": Count("judge_score", filter=answered),
        "judge_mean": Avg("judge_score", filter=answered),
    }
    if postgres:
        measures["judge_sd"] = StdDev("judge_score", filter=answered)
        measures["p95"] = _Percentile95("latency_ms", filter=answered & Q(latency_ms__isnull=False))
    else:
        # SQLite's StdDev is Python's statistics.pstdev, which raises where a window has turns but no score
        # (PostgreSQL's stddev_pop gives null): the scores' squares are summed instead, the deviation worked out below.
        measures["judge_squares"] = Sum(F("judge_score") * F("judge_score"), filter=answered)
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
    # A conversation handed to a person has a completed human move to a person; a hand-back (a human move from one)
    # implies one in the same conversation, so any completed human move counts its conversation — kind, status and
    # conversation are the covering index's (agent_handoffs_version_cover), to_agent is not.
    moved = _each(
        Handoff.objects.all(),
        windows,
        "created_at",
        stops=Count("conversation_id", filter=Q(status=HandoffStatus.STOPPED)),
        handoffs=Count("kind", filter=Q(kind=HandoffKind.HANDOFF, status=HandoffStatus.COMPLETED)),
        escalated=Count(
            "conversation_id", filter=Q(kind=HandoffKind.HUMAN, status=HandoffStatus.COMPLETED), distinct=True
        ),
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
    # Outcomes count by when they were decided, from the outcome table's own index (outcome_version).
    ended = _each(
        ConversationOutcome.objects.all(),
        windows,
        "decided_at",
        n=Count("outcome"),
        abandoned=Count("outcome", filter=Q(outcome=Outcome.ABANDONED)),
    )
    p95s = [row.get("p95") for row in messages] if postgres else _p95_python(windows, answered)
    figures = []
    for index in range(len(windows)):
        asked_rows = messages[index]
        turns = asked_rows.get("turns", 0)
        p95 = p95s[index]
        decided = routed[index] or {"n": 0, "fallback": 0}
        stopped = moved[index] or {"stops": 0, "handoffs": 0, "escalated": 0}
        outcomes = ended[index] or {"n": 0, "abandoned": 0}
        conversations = asked_rows.get("conversations", 0)
        tools = called[index] or {"n": 0, "errors": 0}
        ratings = rated[index] or {"n": 0, "down": 0}
        figures.append(
            {
                "conversations": conversations,
                "turns": turns,
                "fallback_rate": _rate(decided["fallback"], decided["n"]),
                "loop_stop_rate": _rate(stopped["stops"], turns),
                "handoff_rate": _rate(stopped["handoffs"], turns),
                "tool_error_rate": _rate(tools["errors"], tools["n"]),
                "negative_feedback_rate": _rate(ratings["down"], ratings["n"]),
                "escalation_rate": _rate(min(stopped["escalated"], conversations), conversations),
                "abandonment_rate": _rate(outcomes["abandoned"], outcomes["n"]),
                "judge_score": {
                    "n": asked_rows.get("judged", 0),
                    "mean": asked_rows.get("judge_mean"),
                    "sd": asked_rows.get("judge_sd") if postgres else _deviation(asked_rows),
                },
                "p95_latency_ms": p95,
                "errors": failed[index].get("n", 0) + tools["errors"],
            }
        )
    return figures


def answers_slower_than(window: CohortWindow, limit_ms: float) -> tuple[int, int]:
    """How many of the window's timed answers took longer than ``limit_ms``, and of how many: one query, asked only
    when a p95 passed its limit (the latency guard's test)."""
    timed = Message.objects.filter(window.rows(), role=MessageRole.ASSISTANT, latency_ms__isnull=False)
    counts = timed.aggregate(timed=Count("pk"), slower=Count("pk", filter=Q(latency_ms__gt=limit_ms)))
    return counts["slower"], counts["timed"]


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


def _significance(test: str, p_value: float, alpha: float, breached: bool) -> str:
    return f"{test} p = {p_value:.2g}" + ("" if breached else f" ≥ {alpha:g}: not significant yet")


Slower = Callable[[float], tuple[int, int]]  # the candidate's answers slower than a latency, and how many were timed
LATENCY_QUANTILE = 0.95  # the latency guard's percentile: at most 5 % of the answers slower than its p95


def _slower_than(limit: float, slower: Slower | None, alpha: float) -> tuple[bool, str, float | None]:
    """A p95 past ``limit``, tested: are significantly more of the candidate's answers slower than ``limit`` than the
    5 % a p95 at ``limit`` allows (one-sided binomial test)? Whether breached, the test in words, its p-value."""
    from scipy import stats  # as in _relative

    if slower is None:
        raise ValueError("the latency guard counts the candidate's slower answers: pass guard_verdict's `slower`")
    over, timed = slower(limit)
    if not timed:
        return False, "no timed answer", None
    p_value = float(stats.binomtest(over, timed, 1 - LATENCY_QUANTILE, alternative="greater").pvalue)
    breached = p_value < alpha
    return breached, f"{over} of {timed} answers slower, {_significance('binomial', p_value, alpha, breached)}", p_value


def _relative(name: str, threshold: float, cand: Any, ctrl: Any, alpha: float, slower: Slower | None = None) -> Verdict:
    """The candidate against the control: at most ``threshold`` worse."""
    from scipy import stats  # loaded when a guard first judges, not with every process that imports the engine

    metric, said = GUARD_METRICS[name], metric_words(name)
    if metric.kind == "rate":
        if not cand["n"] or not ctrl["n"]:
            return Verdict(name, False, f"{said}: no sample yet")
        allowed = ctrl["rate"] * (1 + threshold) + RATE_FLOOR
        against = f"{said} {percent_words(cand['rate'])} against {percent_words(ctrl['rate'])} for the control"
        if cand["rate"] <= allowed:
            return Verdict(name, False, f"{against}: within the allowed {percent_words(allowed)}")
        table = [[cand["x"], cand["n"] - cand["x"]], [ctrl["x"], ctrl["n"] - ctrl["x"]]]
        p_value = float(stats.fisher_exact(table, alternative="greater").pvalue)
        breached = p_value < alpha
        significance = _significance("Fisher", p_value, alpha, breached)
        return Verdict(name, breached, f"{against} (at most {percent_words(allowed)} allowed; {significance})", p_value)
    if metric.kind == "mean":
        if cand["n"] < 2 or ctrl["n"] < 2:
            return Verdict(name, False, f"{said}: no sample yet")
        allowed = ctrl["mean"] * (1 - threshold)
        against = f"{said} {value_words(name, cand['mean'])} against {value_words(name, ctrl['mean'])} for the control"
        if cand["mean"] >= allowed:
            return Verdict(name, False, f"{against}: within the allowed {value_words(name, allowed)}")
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
        significance = _significance("Welch", p_value, alpha, breached)
        return Verdict(
            name, breached, f"{against} (at least {value_words(name, allowed)} allowed; {significance})", p_value
        )
    if cand is None or ctrl is None:
        return Verdict(name, False, f"{said}: no sample yet")
    allowed = ctrl * (1 + threshold) + LATENCY_FLOOR_MS
    against = f"{said} {value_words(name, cand)} against {value_words(name, ctrl)} for the control"
    if cand <= allowed:
        return Verdict(name, False, f"{against}: within the allowed {value_words(name, allowed)}")
    slow, tested, slow_p = _slower_than(allowed, slower, alpha)
    return Verdict(name, slow, f"{against} (at most {value_words(name, allowed)} allowed; {tested})", slow_p)


def _absolute(name: str, limit: float, cand: Any, alpha: float, slower: Slower | None = None) -> Verdict:
    """The candidate against a level it may never pass, whatever the control does."""
    from scipy import stats  # as in _relative

    metric, said = GUARD_METRICS[name], metric_words(name)
    shown = value_words(name, limit)
    if metric.kind == "rate":
        if not cand["n"]:
            return Verdict(name, False, f"{said}: no sample yet")
        value = f"{said} {percent_words(cand['rate'])}"
        if cand["rate"] <= limit:
            return Verdict(name, False, f"{value}: within the limit of {shown}")
        tested = stats.binomtest(cand["x"], cand["n"], limit, alternative="greater") if limit > 0 else None
        p_value = float(tested.pvalue) if tested is not None else 0.0  # any failure passes a limit of 0
        breached = p_value < alpha
        significance = _significance("binomial", p_value, alpha, breached)
        return Verdict(name, breached, f"{value}, above the limit of {shown} ({significance})", p_value)
    if metric.kind == "mean":
        if cand["n"] < 2:
            return Verdict(name, False, f"{said}: no sample yet")
        value = f"{said} {value_words(name, cand['mean'])}"
        if cand["mean"] >= limit:
            return Verdict(name, False, f"{value}: within the limit of at least {shown}")
        spread = (cand["sd"] or 0.0) / math.sqrt(cand["n"])
        p_value = 0.0 if spread == 0 else float(stats.t.cdf((cand["mean"] - limit) / spread, cand["n"] - 1))
        breached = p_value < alpha
        significance = _significance("t-test", p_value, alpha, breached)
        return Verdict(name, breached, f"{value}, below the limit of {shown} ({significance})", p_value)
    if cand is None:
        return Verdict(name, False, f"{said}: no sample yet")
    value = f"{said} {value_words(name, cand)}"
    if cand <= limit:
        return Verdict(name, False, f"{value}: within the limit of {shown}")
    slow, tested, slow_p = _slower_than(limit, slower, alpha)
    above = f"{value}, above the limit of {shown}"
    return Verdict(name, slow, f"{above} ({tested})", slow_p)


def guard_verdict(
    guard: dict[str, Any],
    candidate: dict[str, Any],
    control: dict[str, Any],
    alpha: float,
    *,
    slower: Slower | None = None,
) -> Verdict:
    """Whether the candidate is worse than the control on ``guard`` beyond its relative limit (``threshold``), or
    past its absolute limit (``absolute``), significantly; the reason in words (the breached limits', else each's).
    ``slower`` counts the candidate's answers slower than a latency (:func:`answers_slower_than`): the latency
    guard's test needs it once a p95 is past its limit."""
    name = guard["metric"]
    verdicts = []
    if guard.get("threshold") is not None:
        verdicts.append(_relative(name, float(guard["threshold"]), candidate[name], control[name], alpha, slower))
    if guard.get("absolute") is not None:
        verdicts.append(_absolute(name, float(guard["absolute"]), candidate[name], alpha, slower))
    if not verdicts:
        return Verdict(name, False, f"{metric_words(name)}: not limited")
    breached = [verdict for verdict in verdicts if verdict.breached]
    shown = breached or verdicts
    p_values = [verdict.p_value for verdict in shown if verdict.p_value is not None]
    return Verdict(
        name, bool(breached), "; ".join(verdict.reason for verdict in shown), min(p_values) if p_values else None
    )


# -- decisions ---------------------------------------------------------------------------------------------


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
    now = now or timezone.now()
    failing, prepared = _stage_tests(plan, now, prepared)  # before the lock: a test's turns may call models
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
            profile, _ = plan_parts(plan)
            live = live_version(profile)
            if live is None or live.pk != plan.control_id:
                plan.status, plan.finished_at = RolloutPlanStatus.ABORTED, now
                plan.save()
                decision = decision_record(
                    plan,
                    RolloutDecisionAction.ABORT,
                    f"The live version of {profile.agent_id} changed under the plan (now "
                    f"{f'version {live.number}' if live else 'none'}, the control was "
                    f"{f'version {plan.control.number}' if plan.control else 'unknown'}): aborted.",
                    actor,
                )
                decision_webhook_later(decision)
                return decision
        changed = plan_changed_abort(plan, now, actor)  # not what started: nothing more is judged of it
        if changed is not None:
            return changed
        windows = _windows(plan, now)
        ready = (prepared or {}).get(plan.pk)
        both = ready[1] if ready and ready[0] == windows else cohorts_figures(list(windows))
        since = windows[0].since
        figures: dict[str, Any] = {CANDIDATE: both[0], CONTROL: both[1], "since": since.isoformat()}
        cand, ctrl = figures[CANDIDATE], figures[CONTROL]
        if cand["errors"] > plan.max_errors:
            why = f"{cand['errors']} errors of the candidate in this stage, more than the {plan.max_errors} allowed"
            return _rollback(plan, now, actor, figures, why)
        sampled = cand["conversations"] >= plan.min_conversations and ctrl["conversations"] >= plan.min_conversations
        slower = partial(answers_slower_than, windows[0])
        verdicts = (
            [guard_verdict(guard, cand, ctrl, plan.alpha, slower=slower) for guard in plan.guards] if sampled else []
        )
        figures["verdicts"] = [verdict.as_dict() for verdict in verdicts]
        breached = [verdict for verdict in verdicts if verdict.breached]
        if breached:
            return _rollback(plan, now, actor, figures, "; ".join(verdict.reason for verdict in breached))
        held = now - since >= dt.timedelta(minutes=plan.hold_minutes)
        tests_failed = failing[1] if failing is not None and failing[0] == plan.candidate_id else []
        if sampled and held and tests_failed:
            figures["conversation_tests"] = tests_failed
            return decision_record(
                plan, RolloutDecisionAction.HOLD, TESTS_HOLD + "; ".join(tests_failed), actor, figures
            )
        if sampled and held:
            return plan_advance(plan, now, actor, figures, by_guard=True)
        missing = []
        if not sampled:
            missing.append(
                f"samples {cand['conversations']} (candidate) and {ctrl['conversations']} (control) of "
                f"{plan.min_conversations} conversations"
            )
        if not held:
            missing.append(f"held {int((now - since).total_seconds() // 60)} of {plan.hold_minutes} minutes")
        return decision_record(plan, RolloutDecisionAction.HOLD, "Holding: " + "; ".join(missing) + ".", actor, figures)


TESTS_HOLD = "Holding: every guard is clear, but required conversation tests fail against the candidate: "


def _stage_tests(
    plan: RolloutPlan, now: dt.datetime, prepared: Prepared | None
) -> tuple[tuple[int, list[str]] | None, Prepared | None]:
    """The required conversation tests that fail against a version plan's candidate — as ``(candidate pk, lines)``,
    played only when its stage could advance now (held long enough, both cohorts sampled; ``None`` otherwise) — and
    the figures read for it (``prepared``, reused under the lock when they are still the plan's windows)."""
    plan = RolloutPlan.objects.select_related("candidate", "profile").filter(pk=plan.pk).first() or plan
    if plan.status != RolloutPlanStatus.RUNNING or plan.target != RolloutPlanTarget.VERSION:
        return None, prepared
    if plan.candidate is None or plan.profile is None:
        return None, prepared
    windows = _windows(plan, now)
    if now - windows[0].since < dt.timedelta(minutes=plan.hold_minutes):
        return None, prepared
    ready = (prepared or {}).get(plan.pk)
    if ready is None or ready[0] != windows:
        ready = (windows, cohorts_figures(list(windows)))
        prepared = {**(prepared or {}), plan.pk: ready}
    if min(cohort["conversations"] for cohort in ready[1]) < plan.min_conversations:
        return None, prepared
    return (plan.candidate.pk, stage_tests_failures(plan.profile, plan.candidate)), prepared


def _rollback(plan: RolloutPlan, now: dt.datetime, actor: str, figures: dict[str, Any], why: str) -> RolloutDecision:
    plan.status, plan.finished_at = RolloutPlanStatus.ROLLED_BACK, now
    plan.save()
    plan_flag_follow(plan, 0)
    config_version_bump()
    decision = decision_record(
        plan,
        RolloutDecisionAction.ROLLBACK,
        f"Rolled back automatically at {stage_words(plan.stage, plan.stages)}: {why}. Every conversation is back on "
        "the control from its next message.",
        actor,
        {**figures, "why": why},
    )
    decision_webhook_later(decision)
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
