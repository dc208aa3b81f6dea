"""Reads behind the analytics API and dashboard: every figure is aggregated in the database.

Every selector takes the same keyword-only filters and returns plain dicts and lists (JSON-ready):

* ``start``, ``end`` — aware datetimes, ``start <= created_at < end`` (see :mod:`analytics.filters`);
* ``tenant_id`` — one tenant, or ``None`` for every tenant (the caller decides who may ask for that);
* ``profile_id`` — one agent profile, or ``None`` for all;
* ``kinds`` (handoff selectors only) — the handoff kinds to count, or ``None`` for the selector's default.

Queries group in SQL (``values().annotate()``) and Python only folds the grouped rows, whose number is
bounded by agents, kinds, statuses, periods or tools — never by the number of handoffs or messages. They
count ``*`` rather than ids and read only columns of the covering indexes declared on the models, so that
PostgreSQL answers them with index-only scans.
Handoffs are read from ``agent_handoffs`` alone (tenant and profile are denormalised on it); messages,
route decisions and tool calls reach the tenant and profile through their conversation.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import Aggregate, Avg, Count, FloatField, QuerySet, Sum
from django.db.models.functions import Trunc

from handoffs.models import Handoff, HandoffKind, HandoffStatus
from routing.models import Conversation, Message, MessageRole, RouteDecisionRecord, ToolCall, ToolCallStatus

# What counts as a handoff: an agent-to-agent move that happened. Returns end a delegation (they are the
# delegation endpoint's) and a supervisor's fan-out runs specialists in parallel, handing nothing over;
# stopped and refused moves did not happen (the loop-stops endpoint counts them).
COUNTED_KINDS: tuple[str, ...] = (HandoffKind.HANDOFF, HandoffKind.ROUTING, HandoffKind.DELEGATION)
COHORTS: tuple[str, ...] = ("multi_agent", "single_agent")
# Shown even when nothing was routed that way, so that the mix reads the same from one window to the next.
CORE_METHODS: tuple[str, ...] = ("state", "keyword", "llm", "fallback")
FALLBACK_METHOD = "fallback"
TOOL_ERROR_STATUSES: tuple[str, ...] = tuple(s for s in ToolCallStatus.values if s != ToolCallStatus.OK)


class PercentileCont(Aggregate):
    """PostgreSQL's ``percentile_cont(fraction) WITHIN GROUP (ORDER BY expression)``: a continuous percentile."""

    function = "PERCENTILE_CONT"
    name = "PercentileCont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: str, *, fraction: float, **extra: Any) -> None:
        super().__init__(expression, fraction=repr(float(fraction)), **extra)


def percentiles_supported() -> bool:
    """p50/p95 need PostgreSQL; elsewhere (SQLite, the quick start) they are ``None``."""
    return connection.vendor == "postgresql"


def _share(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def _handoffs(*, start: dt.datetime, end: dt.datetime, tenant_id: int | None, profile_id: int | None) -> QuerySet:
    rows = Handoff.objects.filter(created_at__gte=start, created_at__lt=end)
    if tenant_id is not None:
        rows = rows.filter(tenant_id=tenant_id)
    if profile_id is not None:
        rows = rows.filter(profile_id=profile_id)
    return rows.order_by()  # no model ordering: it would join the GROUP BY


def _counted(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: int | None,
    profile_id: int | None,
    kinds: Sequence[str] | None,
) -> QuerySet:
    rows = _handoffs(start=start, end=end, tenant_id=tenant_id, profile_id=profile_id)
    return rows.filter(status=HandoffStatus.COMPLETED, kind__in=list(kinds or COUNTED_KINDS))


def _conversations(*, start: dt.datetime, end: dt.datetime, tenant_id: int | None, profile_id: int | None) -> QuerySet:
    rows = Conversation.objects.filter(created_at__gte=start, created_at__lt=end)
    if tenant_id is not None:
        rows = rows.filter(tenant_id=tenant_id)
    if profile_id is not None:
        rows = rows.filter(profile_id=profile_id)
    return rows.order_by()


def _through_conversation(
    rows: QuerySet, *, start: dt.datetime, end: dt.datetime, tenant_id: int | None, profile_id: int | None
) -> QuerySet:
    """Rows of a conversation's child table in the window, scoped through the conversation (joined only if asked)."""
    rows = rows.filter(created_at__gte=start, created_at__lt=end)
    if tenant_id is not None:
        rows = rows.filter(conversation__tenant_id=tenant_id)
    if profile_id is not None:
        rows = rows.filter(conversation__profile_id=profile_id)
    return rows.order_by()


# -- handoffs ----------------------------------------------------------------------------------------------


def handoff_summary(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: int | None,
    profile_id: int | None = None,
    kinds: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Seed 003's ``get_handoff_analytics``: ``{total_handoffs, handoff_paths: [{from, to, count}],
    conversations_with_handoffs, total_conversations, handoff_rate_percentage}``.

    Counts completed moves of ``kinds`` (default :data:`COUNTED_KINDS`) made in the window. ``total_conversations``
    are the conversations created in the window; ``conversations_with_handoffs`` the distinct conversations with
    a counted move in it (one begun before the window counts too, so the rate may exceed 100 on short windows).
    Paths are sorted by count (most first), then from and to. Three queries.
    """
    counted = _counted(start=start, end=end, tenant_id=tenant_id, profile_id=profile_id, kinds=kinds)
    paths = [
        {"from": row["from_agent"], "to": row["to_agent"], "count": row["count"]}
        for row in counted.values("from_agent", "to_agent")
        .annotate(count=Count("*"))
        .order_by("-count", "from_agent", "to_agent")
    ]
    with_handoffs = counted.aggregate(n=Count("conversation_id", distinct=True))["n"]
    total_conversations = _conversations(start=start, end=end, tenant_id=tenant_id, profile_id=profile_id).count()
    return {
        "total_handoffs": sum(path["count"] for path in paths),
        "handoff_paths": paths,
        "conversations_with_handoffs": with_handoffs,
        "total_conversations": total_conversations,
        "handoff_rate_percentage": _share(with_handoffs, total_conversations),
    }


def _periods(start: dt.datetime, end: dt.datetime, bucket: str) -> list[dt.datetime]:
    step = dt.timedelta(hours=1) if bucket == "hour" else dt.timedelta(days=1)
    first = start.replace(minute=0, second=0, microsecond=0)
    if bucket == "day":
        first = first.replace(hour=0)
    periods = []
    period = first
    while period < end:
        periods.append(period)
        period += step
    return periods


def handoff_timeline(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: int | None,
    profile_id: int | None = None,
    kinds: Sequence[str] | None = None,
    bucket: str = "day",
    now: dt.datetime | None = None,
) -> list[dict[str, Any]]:
    """Counted handoffs (as :func:`handoff_summary` counts them) per UTC day or hour:
    ``[{period, count, by_kind: {kind: count}}]``, oldest first.

    Every period from the window's start up to ``now`` (the window's end if sooner) is listed, empty ones
    with 0, and ``by_kind`` names every kind counted, so charts are continuous. ``period`` is ISO 8601.
    One query.
    """
    if bucket not in ("day", "hour"):
        raise ValueError(f"bucket must be 'day' or 'hour', not {bucket!r}")
    kinds = tuple(kinds or COUNTED_KINDS)
    counted = _counted(start=start, end=end, tenant_id=tenant_id, profile_id=profile_id, kinds=kinds)
    grouped = (
        counted.annotate(period=Trunc("created_at", bucket, tzinfo=dt.UTC))
        .values("period", "kind")
        .annotate(count=Count("*"))
    )
    found: dict[dt.datetime, dict[str, int]] = {}
    for row in grouped:
        found.setdefault(row["period"].astimezone(dt.UTC), {})[row["kind"]] = row["count"]
    until = min(end, now or dt.datetime.now(dt.UTC))
    timeline = []
    for period in _periods(start, until, bucket):
        by_kind = {kind: found.get(period, {}).get(kind, 0) for kind in kinds}
        timeline.append({"period": period.isoformat(), "count": sum(by_kind.values()), "by_kind": by_kind})
    return timeline


def handoff_stops(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: int | None,
    profile_id: int | None = None,
    kinds: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Moves that did not happen: ``{total_stopped, by_outcome: [{outcome, count}], by_agent: [{agent, count}],
    total_refused, refused_by_agent: [{agent, count}]}``.

    Stopped rows are loop safety's (outcome ping_pong, path_repeated, handoff_limit, step_limit); refused rows a
    target the agent may not reach (outcome not_allowed). ``agent`` is the one that tried to move. Lists are
    sorted by count, then name. ``kinds`` narrows to the kinds of move tried (default: all). One query.
    """
    rows = _handoffs(start=start, end=end, tenant_id=tenant_id, profile_id=profile_id).filter(
        status__in=[HandoffStatus.STOPPED, HandoffStatus.REFUSED]
    )
    if kinds:
        rows = rows.filter(kind__in=list(kinds))
    by_outcome: dict[str, int] = {}
    by_agent: dict[str, int] = {}
    refused_by_agent: dict[str, int] = {}
    for row in rows.values("status", "outcome", "from_agent").annotate(count=Count("*")):
        if row["status"] == HandoffStatus.STOPPED:
            by_outcome[row["outcome"]] = by_outcome.get(row["outcome"], 0) + row["count"]
            by_agent[row["from_agent"]] = by_agent.get(row["from_agent"], 0) + row["count"]
        else:
            refused_by_agent[row["from_agent"]] = refused_by_agent.get(row["from_agent"], 0) + row["count"]
    return {
        "total_stopped": sum(by_outcome.values()),
        "by_outcome": _ranked(by_outcome, "outcome"),
        "by_agent": _ranked(by_agent, "agent"),
        "total_refused": sum(refused_by_agent.values()),
        "refused_by_agent": _ranked(refused_by_agent, "agent"),
    }


def _ranked(counts: dict[str, int], name: str) -> list[dict[str, Any]]:
    return [{name: key, "count": count} for key, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]


def delegation_outcomes(
    *, start: dt.datetime, end: dt.datetime, tenant_id: int | None, profile_id: int | None = None
) -> dict[str, Any]:
    """Seed 001's sub-conversations: ``{total_delegations, total_returns,
    returns_by_outcome: [{outcome, count, share_percentage}], returns_by_specialist: [{agent, count}]}``.

    Delegations are completed ``delegation`` rows (a coordinator passed the conversation on); returns are
    ``return`` rows, whose outcome is the status the specialist ended with (completed, out_of_scope, ...).
    Shares are of the returns. Sorted by count, then name. One query.
    """
    rows = _handoffs(start=start, end=end, tenant_id=tenant_id, profile_id=profile_id).filter(
        status=HandoffStatus.COMPLETED, kind__in=[HandoffKind.DELEGATION, HandoffKind.RETURN]
    )
    delegations = 0
    by_outcome: dict[str, int] = {}
    by_specialist: dict[str, int] = {}
    for row in rows.values("kind", "outcome", "from_agent").annotate(count=Count("*")):
        if row["kind"] == HandoffKind.DELEGATION:
            delegations += row["count"]
        else:
            by_outcome[row["outcome"]] = by_outcome.get(row["outcome"], 0) + row["count"]
            by_specialist[row["from_agent"]] = by_specialist.get(row["from_agent"], 0) + row["count"]
    returns = sum(by_outcome.values())
    return {
        "total_delegations": delegations,
        "total_returns": returns,
        "returns_by_outcome": [
            {**item, "share_percentage": _share(item["count"], returns)} for item in _ranked(by_outcome, "outcome")
        ],
        "returns_by_specialist": _ranked(by_specialist, "agent"),
    }


def handoff_list_recent(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: int | None,
    profile_id: int | None = None,
    kinds: Sequence[str] | None = None,
    limit: int = 20,
) -> list[dict[str, Any]]:
    """The latest ``limit`` handoff rows of the window, newest first, of every status (stops and refusals
    included) and of ``kinds`` (default: all): ``[{id, conversation_id, conversation_key, tenant, profile,
    from_agent, to_agent, kind, status, outcome, reason, created_at}]``. One query."""
    rows = _handoffs(start=start, end=end, tenant_id=tenant_id, profile_id=profile_id)
    if kinds:
        rows = rows.filter(kind__in=list(kinds))
    fields = ("id", "conversation_id", "from_agent", "to_agent", "kind", "status", "outcome", "reason", "created_at")
    joined = {
        "conversation_key": "conversation__conversation_key",
        "tenant": "tenant__slug",
        "profile": "profile__agent_id",
    }
    latest = rows.order_by("-created_at", "-id").values(*fields, *joined.values())[:limit]
    return [
        {
            "id": row["id"],
            "conversation_id": row["conversation_id"],
            **{name: row[path] for name, path in joined.items()},
            **{name: row[name] for name in fields[2:]},
        }
        for row in latest
    ]


# -- turns, routing, tools -----------------------------------------------------------------------------------


def agent_utilisation(
    *, start: dt.datetime, end: dt.datetime, tenant_id: int | None, profile_id: int | None = None
) -> list[dict[str, Any]]:
    """Seed 003's agent utilisation: answered turns (assistant messages) per specialist,
    ``[{agent, turns, share_percentage}]``, most turns first, then by name. One query."""
    rows = _through_conversation(
        Message.objects.filter(role=MessageRole.ASSISTANT),
        start=start,
        end=end,
        tenant_id=tenant_id,
        profile_id=profile_id,
    )
    grouped = list(rows.values("agent").annotate(turns=Count("*")).order_by("-turns", "agent"))
    total = sum(row["turns"] for row in grouped)
    return [
        {"agent": row["agent"], "turns": row["turns"], "share_percentage": _share(row["turns"], total)}
        for row in grouped
    ]


def route_method_mix(
    *, start: dt.datetime, end: dt.datetime, tenant_id: int | None, profile_id: int | None = None
) -> dict[str, Any]:
    """How messages were routed: ``{methods: [{method, count, share_percentage}], fallback_rate_percentage,
    total}`` over the stored route decisions. The core methods (state, keyword, llm, fallback) are listed even
    at 0; the others (followup, coordinator, sub_conversation, permission) when they occur. Sorted by count,
    then name. One query."""
    rows = _through_conversation(
        RouteDecisionRecord.objects.all(), start=start, end=end, tenant_id=tenant_id, profile_id=profile_id
    )
    counts = dict.fromkeys(CORE_METHODS, 0)
    for row in rows.values("method").annotate(count=Count("*")):
        counts[row["method"]] = row["count"]
    total = sum(counts.values())
    return {
        "methods": [{**item, "share_percentage": _share(item["count"], total)} for item in _ranked(counts, "method")],
        "fallback_rate_percentage": _share(counts[FALLBACK_METHOD], total),
        "total": total,
    }


def tool_call_stats(
    *, start: dt.datetime, end: dt.datetime, tenant_id: int | None, profile_id: int | None = None
) -> dict[str, Any]:
    """MCP tool calls per tool: ``{tools: [{tool, server, calls, errors, error_rate_percentage,
    errors_by_status: {status: count}, avg_latency_ms}], total_calls, total_errors, error_statuses}``.

    An error is any status but ``ok`` (:data:`TOOL_ERROR_STATUSES`: error, timeout, invalid_arguments,
    unavailable, not_offered, permission_required). ``avg_latency_ms`` averages every call of the tool (calls
    that never reached the server count with their ~0 ms). Most calls first, then by name. One query.
    """
    rows = _through_conversation(
        ToolCall.objects.all(), start=start, end=end, tenant_id=tenant_id, profile_id=profile_id
    )
    tools: dict[tuple[str, str], dict[str, Any]] = {}
    grouped = rows.values("tool", "server", "status").annotate(calls=Count("*"), latency=Sum("latency_ms"))
    for row in grouped:
        tool = tools.setdefault(
            (row["tool"], row["server"]),
            {"tool": row["tool"], "server": row["server"], "calls": 0, "errors": 0, "errors_by_status": {}, "ms": 0.0},
        )
        tool["calls"] += row["calls"]
        tool["ms"] += row["latency"] or 0.0
        if row["status"] != ToolCallStatus.OK:
            tool["errors"] += row["calls"]
            tool["errors_by_status"][row["status"]] = row["calls"]
    listed = []
    for tool in sorted(tools.values(), key=lambda t: (-t["calls"], t["tool"], t["server"])):
        ms = tool.pop("ms")
        tool["error_rate_percentage"] = _share(tool["errors"], tool["calls"])
        tool["errors_by_status"] = dict(sorted(tool["errors_by_status"].items()))
        tool["avg_latency_ms"] = round(ms / tool["calls"], 2)
        listed.append(tool)
    return {
        "tools": listed,
        "total_calls": sum(t["calls"] for t in listed),
        "total_errors": sum(t["errors"] for t in listed),
        "error_statuses": list(TOOL_ERROR_STATUSES),
    }


# -- rollout cohorts ------------------------------------------------------------------------------------------


def cohort_comparison(
    *, start: dt.datetime, end: dt.datetime, tenant_id: int | None, profile_id: int | None = None
) -> dict[str, Any]:
    """The ``multi_agent`` flag's two sides, side by side: ``{cohorts: [{cohort, messages, answers,
    conversations, handoffs, conversations_with_handoffs, handoff_rate_percentage, avg_judge_score,
    avg_latency_ms, p50_latency_ms, p95_latency_ms}], percentiles}`` — always both cohorts, multi_agent first.

    ``messages`` are user messages and ``answers`` assistant ones, by the cohort stored on the message;
    conversations (created in the window) and their handoffs (counted as in :func:`handoff_summary`) by the
    conversation's cohort. Turns the flag did not decide (blank cohort) are left out. Scores and latencies are
    the answers'; percentiles are PostgreSQL's ``percentile_cont`` (``percentiles`` is false and they are
    ``None`` on other databases). Four queries.
    """
    scope = {"start": start, "end": end, "tenant_id": tenant_id, "profile_id": profile_id}
    result = {
        cohort: {
            "cohort": cohort,
            "messages": 0,
            "answers": 0,
            "conversations": 0,
            "handoffs": 0,
            "conversations_with_handoffs": 0,
            "handoff_rate_percentage": 0.0,
            "avg_judge_score": None,
            "avg_latency_ms": None,
            "p50_latency_ms": None,
            "p95_latency_ms": None,
        }
        for cohort in COHORTS
    }
    messages = _through_conversation(Message.objects.filter(cohort__in=COHORTS), **scope)
    users = messages.filter(role=MessageRole.USER).values("cohort").annotate(n=Count("*"))
    for row in users:
        result[row["cohort"]]["messages"] = row["n"]
    answer_stats: dict[str, Any] = {
        "n": Count("*"),
        "judge": Avg("judge_score"),
        "latency": Avg("latency_ms"),
    }
    if percentiles_supported():
        answer_stats["p50"] = PercentileCont("latency_ms", fraction=0.5)
        answer_stats["p95"] = PercentileCont("latency_ms", fraction=0.95)
    for row in messages.filter(role=MessageRole.ASSISTANT).values("cohort").annotate(**answer_stats):
        item = result[row["cohort"]]
        item["answers"] = row["n"]
        item["avg_judge_score"] = _round(row["judge"], 3)
        item["avg_latency_ms"] = _round(row["latency"])
        item["p50_latency_ms"] = _round(row.get("p50"))
        item["p95_latency_ms"] = _round(row.get("p95"))
    conversations = _conversations(**scope).filter(cohort__in=COHORTS).values("cohort").annotate(n=Count("*"))
    for row in conversations:
        result[row["cohort"]]["conversations"] = row["n"]
    handoffs = (
        _counted(**scope, kinds=None)
        .filter(conversation__cohort__in=COHORTS)
        .values("conversation__cohort")
        .annotate(n=Count("*"), conversations=Count("conversation_id", distinct=True))
    )
    for row in handoffs:
        item = result[row["conversation__cohort"]]
        item["handoffs"] = row["n"]
        item["conversations_with_handoffs"] = row["conversations"]
    for item in result.values():
        item["handoff_rate_percentage"] = _share(item["conversations_with_handoffs"], item["conversations"])
    return {"cohorts": [result[cohort] for cohort in COHORTS], "percentiles": percentiles_supported()}
