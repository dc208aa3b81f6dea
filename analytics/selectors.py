"""Reads behind the analytics API and dashboard: every figure is aggregated in the database.

Every selector takes the same keyword-only filters and returns plain dicts and lists (JSON-ready):

* ``start``, ``end`` — aware datetimes, ``start <= created_at < end`` (see :mod:`analytics.filters`);
* ``tenant_id`` — one tenant's id, a set of tenants' ids (those a user is granted), or ``None`` for every tenant
  (:data:`tenants.selectors.TenantScope`; the caller decides who may ask for which);
* ``profile_id`` — one agent profile, or ``None`` for all;
* ``kinds`` (handoff selectors only) — the handoff kinds to count, or ``None`` for the selector's default.

The window's closed days are read from the daily totals and the rest (today) from the rows themselves
(:mod:`analytics.rollups`); either way the rows are grouped in SQL and Python only adds up grouped rows,
whose number is bounded by days, agents, kinds, statuses, methods or tools — never by the number of
handoffs or messages. The goal-mode figures (:mod:`analytics.goals`: one row per goal-mode answer and per plan step,
far fewer than messages) are read from their rows over the same window, on indexes that lead with the window and
hold every column read (``conversations.models.GoalRun``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, TypedDict, TypeVar

from django.db.models import Count, Model, QuerySet
from django.db.models.functions import Trunc

from agents.models import AgentProfile
from analytics.rollups import (
    CONVERSATIONS,
    HANDOFFS,
    LATENCIES,
    MESSAGES,
    ROUTE_METHODS,
    TOOL_CALLS,
    day_start,
    fact_rows,
    histogram_percentile,
    slice_where,
)
from analytics.services import window_open
from common.language import LANGUAGES
from conversations.models import MessageRole, ToolCallStatus
from handoffs.models import Handoff, HandoffKind, HandoffStatus, kinds_mask
from tenants.public import TenantScope, tenant_scope_where

M = TypeVar("M", bound=Model)


# What counts as a handoff: a move of the conversation that happened — between agents, or to, from or between remote
# backends (a backend move is recorded in place of the routing handoff it is). Returns end a delegation (they are the
# delegation endpoint's) and a supervisor's fan-out runs specialists in parallel, handing nothing over;
# stopped and refused moves did not happen (the loop-stops endpoint counts them).
COUNTED_KINDS: tuple[str, ...] = (
    HandoffKind.HANDOFF,
    HandoffKind.ROUTING,
    HandoffKind.DELEGATION,
    HandoffKind.BACKEND,
)


COHORTS: tuple[str, ...] = ("multi_agent", "single_agent")


# Shown even when nothing was routed that way, so that the mix reads the same from one window to the next.
CORE_METHODS: tuple[str, ...] = ("state", "keyword", "examples", "llm", "fallback")


FALLBACK_METHOD = "fallback"


# A call waiting for the user's permission is not an error (tool_call_stats counts it apart).
TOOL_ERROR_STATUSES: tuple[str, ...] = tuple(
    s for s in ToolCallStatus.values if s not in (ToolCallStatus.OK, ToolCallStatus.PERMISSION_REQUIRED)
)


NO_LANGUAGE = "none"  # language_mix's row of conversations whose language was never told (a blank column)


# How a specialist came to answer (agent_utilisation): chosen by routing, or the single-agent path's general agent.
ROUTED_PATH = "routed"


SINGLE_AGENT_PATH = "single_agent"


def percent(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0


def rounded(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def window_rows(
    rows: QuerySet[M],
    *,
    time_field: str,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
    tenant_path: str = "tenant_id",
) -> QuerySet[M]:
    """The rows of a table that repeats its turn's tenant, profile, cohort and version (handoffs, ratings, outcomes)
    whose ``time_field`` is in ``[start, end)``, in the scope asked; without the model's ordering (it would join the
    ``GROUP BY``). ``tenant_path``: where the row's tenant is (messages: ``conversation__tenant_id``)."""
    window = {f"{time_field}__gte": start, f"{time_field}__lt": end}
    rows = rows.filter(**window, **slice_where(cohort=cohort, version=version))
    rows = rows.filter(**tenant_scope_where(tenant_path, tenant_id))
    if profile_id is not None:
        rows = rows.filter(profile_id=profile_id)
    return rows.order_by()


def _handoffs(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None,
    cohort: str | None = None,
    version: int | str | None = None,
) -> QuerySet:
    return window_rows(
        Handoff.objects.all(),
        time_field="created_at",
        start=start,
        end=end,
        tenant_id=tenant_id,
        profile_id=profile_id,
        cohort=cohort,
        version=version,
    )


class _Scope(TypedDict):
    """The scope keywords of :func:`analytics.rollups.fact_rows`."""

    tenant_id: TenantScope
    profile_id: int | None
    cohort: str | None
    version: int | str | None


def _scope(tenant_id: TenantScope, profile_id: int | None, cohort: str | None, version: int | str | None) -> _Scope:
    return {"tenant_id": tenant_id, "profile_id": profile_id, "cohort": cohort, "version": version}


def _profile_names(rows: list[dict[str, Any]]) -> dict[int, str]:
    """The agent_id of every profile the grouped rows name (one query): agents are named within their profile,
    and two profiles may each have a ``billing_agent``."""
    ids = {row["profile_id"] for row in rows}
    if not ids:
        return {}
    return dict(AgentProfile.objects.filter(pk__in=ids).values_list("pk", "agent_id"))


def _per_agent(rows: list[dict[str, Any]], agent: str, names: dict[int, str]) -> list[dict[str, Any]]:
    """Rows grouped by profile_id and ``agent`` as ``[{profile, agent, count}]``: most first, then by name."""
    counts: dict[tuple[str, str], int] = {}
    for row in rows:
        key = (names[row["profile_id"]], row[agent])
        counts[key] = counts.get(key, 0) + row["n"]
    ranked = sorted(counts.items(), key=lambda item: (-item[1], *item[0]))
    return [{"profile": profile, "agent": name, "count": count} for (profile, name), count in ranked]


def _conversations_with(rows: list[dict[str, Any]], mask: int) -> tuple[int, int]:
    """``(conversations, of which with a completed move of a kind in mask)`` from rows grouped by handoff_kinds."""
    total = sum(row["n"] for row in rows)
    return total, sum(row["n"] for row in rows if row["handoff_kinds"] & mask)


def handoff_summary(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
    kinds: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The handoff analytics (``get_handoff_analytics``): ``{total_handoffs, handoff_paths: [{from, to, count}],
    conversations_with_handoffs, total_conversations, handoff_rate_percentage}``.

    ``total_handoffs`` and the paths count the completed moves of ``kinds`` (default :data:`COUNTED_KINDS`)
    made in the window. ``total_conversations`` are the conversations created in the window, and
    ``conversations_with_handoffs`` those of them that have had a completed move of ``kinds`` (whenever it
    happened), so the rate is the share of the window's conversations that were handed on (never over 100).
    Paths are sorted by count (most first), then from and to.
    """
    window = window_open(start, end)
    kinds = tuple(kinds or COUNTED_KINDS)
    grouped = fact_rows(
        HANDOFFS,
        window,
        by=("profile_id", "from_agent", "to_agent"),
        where={"status": HandoffStatus.COMPLETED, "kind__in": kinds},
        **_scope(tenant_id, profile_id, cohort, version),
    )
    names = _profile_names(grouped)
    paths = sorted(
        (
            {"profile": names[row["profile_id"]], "from": row["from_agent"], "to": row["to_agent"], "count": row["n"]}
            for row in grouped
        ),
        key=lambda path: (-path["count"], path["profile"], path["from"], path["to"]),
    )
    conversations = fact_rows(
        CONVERSATIONS, window, by=("handoff_kinds",), **_scope(tenant_id, profile_id, cohort, version)
    )
    total_conversations, with_handoffs = _conversations_with(conversations, kinds_mask(kinds))
    return {
        "total_handoffs": sum(path["count"] for path in paths),
        "handoff_paths": paths,
        "conversations_with_handoffs": with_handoffs,
        "total_conversations": total_conversations,
        "handoff_rate_percentage": percent(with_handoffs, total_conversations),
    }


def timeline_periods(start: dt.datetime, end: dt.datetime, bucket: str) -> list[dt.datetime]:
    """Every UTC day or hour (``bucket``) from the one holding ``start`` up to ``end``: a timeline's periods."""
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
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
    kinds: Sequence[str] | None = None,
    bucket: str = "day",
    now: dt.datetime | None = None,
) -> list[dict[str, Any]]:
    """Counted handoffs (as :func:`handoff_summary` counts them) per UTC day or hour:
    ``[{period, count, by_kind: {kind: count}}]``, oldest first.

    Every period from the window's start up to ``now`` (the window's end if sooner) is listed, empty ones
    with 0, and ``by_kind`` names every kind counted, so charts are continuous. ``period`` is ISO 8601.
    Days are read as :func:`handoff_summary` reads them; hours always from the handoff rows (the daily totals
    have no hours, and hourly windows are short).
    """
    if bucket not in ("day", "hour"):
        raise ValueError(f"bucket must be 'day' or 'hour', not {bucket!r}")
    kinds = tuple(kinds or COUNTED_KINDS)
    found: dict[dt.datetime, dict[str, int]] = {}
    if bucket == "day":
        grouped = fact_rows(
            HANDOFFS,
            window_open(start, end),
            by=("day", "kind"),
            where={"status": HandoffStatus.COMPLETED, "kind__in": kinds},
            **_scope(tenant_id, profile_id, cohort, version),
        )
        for row in grouped:
            found.setdefault(day_start(row["day"]), {})[row["kind"]] = row["n"]
    else:
        counted = _handoffs(
            start=start, end=end, tenant_id=tenant_id, profile_id=profile_id, cohort=cohort, version=version
        ).filter(status=HandoffStatus.COMPLETED, kind__in=kinds)
        grouped = (
            counted.annotate(period=Trunc("created_at", "hour", tzinfo=dt.UTC))
            .values("period", "kind")
            .annotate(count=Count("*"))
        )
        for row in grouped:
            found.setdefault(row["period"].astimezone(dt.UTC), {})[row["kind"]] = row["count"]
    until = min(end, now or dt.datetime.now(dt.UTC))
    timeline = []
    for period in timeline_periods(start, until, bucket):
        by_kind = {kind: found.get(period, {}).get(kind, 0) for kind in kinds}
        timeline.append({"period": period.isoformat(), "count": sum(by_kind.values()), "by_kind": by_kind})
    return timeline


def handoff_stops(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
    kinds: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Moves that did not happen: ``{total_stopped, by_outcome: [{outcome, count}], by_agent: [{profile, agent,
    count}], by_pair: [{profile, from, to, count, by_outcome: {outcome: count}}], total_refused,
    refused_by_agent: [{profile, agent, count}]}``.

    Stopped rows are loop safety's (outcome ping_pong, path_repeated, handoff_limit, step_limit); refused rows a
    target the agent may not reach (outcome not_allowed). ``agent`` and ``from`` are the agent that tried to
    move, ``to`` the agent it tried to reach (blank for a step_limit stop, which names none); agents are named
    within their profile. Lists are sorted by count, then name. ``kinds`` narrows to the kinds of move tried
    (default: all).
    """
    where: dict[str, Any] = {"status__in": [HandoffStatus.STOPPED, HandoffStatus.REFUSED]}
    if kinds:
        where["kind__in"] = list(kinds)
    grouped = fact_rows(
        HANDOFFS,
        window_open(start, end),
        by=("status", "outcome", "profile_id", "from_agent", "to_agent"),
        where=where,
        **_scope(tenant_id, profile_id, cohort, version),
    )
    names = _profile_names(grouped)
    stopped = [row for row in grouped if row["status"] == HandoffStatus.STOPPED]
    refused = [row for row in grouped if row["status"] != HandoffStatus.STOPPED]
    by_outcome: dict[str, int] = {}
    pairs: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in stopped:
        by_outcome[row["outcome"]] = by_outcome.get(row["outcome"], 0) + row["n"]
        key = (names[row["profile_id"]], row["from_agent"], row["to_agent"])
        pair = pairs.setdefault(key, {"profile": key[0], "from": key[1], "to": key[2], "count": 0, "by_outcome": {}})
        pair["count"] += row["n"]
        pair["by_outcome"][row["outcome"]] = pair["by_outcome"].get(row["outcome"], 0) + row["n"]
    by_pair = sorted(pairs.values(), key=lambda pair: (-pair["count"], pair["profile"], pair["from"], pair["to"]))
    for pair in by_pair:
        pair["by_outcome"] = dict(sorted(pair["by_outcome"].items()))
    return {
        "total_stopped": sum(by_outcome.values()),
        "by_outcome": ranked_counts(by_outcome, "outcome"),
        "by_agent": _per_agent(stopped, "from_agent", names),
        "by_pair": by_pair,
        "total_refused": sum(row["n"] for row in refused),
        "refused_by_agent": _per_agent(refused, "from_agent", names),
    }


def ranked_counts(counts: dict[str, int], name: str) -> list[dict[str, Any]]:
    return [{name: key, "count": count} for key, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]


def delegation_outcomes(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
) -> dict[str, Any]:
    """Delegated sub-conversations: ``{total_delegations, total_returns,
    returns_by_outcome: [{outcome, count, share_percentage}], returns_by_specialist: [{profile, agent, count}]}``.

    Delegations are completed ``delegation`` rows (a coordinator passed the conversation on); returns are
    ``return`` rows, whose outcome is the status the specialist ended with (completed, out_of_scope, ...).
    Shares are of the returns. Sorted by count, then name.
    """
    grouped = fact_rows(
        HANDOFFS,
        window_open(start, end),
        by=("kind", "outcome", "profile_id", "from_agent"),
        where={"status": HandoffStatus.COMPLETED, "kind__in": [HandoffKind.DELEGATION, HandoffKind.RETURN]},
        **_scope(tenant_id, profile_id, cohort, version),
    )
    delegations = 0
    by_outcome: dict[str, int] = {}
    returned = [row for row in grouped if row["kind"] != HandoffKind.DELEGATION]
    for row in grouped:
        if row["kind"] == HandoffKind.DELEGATION:
            delegations += row["n"]
        else:
            by_outcome[row["outcome"]] = by_outcome.get(row["outcome"], 0) + row["n"]
    returns = sum(by_outcome.values())
    return {
        "total_delegations": delegations,
        "total_returns": returns,
        "returns_by_outcome": [
            {**item, "share_percentage": percent(item["count"], returns)}
            for item in ranked_counts(by_outcome, "outcome")
        ],
        "returns_by_specialist": _per_agent(returned, "from_agent", _profile_names(returned)),
    }


def handoff_list_recent(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
    kinds: Sequence[str] | None = None,
    limit: int = 20,
) -> list[dict[str, Any]]:
    """The latest ``limit`` handoff rows of the window, newest first, of every status (stops and refusals
    included) and of ``kinds`` (default: all): ``[{id, conversation_id, conversation_key, tenant, profile,
    from_agent, to_agent, kind, status, outcome, reason, created_at}]``. One query, on the rows themselves."""
    rows = _handoffs(start=start, end=end, tenant_id=tenant_id, profile_id=profile_id, cohort=cohort, version=version)
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


def agent_utilisation(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
) -> list[dict[str, Any]]:
    """Agent utilisation: answered turns (assistant messages) per specialist of a profile and per
    path, ``[{profile, agent, path, turns, share_percentage}]``, most turns first, then by profile, agent, path.

    ``path`` tells how the specialist came to answer: ``routed`` (the router, a handoff or a supervisor chose it:
    the multi_agent cohort, or a turn the flag did not decide) or ``single_agent`` (the flag's single_agent
    cohort, where the profile's general specialist answers every message whatever the router chose: not
    fallback routing, which :func:`route_method_mix` counts). Shares are of every answered turn listed.
    """
    grouped = fact_rows(
        MESSAGES,
        window_open(start, end),
        by=("profile_id", "agent", "cohort"),
        where={"role": MessageRole.ASSISTANT},
        **_scope(tenant_id, profile_id, cohort, version),
    )
    names = _profile_names(grouped)
    turns: dict[tuple[str, str, str], int] = {}
    for row in grouped:
        path = SINGLE_AGENT_PATH if row["cohort"] == SINGLE_AGENT_PATH else ROUTED_PATH
        key = (names[row["profile_id"]], row["agent"], path)
        turns[key] = turns.get(key, 0) + row["n"]
    total = sum(turns.values())
    return [
        {"profile": profile, "agent": agent, "path": path, "turns": n, "share_percentage": percent(n, total)}
        for (profile, agent, path), n in sorted(turns.items(), key=lambda item: (-item[1], *item[0]))
    ]


def route_method_mix(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
) -> dict[str, Any]:
    """How messages were routed: ``{methods: [{method, count, share_percentage}], fallback_rate_percentage,
    total}`` over the stored route decisions. The core methods (state, keyword, examples, llm, fallback) are listed even
    at 0; the others (followup, coordinator, sub_conversation, permission) when they occur. Sorted by count,
    then name."""
    counts = dict.fromkeys(CORE_METHODS, 0)
    for row in fact_rows(
        ROUTE_METHODS, window_open(start, end), by=("method",), **_scope(tenant_id, profile_id, cohort, version)
    ):
        counts[row["method"]] = row["n"]
    total = sum(counts.values())
    return {
        "methods": [
            {**item, "share_percentage": percent(item["count"], total)} for item in ranked_counts(counts, "method")
        ],
        "fallback_rate_percentage": percent(counts[FALLBACK_METHOD], total),
        "total": total,
    }


def tool_call_stats(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
) -> dict[str, Any]:
    """MCP tool calls per tool: ``{tools: [{tool, server, calls, ok, permission_asks, errors,
    error_rate_percentage, errors_by_status: {status: count}, avg_latency_ms}], total_calls,
    total_permission_asks, total_errors, error_statuses}``.

    A permission ask (status ``permission_required``: the call waits for the user's agreement and runs, as
    another call, once given) is not an error: it is counted apart and left out of the error rate and the
    latency. An error is any other status but ``ok`` (:data:`TOOL_ERROR_STATUSES`: error, timeout,
    invalid_arguments, unavailable, not_offered). ``error_rate_percentage`` is of the calls that were not
    asks, and ``avg_latency_ms`` averages them (calls that never reached the server count with their ~0 ms;
    ``None`` when every call was an ask). Most calls first, then by name.
    """
    grouped = fact_rows(
        TOOL_CALLS,
        window_open(start, end),
        by=("tool", "server", "status"),
        **_scope(tenant_id, profile_id, cohort, version),
    )
    tools: dict[tuple[str, str], dict[str, Any]] = {}
    for row in grouped:
        tool = tools.setdefault(
            (row["tool"], row["server"]),
            {"tool": row["tool"], "server": row["server"], "calls": 0, "ok": 0, "permission_asks": 0, "errors": 0}
            | {"errors_by_status": {}, "ms": 0.0},
        )
        tool["calls"] += row["n"]
        tool["ms"] += row["latency_sum"]
        if row["status"] == ToolCallStatus.OK:
            tool["ok"] += row["n"]
        elif row["status"] == ToolCallStatus.PERMISSION_REQUIRED:
            tool["permission_asks"] += row["n"]
        else:
            tool["errors"] += row["n"]
            tool["errors_by_status"][row["status"]] = row["n"]
    listed = []
    for tool in sorted(tools.values(), key=lambda t: (-t["calls"], t["tool"], t["server"])):
        ms, ran = tool.pop("ms"), tool["calls"] - tool["permission_asks"]
        tool["error_rate_percentage"] = percent(tool["errors"], ran)
        tool["errors_by_status"] = dict(sorted(tool["errors_by_status"].items()))
        tool["avg_latency_ms"] = round(ms / ran, 2) if ran else None
        listed.append(tool)
    return {
        "tools": listed,
        "total_calls": sum(t["calls"] for t in listed),
        "total_permission_asks": sum(t["permission_asks"] for t in listed),
        "total_errors": sum(t["errors"] for t in listed),
        "error_statuses": list(TOOL_ERROR_STATUSES),
    }


class _LanguageFigures(TypedDict):
    """One language of :func:`language_mix`."""

    language: str
    conversations: int
    messages: int
    answers: int
    avg_judge_score: float | None
    routed: int
    fallbacks: int
    fallback_rate_percentage: float


def language_mix(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
) -> dict[str, Any]:
    """The traffic per conversation language: ``{languages: [{language, conversations, messages, answers,
    avg_judge_score, routed, fallbacks, fallback_rate_percentage}]}`` — every language of the platform
    (:data:`common.language.LANGUAGES`, in its order) even at 0, then :data:`NO_LANGUAGE` when some
    conversation's language was never told.

    ``conversations`` are those created in the window; ``messages`` (user messages), ``answers`` (assistant
    ones, their judge scores averaged) and ``routed`` (stored route decisions, ``fallbacks`` those the fallback
    made, their share ``fallback_rate_percentage``) those of the window, each under the language its turn was read
    in (the conversation's when the turn was written: a conversation that changes language keeps its earlier
    messages under the earlier one); ``conversations`` under their language as it is now.
    """
    window = window_open(start, end)
    scope = _scope(tenant_id, profile_id, cohort, version)
    found: dict[str, _LanguageFigures] = {}

    def figures(column: str) -> _LanguageFigures:
        language = column or NO_LANGUAGE
        if language not in found:
            found[language] = {
                "language": language,
                "conversations": 0,
                "messages": 0,
                "answers": 0,
                "avg_judge_score": None,
                "routed": 0,
                "fallbacks": 0,
                "fallback_rate_percentage": 0.0,
            }
        return found[language]

    for language in LANGUAGES:
        figures(language)
    for row in fact_rows(CONVERSATIONS, window, by=("language",), **scope):
        figures(row["language"])["conversations"] += row["n"]
    # User messages and answers apart: each reads today's rows through its own partial index (as cohort_comparison).
    for row in fact_rows(MESSAGES, window, by=("language",), where={"role": MessageRole.USER}, **scope):
        figures(row["language"])["messages"] += row["n"]
    for row in fact_rows(MESSAGES, window, by=("language",), where={"role": MessageRole.ASSISTANT}, **scope):
        item = figures(row["language"])
        item["answers"] += row["n"]
        item["avg_judge_score"] = rounded(row["judge_sum"] / row["judge_n"], 3) if row["judge_n"] else None
    for row in fact_rows(ROUTE_METHODS, window, by=("language", "method"), **scope):
        item = figures(row["language"])
        item["routed"] += row["n"]
        if row["method"] == FALLBACK_METHOD:
            item["fallbacks"] += row["n"]
    for item in found.values():
        item["fallback_rate_percentage"] = percent(item["fallbacks"], item["routed"])
    known = [found[language] for language in LANGUAGES]
    others = sorted((item for key, item in found.items() if key not in LANGUAGES), key=lambda item: item["language"])
    return {"languages": [*known, *others]}


class _CohortFigures(TypedDict):
    """One cohort of :func:`cohort_comparison`."""

    cohort: str
    messages: int
    answers: int
    conversations: int
    handoffs: int
    conversations_with_handoffs: int
    handoff_rate_percentage: float
    avg_judge_score: float | None
    avg_latency_ms: float | None
    p50_latency_ms: float | None
    p95_latency_ms: float | None


def cohort_comparison(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
) -> dict[str, Any]:
    """The ``multi_agent`` flag's two sides, side by side: ``{cohorts: [{cohort, messages, answers,
    conversations, handoffs, conversations_with_handoffs, handoff_rate_percentage, avg_judge_score,
    avg_latency_ms, p50_latency_ms, p95_latency_ms}], percentiles}`` — always both cohorts, multi_agent first.

    ``messages`` are user messages and ``answers`` assistant ones, and ``handoffs`` the moves counted as in
    :func:`handoff_summary`, each by the cohort of the turn that wrote it; ``conversations`` are those created
    in the window, and ``conversations_with_handoffs`` those of them with a counted move, by the conversation's
    cohort. Turns the flag did not decide (blank cohort) are left out. Scores and latencies are the answers';
    p50 and p95 are read from latency buckets 5 % wide (:func:`analytics.rollups.histogram_percentile`), within
    5 % of the exact value, on every database (``percentiles`` is always true).
    """
    window = window_open(start, end)
    scope = _scope(tenant_id, profile_id, cohort, version)
    result: dict[str, _CohortFigures] = {
        side: {
            "cohort": side,
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
        for side in COHORTS
    }
    in_cohorts = {"cohort__in": COHORTS}
    # User messages and answers apart: each reads today's rows through its own partial index (routing.Message).
    users, answers = ({**in_cohorts, "role": role} for role in (MessageRole.USER, MessageRole.ASSISTANT))
    for row in fact_rows(MESSAGES, window, by=("cohort",), where=users, **scope):
        result[row["cohort"]]["messages"] = row["n"]
    for row in fact_rows(MESSAGES, window, by=("cohort",), where=answers, **scope):
        item = result[row["cohort"]]
        item["answers"] = row["n"]
        item["avg_judge_score"] = rounded(row["judge_sum"] / row["judge_n"], 3) if row["judge_n"] else None
        item["avg_latency_ms"] = rounded(row["latency_sum"] / row["latency_n"]) if row["latency_n"] else None
    buckets: dict[str, dict[int, int]] = {side: {} for side in COHORTS}
    for row in fact_rows(LATENCIES, window, by=("cohort", "bucket"), where=in_cohorts, **scope):
        buckets[row["cohort"]][row["bucket"]] = row["n"]
    for side, counts in buckets.items():
        result[side]["p50_latency_ms"] = rounded(histogram_percentile(counts, 0.5))
        result[side]["p95_latency_ms"] = rounded(histogram_percentile(counts, 0.95))
    counted = {"status": HandoffStatus.COMPLETED, "kind__in": COUNTED_KINDS}
    for row in fact_rows(HANDOFFS, window, by=("cohort",), where={**in_cohorts, **counted}, **scope):
        result[row["cohort"]]["handoffs"] = row["n"]
    conversations = fact_rows(CONVERSATIONS, window, by=("cohort", "handoff_kinds"), where=in_cohorts, **scope)
    for side in COHORTS:
        item = result[side]
        rows = [row for row in conversations if row["cohort"] == side]
        item["conversations"], item["conversations_with_handoffs"] = _conversations_with(
            rows, kinds_mask(COUNTED_KINDS)
        )
        item["handoff_rate_percentage"] = percent(item["conversations_with_handoffs"], item["conversations"])
    return {"cohorts": [result[side] for side in COHORTS], "percentiles": True}
