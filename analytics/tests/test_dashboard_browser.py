"""The analytics dashboard in a real browser: Debian's Chromium driven by Playwright against ``live_server``.

Chromium comes from ``scripts/bootstrap --with-chromium`` (``scripts/test`` asks for it); Playwright starts that
binary (``executable_path``) and never downloads a browser of its own. Without Chromium the tests skip on a
developer's machine and fail under ``CI=true``.

The data is built by hand (:func:`build_traffic`), and each figure the page shows is checked twice: against
what the analytics API answers for the same filters and session, and against the count worked out below.
A screenshot of the drawn dashboard goes to ``test-output/screenshots/``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import pytest
from django.utils import timezone

from agents.models import AgentProfile
from conversations.goals.records import goal_rows_create
from conversations.models import (
    Conversation,
    ConversationOutcome,
    GoalRun,
    GoalStepRun,
    Message,
    RouteDecisionRecord,
    ToolCall,
)
from conversations.tests import goal_examples
from conversations.tests.stored_turns import conversation_of, stored_turn
from handoffs.models import KIND_BITS, PERSON, Handoff
from releases.models import RolloutPlan
from routing.models import RoutingVersion
from tenants.models import Tenant
from tests.browser_fixtures import screenshot_path, submit_login
from tests.factories import AgentProfileFactory

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SCREENSHOT = "analytics-dashboard.png"
CHARTS = (
    "chart-outcomes",
    "chart-timeline",
    "chart-paths",
    "chart-agents",
    "chart-methods",
    "chart-cohorts",
    "chart-languages",
    "chart-goals",
    "chart-usage",
)
DASHBOARD = "/analytics/"
LANGUAGE_SHOWN = ("language", "conversations", "messages", "answers", "avg_judge_score")
API = "/api/analytics/"


# -- the hand-built traffic ------------------------------------------------------------------------------------


@dataclass
class Traffic:
    """Two tenants' handoffs, by UTC days back from today (``D2`` = two days ago).

    ======  ======  ======  ============  =================================================================
    conv    tenant  day     cohort        handoffs (all completed, all counted)
    ======  ======  ======  ============  =================================================================
    a1      A       D2      multi_agent   billing→orders handoff 10:05; orders→billing routing_handoff 10:10
    a2      A       D3      single_agent  billing→support handoff 09:00
    a3      A       D4      multi_agent   —
    b1      B       D2      multi_agent   product→support handoff ×3, 08:00–08:02
    a_old   A       D45     multi_agent   billing→orders handoff; support→billing delegation
    ======  ======  ======  ============  =================================================================

    Last 30 days, every tenant: 6 handoffs, 3 of 4 conversations (75 %). Last 90 days: 8, 4 of 5 (80 %).
    D45 alone: 2, 1 of 1 (100 %). Tenant A, last 30 days: 3, 2 of 3 (66.67 %).

    Goal-mode answers (conversations/tests/goal_examples.py) in a1: quote_and_notify (success) and
    ambiguous_quote (clarification) on D2; in b1: failed_movers (failure) on D2.

    Languages: a1 and a_old pt, a2 en, a3 and b1 es.

    Routing versions (each conversation's turns and moves): a1, a3 version 2; a2, a_old version 1; b1 none (a
    draft). a1 also has a ping_pong stop billing→orders and a tool call that waited for the user's permission;
    a2's answer is the single-agent path's general agent (support_agent).

    Outcomes: a1 resolved on D2 (two answers rated up, one down), a2 handed to a person on D3 from support_agent, a3
    abandoned on D3; b1 abandoned on D2; a_old resolved on D45.
    """

    today: dt.date
    tenant_a: Tenant
    tenant_b: Tenant
    profile: AgentProfile
    conversations: dict[str, Conversation] = field(default_factory=dict)

    def day(self, days_ago: int) -> str:
        return (self.today - dt.timedelta(days=days_ago)).isoformat()


def _dated(obj: Any, when: dt.datetime) -> Any:
    type(obj).objects.filter(pk=obj.pk).update(created_at=when)  # created_at is auto_now_add
    obj.created_at = when
    return obj


def build_traffic(*, tenant_a: Tenant, tenant_b: Tenant) -> Traffic:
    today = timezone.now().astimezone(dt.UTC).date()
    traffic = Traffic(
        today=today, tenant_a=tenant_a, tenant_b=tenant_b, profile=AgentProfileFactory(agent_id="telecom_contas")
    )

    def at(days_ago: int, clock: str) -> dt.datetime:
        hour, minute = (int(part) for part in clock.split(":"))
        return dt.datetime.combine(today - dt.timedelta(days=days_ago), dt.time(hour, minute), tzinfo=dt.UTC)

    versions: dict[int, int | None] = {}

    languages = {"a1": "pt", "a2": "en", "a3": "es", "b1": "es", "a_old": "pt"}

    def conversation(name: str, tenant: Tenant, when: dt.datetime, cohort: str, version: int | None) -> Conversation:
        row = Conversation.objects.create(
            tenant=tenant,
            profile=traffic.profile,
            session_id=name,
            conversation_key=f"{tenant.slug}:{traffic.profile.agent_id}:{name}",
            cohort=cohort,
            language=languages[name],
        )
        traffic.conversations[name] = _dated(row, when)
        versions[row.pk] = version
        return row

    def handoff(
        conv: Conversation, from_agent: str, to_agent: str, kind: str, when: dt.datetime, stop: str = ""
    ) -> None:
        row = Handoff.objects.create(
            conversation=conv,
            tenant_id=conv.tenant_id,
            profile_id=conv.profile_id,
            from_agent=from_agent,
            to_agent=to_agent,
            kind=kind,
            status="stopped" if stop else "completed",
            outcome=stop,
            cohort=conv.cohort,
            routing_version=versions[conv.pk],
            reason=f"{from_agent} hands over to {to_agent}",
        )
        _dated(row, when)
        if stop:
            return
        conv.handoff_kinds |= KIND_BITS[kind]  # as a turn recording a move does (turn_store.turn_persist)
        Conversation.objects.filter(pk=conv.pk).update(handoff_kinds=conv.handoff_kinds)

    def turn(conv: Conversation, when: dt.datetime, agent: str, method: str, latency: float, judge: float) -> None:
        version = versions[conv.pk]
        question = Message.objects.create(
            conversation=conv, role="user", content="Minha fatura", cohort=conv.cohort, routing_version=version
        )
        if conv.routing_version != version:  # the first turn gives the conversation its version (records.py)
            conv.routing_version = version
            Conversation.objects.filter(pk=conv.pk).update(routing_version=version)
        answer = Message.objects.create(
            conversation=conv,
            role="assistant",
            agent=agent,
            content="Resposta",
            cohort=conv.cohort,
            routing_version=version,
            latency_ms=latency,
            judge_score=judge,
            llm_model="gpt-4o-mini",  # the usage section's figures
            prompt_tokens=1000,
            completion_tokens=200,
        )
        decision = RouteDecisionRecord.objects.create(
            conversation=conv, message=answer, mode="router", route=agent, agent=agent, intent="x", method=method
        )
        for row in (question, answer, decision):
            _dated(row, when)

    a1 = conversation("a1", tenant_a, at(2, "10:00"), "multi_agent", 2)
    a2 = conversation("a2", tenant_a, at(3, "09:00"), "single_agent", 1)
    a3 = conversation("a3", tenant_a, at(4, "11:00"), "multi_agent", 2)
    b1 = conversation("b1", tenant_b, at(2, "08:00"), "multi_agent", None)
    old = conversation("a_old", tenant_a, at(45, "12:00"), "multi_agent", 1)

    handoff(a1, "billing_agent", "orders_agent", "handoff", at(2, "10:05"))
    handoff(a1, "orders_agent", "billing_agent", "routing_handoff", at(2, "10:10"))
    handoff(a2, "billing_agent", "support_agent", "handoff", at(3, "09:00"))
    for minute in range(3):
        handoff(b1, "product_agent", "support_agent", "handoff", at(2, f"08:0{minute}"))
    handoff(old, "billing_agent", "orders_agent", "handoff", at(45, "12:05"))
    handoff(old, "support_agent", "billing_agent", "delegation", at(45, "12:10"))
    handoff(a1, "billing_agent", "orders_agent", "handoff", at(2, "10:11"), stop="ping_pong")

    turn(a1, at(2, "10:00"), "billing_agent", "keyword", 120.0, 0.9)
    turn(a1, at(2, "10:06"), "orders_agent", "keyword", 180.0, 0.7)
    turn(a2, at(3, "09:00"), "support_agent", "fallback", 60.0, 0.5)
    turn(a3, at(4, "11:00"), "billing_agent", "state", 100.0, 0.8)
    turn(b1, at(2, "08:00"), "product_agent", "llm", 300.0, 0.6)
    turn(old, at(45, "12:00"), "billing_agent", "keyword", 90.0, 1.0)
    goal_answer(a1, goal_examples.quote_and_notify(), at(2, "10:20"))
    goal_answer(a1, goal_examples.ambiguous_quote(), at(2, "10:30"))
    goal_answer(b1, goal_examples.failed_movers(), at(2, "08:30"))
    for conv, outcome, when, agent, up, down in (
        (a1, "resolved", at(2, "10:40"), "orders_agent", 2, 1),
        (a2, "escalated", at(3, "09:10"), "support_agent", 0, 0),
        (a3, "abandoned", at(3, "11:40"), "billing_agent", 0, 0),
        (b1, "abandoned", at(2, "08:40"), "product_agent", 0, 0),
        (old, "resolved", at(45, "12:40"), "billing_agent", 0, 0),
    ):
        ConversationOutcome.objects.create(
            conversation=conv,
            tenant_id=conv.tenant_id,
            profile_id=conv.profile_id,
            outcome=outcome,
            cohort=conv.cohort,
            routing_version=versions[conv.pk],
            intent="x",
            agent=agent,
            rated_up=up,
            rated_down=down,
            started_at=conv.created_at,
            decided_at=when,
        )
        if outcome == "escalated":
            handoff(conv, agent, PERSON, "human", when)
    first_answer = Message.objects.filter(conversation=a1, role="assistant").order_by("id").first()
    calls = ((at(2, "10:01"), "ok"), (at(2, "10:02"), "error"), (at(2, "10:03"), "permission_required"))
    for when, status in calls:
        call = ToolCall.objects.create(
            conversation=a1,
            message=first_answer,
            agent="billing_agent",
            tool="consultar_fatura",
            server="telecom",
            status=status,
        )
        _dated(call, when)
    return traffic


def goal_answer(conv: Conversation, goal: dict[str, Any], when: dt.datetime) -> GoalRun:
    """A goal-mode answer, recorded by the product's own writer and dated ``when``."""
    message = Message.objects.create(
        conversation=conv, role="assistant", agent="finance", content="…", metadata={"goal": goal}
    )
    run = goal_rows_create(message=message, goal=goal, tenant_id=conv.tenant_id, profile_id=conv.profile_id)
    _dated(message, when)
    _dated(run, when)
    GoalStepRun.objects.filter(run=run).update(created_at=when)
    return run


@pytest.fixture
def traffic(tenant, outsider) -> Traffic:
    return build_traffic(tenant_a=tenant, tenant_b=outsider)


# -- reading the page --------------------------------------------------------------------------------------------


def log_in(page, base_url: str, *, username: str, password: str, next_path: str = DASHBOARD) -> None:
    """Through the admin's login form, as a person would: the dashboard sends anonymous visitors there."""
    page.goto(base_url + next_path)
    assert "/admin/login/" in page.url
    submit_login(page, username, password)


def wait_until_drawn(page, query: str) -> None:
    """Until the page has drawn the answers for ``query`` and every chart it shows has finished animating."""
    page.wait_for_function(
        """query => {
            const root = document.getElementById("content-main");
            if (!root || root.dataset.state === "loading" || root.dataset.query !== query) return false;
            const charts = [...document.querySelectorAll(".analytics-chart")].filter(chart => !chart.hidden);
            return charts.every(chart => chart.dataset.rendered === "true");
        }""",
        arg=query,
    )
    assert page.get_attribute("#content-main", "data-state") == "ready", page.inner_text("#analytics-error")


def api(page, base_url: str, path: str, params: dict[str, Any]) -> Any:
    """The analytics API, asked with the page's own session cookie."""
    response = page.request.get(f"{base_url}{API}{path}?{urlencode(params)}")
    assert response.status == 200, response.text()
    return response.json()


def figure(page, element_id: str) -> float:
    return float(page.get_attribute(f"#{element_id}", "data-value"))


def rows(page, table_id: str, *attributes: str) -> list[tuple[str, ...]]:
    found = page.eval_on_selector_all(
        f"#{table_id} tbody tr:not(.analytics-empty)",
        "(rows, names) => rows.map(row => names.map(name => row.getAttribute('data-' + name)))",
        list(attributes),
    )
    return [tuple(row) for row in found]


def chart_option(page, chart_id: str) -> dict:
    """What ECharts holds for the chart (its data, not the pixels), after checking that it drew a canvas."""
    assert page.locator(f"#{chart_id} canvas").count() >= 1, chart_id
    return page.evaluate(
        """id => {
            const chart = echarts.getInstanceByDom(document.getElementById(id));
            const option = chart.getOption();
            return {series: option.series.map(series => ({type: series.type, data: series.data, links: series.links}))};
        }""",
        chart_id,
    )


def assert_page_shows(page, base_url: str, params: dict[str, Any]) -> dict:
    """Every figure on the page, and the charts' data, equal what the API answers for ``params``."""
    summary = api(page, base_url, "handoffs", params)
    assert figure(page, "kpi-total-handoffs") == summary["total_handoffs"]
    assert page.inner_text("#kpi-total-handoffs") == f"{summary['total_handoffs']:,}"
    assert figure(page, "kpi-handoff-rate") == summary["handoff_rate_percentage"]
    assert figure(page, "kpi-conversations-with-handoffs") == summary["conversations_with_handoffs"]
    assert figure(page, "kpi-total-conversations") == summary["total_conversations"]
    expected_paths = [(p["profile"], p["from"], p["to"], str(p["count"])) for p in summary["handoff_paths"]]
    assert rows(page, "table-paths", "profile", "from", "to", "count") == expected_paths

    if summary["handoff_paths"]:
        sankey = chart_option(page, "chart-paths")["series"][0]
        assert sankey["type"] == "sankey"
        drawn = sorted((link["source"], link["target"], link["value"]) for link in sankey["links"])
        assert drawn == sorted((f"from|{p['from']}", f"to|{p['to']}", p["count"]) for p in summary["handoff_paths"])

    bucket = page.get_attribute("#content-main", "data-bucket")
    timeline = api(page, base_url, "handoffs/timeline", {**params, "bucket": bucket})
    assert rows(page, "table-timeline", "period", "count") == [(t["period"], str(t["count"])) for t in timeline[::-1]]
    if summary["total_handoffs"]:
        stacks = chart_option(page, "chart-timeline")["series"]
        drawn_per_period = [sum(series["data"][i][1] for series in stacks) for i in range(len(timeline))]
        assert drawn_per_period == [t["count"] for t in timeline]

    agents = api(page, base_url, "agents", params)
    shown_agents = rows(page, "table-agents", "profile", "agent", "path", "turns", "share")
    assert [
        (profile, agent, path, int(turns), float(share)) for profile, agent, path, turns, share in shown_agents
    ] == [(a["profile"], a["agent"], a["path"], a["turns"], a["share_percentage"]) for a in agents]
    if agents:
        bars = chart_option(page, "chart-agents")["series"][0]["data"]
        values = [bar["value"] if isinstance(bar, dict) else bar for bar in bars]
        assert sorted(values) == sorted(a["share_percentage"] for a in agents)

    methods = api(page, base_url, "routing-methods", params)
    assert figure(page, "kpi-fallback-rate") == methods["fallback_rate_percentage"]
    assert figure(page, "kpi-routing-total") == methods["total"]
    shown_methods = rows(page, "table-methods", "method", "count")
    assert shown_methods == [(m["method"], str(m["count"])) for m in methods["methods"]]

    cohorts = api(page, base_url, "cohorts", params)["cohorts"]
    for cohort in cohorts:
        for measure in ("messages", "handoff_rate_percentage", "avg_judge_score", "avg_latency_ms"):
            shown = page.get_attribute(
                f'#table-cohorts tr[data-measure="{measure}"] td[data-cohort="{cohort["cohort"]}"]', "data-value"
            )
            assert (float(shown) if shown else None) == cohort[measure], (cohort["cohort"], measure)

    languages = api(page, base_url, "languages", params)["languages"]
    measures = ("language", "conversations", "messages", "answers", "avg-judge-score", "fallback-rate-percentage")
    shown_languages = rows(page, "table-languages", *measures)
    if any(item["conversations"] or item["messages"] or item["routed"] for item in languages):
        assert [
            (language, int(n), int(messages), int(answers), float(judge) if judge else None, float(fallbacks))
            for language, n, messages, answers, judge, fallbacks in shown_languages
        ] == [tuple(item[key] for key in (*LANGUAGE_SHOWN, "fallback_rate_percentage")) for item in languages]
        bars = chart_option(page, "chart-languages")["series"]
        assert [series["data"] for series in bars] == [
            [item[measure] for item in languages] for measure in ("conversations", "messages", "answers")
        ]
    else:
        assert shown_languages == []

    stops = api(page, base_url, "loop-stops", params)
    assert figure(page, "kpi-loop-stops") == stops["total_stopped"]
    assert rows(page, "table-stops-pair", "profile", "from", "to", "count") == [
        (p["profile"], p["from"], p["to"], str(p["count"])) for p in stops["by_pair"]
    ]
    tools = api(page, base_url, "tools", params)
    assert figure(page, "tools-calls") == tools["total_calls"]
    assert figure(page, "tools-permission-asks") == tools["total_permission_asks"]
    assert figure(page, "tools-errors") == tools["total_errors"]
    shown_tools = rows(page, "table-tools", "tool", "calls", "permission-asks", "errors", "error-rate-percentage")
    assert [
        (tool, int(calls), int(asks), int(errors), float(rate)) for tool, calls, asks, errors, rate in shown_tools
    ] == [
        (t["tool"], t["calls"], t["permission_asks"], t["errors"], t["error_rate_percentage"]) for t in tools["tools"]
    ]
    usage = api(page, base_url, "usage", params)
    assert figure(page, "usage-answers") == usage["totals"]["answers"]
    assert figure(page, "usage-tokens") == usage["totals"]["total_tokens"]
    assert rows(page, "table-usage", "day", "tenant", "profile", "model", "answers") == [
        (r["day"], r["tenant"], r["profile"], r["model"], str(r["answers"])) for r in usage["rows"]
    ]
    delegations = api(page, base_url, "delegations", params)
    assert figure(page, "delegations-total") == delegations["total_delegations"]

    goals = api(page, base_url, "goals", params)
    summary_of_goals = goals["summary"]
    assert figure(page, "goals-runs") == summary_of_goals["runs"]
    assert figure(page, "goals-clarification-rate") == summary_of_goals["clarification_rate_percentage"]
    assert figure(page, "goals-failure-rate") == summary_of_goals["failure_rate_percentage"]
    if summary_of_goals["plans_run"]:
        assert figure(page, "goals-p95") == summary_of_goals["p95_plan_latency_ms"]
    assert rows(page, "table-goals", "domain", "goal", "runs") == [
        (g["domain"], g["goal"], str(g["runs"])) for g in goals["goals"]
    ]
    assert rows(page, "table-capabilities", "capability", "steps", "failures") == [
        (c["capability"], str(c["steps"]), str(c["failures"])) for c in goals["capabilities"]
    ]
    if goals["goals"]:
        stacks = chart_option(page, "chart-goals")["series"]
        drawn = sorted(sum(series["data"][i] for series in stacks) for i in range(len(goals["goals"])))
        assert drawn == sorted(g["runs"] for g in goals["goals"])

    recent = api(page, base_url, "handoffs/recent", {**params, "limit": 20})
    assert rows(page, "table-recent", "handoff-id") == [(str(r["id"]),) for r in recent]
    return summary


# -- the tests ---------------------------------------------------------------------------------------------------


def test_staff_see_the_dashboard_drawn_with_the_apis_numbers_filter_it_and_open_a_conversation(
    live_server, browser_page, staff_user, traffic
):
    page, base = browser_page, live_server.url
    log_in(page, base, username="analyst", password="analyst-password")
    assert page.url == base + DASHBOARD

    wait_until_drawn(page, "days=30")
    for chart_id in CHARTS:
        assert page.evaluate("id => !!echarts.getInstanceByDom(document.getElementById(id))", chart_id), chart_id
    summary = assert_page_shows(page, base, {"days": 30})
    assert (summary["total_handoffs"], summary["conversations_with_handoffs"], summary["total_conversations"]) == (
        6,
        3,
        4,
    )
    assert summary["handoff_rate_percentage"] == 75.0
    assert page.inner_text("#kpi-handoff-rate") == "75 %"
    assert (figure(page, "goals-runs"), figure(page, "goals-clarification-rate")) == (3, 33.33)
    assert rows(page, "table-paths", "from", "to", "count")[0] == ("product_agent", "support_agent", "3")
    # What misled before: a permission ask is not an error (1 error of the 2 calls that ran, not 2 of 3), a2's
    # support_agent answer is the single-agent path and not routing, and the loop stop shows its pair.
    assert rows(page, "table-tools", "tool", "permission-asks", "errors", "error-rate-percentage") == [
        ("consultar_fatura", "1", "1", "50")
    ]
    assert ("telecom_contas", "support_agent", "single_agent") in rows(page, "table-agents", "profile", "agent", "path")
    assert page.locator("#agents-note", has_text="not fallback routing").count() == 1
    assert rows(page, "table-stops-pair", "from", "to", "count") == [("billing_agent", "orders_agent", "1")]
    # Per language: a1 (two turns, keyword); a2 (one turn, the fallback); a3 and b1 (a turn each, state and llm).
    assert rows(page, "table-languages", "language", "conversations", "messages", "fallback-rate-percentage") == [
        ("pt", "1", "2", "0"),
        ("es", "2", "2", "0"),
        ("en", "1", "1", "100"),
    ]
    assert page.locator("#table-languages", has_text="Portuguese").count() == 1
    page.screenshot(path=str(screenshot_path(SCREENSHOT)), full_page=True)

    page.click("button.analytics-preset[data-days='90']")
    wait_until_drawn(page, "days=90")
    assert "days=90" in page.url
    summary = assert_page_shows(page, base, {"days": 90})
    assert (summary["total_handoffs"], summary["total_conversations"], summary["handoff_rate_percentage"]) == (8, 5, 80)

    page.fill("#filter-start", traffic.day(45))
    page.fill("#filter-end", traffic.day(45))
    page.click("#filter-apply")
    query = urlencode({"start": traffic.day(45), "end": traffic.day(45)})
    wait_until_drawn(page, query)
    summary = assert_page_shows(page, base, {"start": traffic.day(45), "end": traffic.day(45)})
    assert summary["total_handoffs"] == 2
    assert rows(page, "table-paths", "profile", "from", "to", "count") == [
        ("telecom_contas", "billing_agent", "orders_agent", "1"),
        ("telecom_contas", "support_agent", "billing_agent", "1"),
    ]
    assert page.get_attribute("#content-main", "data-bucket") == "hour"  # a one-day range is drawn by the hour

    page.click("button.analytics-preset[data-days='30']")
    wait_until_drawn(page, "days=30")
    page.select_option("#filter-tenant", traffic.tenant_a.slug)
    wait_until_drawn(page, f"days=30&tenant={traffic.tenant_a.slug}")
    summary = assert_page_shows(page, base, {"days": 30, "tenant": traffic.tenant_a.slug})
    assert (summary["total_handoffs"], summary["handoff_rate_percentage"]) == (3, 66.67)
    assert page.locator("#table-recent", has_text="tenant_b").count() == 0

    newest = traffic.conversations["a1"]
    link = page.locator(f".analytics-conversation-link[data-conversation-id='{newest.pk}']").first
    assert link.inner_text() == newest.conversation_key
    link.click()
    page.wait_for_url(f"**/admin/conversations/conversation/{newest.pk}/change/")
    assert newest.conversation_key in page.content()
    assert page.errors == []


def test_staff_narrow_the_dashboard_to_one_cohort_and_one_routing_version(
    live_server, browser_page, staff_user, traffic
):
    for number in (1, 2):
        RoutingVersion.objects.create(profile=traffic.profile, number=number, document={})
    page, base = browser_page, live_server.url
    log_in(page, base, username="analyst", password="analyst-password")
    wait_until_drawn(page, "days=30")
    assert page.eval_on_selector_all("#filter-version option", "options => options.map(o => o.value)") == [
        "",
        "draft",
        "2",
        "1",
    ]

    page.select_option("#filter-version", "2")
    page.click("#filter-apply")
    wait_until_drawn(page, "days=30&version=2")
    assert "version=2" in page.url
    summary = assert_page_shows(page, base, {"days": 30, "version": "2"})
    # a1's two moves; of the conversations served by version 2 (a1, a3) one had a handoff.
    assert (summary["total_handoffs"], summary["conversations_with_handoffs"], summary["total_conversations"]) == (
        2,
        1,
        2,
    )
    assert "routing version 2" in page.inner_text("#analytics-period")

    page.select_option("#filter-version", "")
    page.select_option("#filter-cohort", "single_agent")
    page.click("#filter-apply")
    wait_until_drawn(page, "days=30&cohort=single_agent")
    assert_page_shows(page, base, {"days": 30, "cohort": "single_agent"})
    assert rows(page, "table-agents", "agent", "path", "turns") == [("support_agent", "single_agent", "1")]
    assert "single-agent path" in page.inner_text("#table-agents")

    page.select_option("#filter-cohort", "multi_agent")
    page.select_option("#filter-version", "draft")
    page.click("#filter-apply")
    wait_until_drawn(page, "days=30&cohort=multi_agent&version=draft")
    summary = assert_page_shows(page, base, {"days": 30, "cohort": "multi_agent", "version": "draft"})
    assert summary["total_handoffs"] == 3  # b1's, the only conversation served by no published version
    page.screenshot(path=str(screenshot_path("analytics-dashboard-sliced.png")), full_page=True)

    # Reloaded from its address, the page keeps the pickers.
    page.goto(f"{base}{DASHBOARD}?days=30&cohort=single_agent&version=1")
    wait_until_drawn(page, "days=30&cohort=single_agent&version=1")
    assert page.input_value("#filter-cohort") == "single_agent"
    assert page.input_value("#filter-version") == "1"
    assert page.errors == []


def test_the_dashboard_says_so_when_there_are_no_handoffs(live_server, browser_page, staff_user, traffic):
    page, base = browser_page, live_server.url
    log_in(page, base, username="analyst", password="analyst-password", next_path=f"{DASHBOARD}?days=1")
    wait_until_drawn(page, "days=1")
    assert figure(page, "kpi-total-handoffs") == 0
    assert page.locator("#chart-paths").is_hidden()
    assert page.locator("#panel-paths", has_text="No handoffs in this period").count() == 1
    assert page.locator("#table-recent", has_text="No handoffs in this period").count() == 1
    assert page.errors == []


def test_a_routing_editor_reaches_neither_the_dashboard_nor_any_tenants_analytics(
    live_server, browser_page, editor, traffic
):
    page, base = browser_page, live_server.url
    page.goto(base + "/admin/")
    page.fill("#id_username", "editor")
    page.fill("#id_password", "editor-password")
    page.click("#login-form input[type=submit]")
    page.wait_for_url(base + "/admin/")
    assert page.locator("#analytics-module").count() == 0
    assert page.locator("#analytics-link").count() == 0

    response = page.goto(base + DASHBOARD)
    assert response.status == 403
    for tenant in ("", traffic.tenant_a.slug, traffic.tenant_b.slug):
        for path in ("handoffs", "handoffs/recent", "cohorts"):
            answer = page.request.get(f"{base}{API}{path}?{urlencode({'tenant': tenant} if tenant else {})}")
            assert answer.status == 403, (path, tenant)


XSS = '<img src=x onerror="window.__xss=1">'


def test_names_from_the_data_show_as_text_in_every_charts_tooltip(live_server, browser_page, staff_user, traffic):
    """A model may name a specialist anything; the tooltips (ECharts renders them as HTML) must not run it."""
    conv = traffic.conversations["a1"]
    Handoff.objects.create(
        conversation=conv,
        tenant_id=conv.tenant_id,
        profile_id=conv.profile_id,
        from_agent="billing_agent",
        to_agent=XSS,
        kind="handoff",
        cohort=conv.cohort,
        reason="test",
    )
    answer = Message.objects.create(conversation=conv, role="assistant", agent=XSS, content="x", cohort=conv.cohort)
    goal = goal_examples.quote_and_notify()
    goal["intent_output"]["goal"] = XSS
    goal_answer(conv, goal, dt.datetime.now(dt.UTC))
    RouteDecisionRecord.objects.create(
        conversation=conv, message=answer, mode="router", route=XSS, agent=XSS, intent="x", method="<img src=x>"
    )
    page, base = browser_page, live_server.url
    log_in(page, base, username="analyst", password="analyst-password")
    wait_until_drawn(page, "days=30")
    shown = page.evaluate(
        """ids => {
            const texts = [];
            for (const id of ids) {
                const element = document.getElementById(id);
                const chart = element && !element.hidden && echarts.getInstanceByDom(element);
                if (!chart) continue;
                const series = chart.getOption().series || [];
                series.forEach((serie, seriesIndex) => {
                    const count = (serie.data || []).length + ((serie.links || []).length);
                    for (let dataIndex = 0; dataIndex < count; dataIndex++) {
                        chart.dispatchAction({type: "showTip", seriesIndex, dataIndex});
                        for (const tip of element.querySelectorAll("div")) texts.push(tip.innerHTML);
                        chart.dispatchAction({type: "showTip", seriesIndex, dataIndex, dataType: "edge"});
                        for (const tip of element.querySelectorAll("div")) texts.push(tip.innerHTML);
                    }
                });
            }
            return texts.join("\\n");
        }""",
        list(CHARTS),
    )
    assert "&lt;img src=x" in shown  # the name was shown, as text
    assert page.evaluate("window.__xss") is None
    assert page.locator("img[src=x]").count() == 0
    assert page.errors == []


# -- customers' ratings and each profile's rollouts ---------------------------------------------------------------


def build_ratings_and_plans(traffic: Traffic) -> dict[str, Any]:
    """Rated turns in tenant A (telecom_contas: a misroute rated down with a comment, a keyword answer rated up;
    retail_orders: a fallback rated down) and B (one rated down); rollout plans of telecom_contas (one running at
    50 %, one completed, four that ended before) and of retail_orders (one rolled back)."""
    telecom = conversation_of(traffic.tenant_a, "telecom_contas", "rated-1")
    retail = conversation_of(traffic.tenant_a, "retail_orders", "rated-2")
    when = dt.datetime.combine(traffic.today - dt.timedelta(days=1), dt.time(9), tzinfo=dt.UTC)
    misroute = stored_turn(
        telecom,
        "Fui atendido muito mal na loja, quero reclamar do vendedor",
        answer="Sua fatura teve roaming internacional.",
        method="examples",
        version=2,
        rating="down",
        comment="Eu queria reclamar do vendedor!",
        when=when,
    )
    stored_turn(telecom, "segunda via", version=2, rating="up", when=when)
    stored_turn(
        retail, "cancelar", intent="fallback", agent="general_agent", method="fallback", rating="down", when=when
    )
    stored_turn(conversation_of(traffic.tenant_b, "telecom_contas", "rated-3"), "cliente B", rating="down", when=when)
    # Two questions the help centre did not answer (the knowledge gaps panel), both about roaming.
    for text in ("Tem roaming na Argentina?", "Quanto custa o roaming no Chile?"):
        gap = stored_turn(telecom, text, version=2, when=when)
        unknown = {"citations": [], "retrieved": [], "answered_from_knowledge": False, "unknown": True}
        Message.objects.filter(pk=gap.answer.pk).update(metadata={"knowledge": unknown})

    profiles = {name: AgentProfileFactory(agent_id=name) for name in ("telecom_contas", "retail_orders")}
    versions = {
        (name, number): RoutingVersion.objects.create(profile=profile, number=number, document={})
        for name, profile in profiles.items()
        for number in range(1, 8)
    }
    started = timezone.now() - dt.timedelta(hours=2)

    def plan(name: str, profile: str, candidate: int, status: str, stage: int, ended: bool) -> RolloutPlan:
        return RolloutPlan.objects.create(
            name=name,
            profile=profiles[profile],
            candidate=versions[(profile, candidate)],
            control=versions[(profile, candidate - 1)],
            stages=[20, 50, 100],
            status=status,
            stage=stage,
            started_at=started,
            finished_at=started + dt.timedelta(hours=1) if ended else None,
        )

    ended_before = [plan(f"old plan {n}", "telecom_contas", n, "completed", 2, True) for n in range(2, 6)]
    completed = plan("invoices wording", "telecom_contas", 6, "completed", 2, True)
    running = plan("complaints to support", "telecom_contas", 7, "running", 1, False)
    rolled_back = plan("retail fallback", "retail_orders", 3, "rolled_back", 0, True)
    return {
        "misroute": misroute,
        "telecom_plans": [running, completed, *ended_before[::-1][:2]],
        "retail_plans": [rolled_back],
    }


def test_staff_see_customers_ratings_and_each_profiles_rollouts_drawn_with_the_apis_numbers(
    live_server, browser_page, staff_user, traffic
):
    built = build_ratings_and_plans(traffic)
    page, base = browser_page, live_server.url
    log_in(page, base, username="analyst", password="analyst-password")
    wait_until_drawn(page, "days=30")

    totals = api(page, base, "feedback", {"days": 30})["total"]
    assert (
        (figure(page, "feedback-rated"), figure(page, "feedback-down")) == (totals["rated"], totals["down"]) == (4, 3)
    )
    assert figure(page, "feedback-negative-rate") == totals["negative_rate_percentage"] == 75.0
    timeline = api(page, base, "feedback/timeline", {"days": 30, "bucket": "day"})
    assert rows(page, "table-feedback-timeline", "period", "down") == [
        (row["period"], str(row["down"])) for row in timeline[::-1]
    ]
    stacks = chart_option(page, "chart-feedback")["series"]
    assert [sum(series["data"][i][1] for series in stacks) for i in range(len(timeline))] == [
        row["rated"] for row in timeline
    ]
    breakdown = api(page, base, "feedback/breakdown", {"days": 30})
    assert rows(page, "table-feedback-intents", "intent", "down") == [
        (row["intent"], str(row["down"])) for row in breakdown["intents"]
    ]
    assert rows(page, "table-feedback-profiles", "profile", "negative-rate-percentage") == [
        (row["profile"], f"{row['negative_rate_percentage']:g}") for row in breakdown["profiles"]
    ]
    recent = api(page, base, "feedback/recent", {"days": 30, "limit": 10})
    assert rows(page, "table-feedback-recent", "rating-id") == [(str(row["id"]),) for row in recent]
    assert page.locator("#table-feedback-recent", has_text="Eu queria reclamar do vendedor!").count() == 1
    gaps = api(page, base, "knowledge/gaps", {"days": 30})
    assert figure(page, "gaps-unknown") == gaps["unknown"] == 2 and figure(page, "gaps-share") == 100.0
    assert rows(page, "table-knowledge-gaps", "topic", "questions") == [
        (group["topic"], str(group["questions"])) for group in gaps["groups"]
    ]
    assert [group["topic"] for group in gaps["groups"]] == ["roaming"]
    assert page.locator("#table-knowledge-gaps a", has_text="Tem roaming na Argentina?").count() == 1

    plans = [
        (
            section,
            tuple(row[0] for row in rows(page, f"rollouts-by-profile [data-profile='{section}'] table", "plan-id")),
        )
        for section in page.eval_on_selector_all(
            "#rollouts-by-profile .analytics-rollout-profile", "blocks => blocks.map(b => b.dataset.profile)"
        )
    ]
    assert plans == [
        ("retail_orders", tuple(str(plan.pk) for plan in built["retail_plans"])),
        ("telecom_contas", tuple(str(plan.pk) for plan in built["telecom_plans"])),
    ]
    running = page.locator(f"tr[data-plan-id='{built['telecom_plans'][0].pk}']")
    assert "version 7 against version 6" in running.inner_text() and "stage 2 of 3" in running.inner_text()
    assert "50 % of new conversations" in running.inner_text()
    assert page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth") <= 0
    page.locator("#panel-feedback").screenshot(path=str(screenshot_path("analytics-dashboard-ratings.png")))
    page.locator("#panel-knowledge-gaps").screenshot(
        path=str(screenshot_path("analytics-dashboard-knowledge-gaps.png"))
    )
    page.locator("#panel-rollouts").screenshot(path=str(screenshot_path("analytics-dashboard-rollouts.png")))

    page.select_option("#filter-profile", "retail_orders")
    wait_until_drawn(page, "days=30&profile=retail_orders")
    assert page.eval_on_selector_all(
        "#rollouts-by-profile .analytics-rollout-profile", "blocks => blocks.map(b => b.dataset.profile)"
    ) == ["retail_orders"]
    assert rows(page, "table-feedback-recent", "rating-id") == [
        (str(row["id"]),)
        for row in api(page, base, "feedback/recent", {"days": 30, "profile": "retail_orders", "limit": 10})
    ]

    page.select_option("#filter-profile", "")
    wait_until_drawn(page, "days=30")
    misroute = built["misroute"]
    page.click(f"#table-feedback-recent tr[data-message-id='{misroute.answer.pk}'] a.analytics-rating-link")
    page.wait_for_url(f"**/admin/conversations/conversation/{misroute.answer.conversation_id}/change/#answer-*")
    assert page.locator(f"#answer-{misroute.answer.pk}").get_attribute("data-rating") == "down"
    page.go_back()
    wait_until_drawn(page, "days=30")
    page.click("#feedback-inbox-link")
    page.wait_for_url("**/admin/conversations/messagefeedback/")
    assert page.locator("#result_list tbody tr").count() == 3  # the answers rated down, every tenant (a superuser)
    assert page.errors == []


# -- outcomes, routing accuracy and response quality ---------------------------------------------------------------


def assert_outcomes_shown(page, base_url: str, params: dict[str, Any]) -> dict:
    """The outcomes panel's figures, table and chart, and the quality figures and table, equal the API's."""
    outcomes = api(page, base_url, "outcomes", params)
    total = outcomes["total"]
    for name in ("decided", "resolved", "escalated", "abandoned", "rated", "up"):
        assert figure(page, f"outcomes-{name}") == total[name], name
    for name in ("resolved", "escalated", "abandoned"):
        assert figure(page, f"outcomes-{name}-rate") == total[f"{name}_percentage"], name
    assert figure(page, "outcomes-csat") == total["csat_percentage"]
    assert rows(page, "table-outcomes-profiles", "group", "decided", "csat-percentage") == [
        (group["group"], str(group["decided"]), f"{group['csat_percentage']:g}" if group["csat_percentage"] else None)
        for group in outcomes["groups"]
    ]
    bucket = page.get_attribute("#content-main", "data-bucket")
    timeline = api(page, base_url, "outcomes/timeline", {**params, "bucket": bucket})
    stacks = chart_option(page, "chart-outcomes")["series"]
    assert [series["type"] for series in stacks] == ["bar", "bar", "bar"]
    assert [sum(series["data"][i][1] for series in stacks) for i in range(len(timeline))] == [
        row["decided"] for row in timeline
    ]
    quality = api(page, base_url, "quality", params)
    chosen = quality["routing_accuracy"]["ratings"]
    assert figure(page, "quality-ratings-rated") == chosen["rated"]
    assert figure(page, "quality-tests-total") == quality["routing_accuracy"]["tests"]["total"]
    assert rows(page, "table-quality-agents", "profile", "agent", "answers", "escalations") == [
        (row["profile"], row["agent"], str(row["answers"]), str(row["escalations"])) for row in quality["agents"]
    ]
    return {"outcomes": outcomes, "quality": quality}


def test_staff_see_how_conversations_ended_and_the_agents_quality_drawn_with_the_apis_numbers(
    live_server, browser_page, staff_user, traffic
):
    page, base = browser_page, live_server.url
    log_in(page, base, username="analyst", password="analyst-password")
    wait_until_drawn(page, "days=30")

    shown = assert_outcomes_shown(page, base, {"days": 30})

    # a1 resolved, a2 to a person, a3 and b1 abandoned; a_old (45 days ago) is out of the window.
    total = shown["outcomes"]["total"]
    assert (total["decided"], total["resolved"], total["escalated"], total["abandoned"]) == (4, 1, 1, 2)
    assert page.inner_text("#outcomes-csat") == "66.67 %"  # two of a1's three rated answers up
    agents = {row["agent"]: row for row in shown["quality"]["agents"]}
    assert agents["support_agent"]["escalations"] == 1 and agents["billing_agent"]["answers"] == 2
    page.locator("#panel-outcomes").screenshot(path=str(screenshot_path("analytics-dashboard-outcomes.png")))

    page.select_option("#filter-tenant", traffic.tenant_a.slug)
    wait_until_drawn(page, f"days=30&tenant={traffic.tenant_a.slug}")
    assert (
        assert_outcomes_shown(page, base, {"days": 30, "tenant": traffic.tenant_a.slug})["outcomes"]["total"]["decided"]
        == 3
    )
    assert page.errors == []


def test_an_analyst_granted_one_tenant_sees_its_outcomes_and_agents_only(
    live_server, browser_page, tenant_analyst, traffic
):
    page, base = browser_page, live_server.url
    log_in(page, base, username="reader", password="reader-password")
    wait_until_drawn(page, "days=30")

    shown = assert_outcomes_shown(page, base, {"days": 30})

    assert shown["outcomes"]["total"]["decided"] == 3  # tenant_b's b1 is not theirs to read
    assert "product_agent" not in {row["agent"] for row in shown["quality"]["agents"]}
    assert page.locator("#panel-outcomes canvas").count() >= 1
    assert page.errors == []
