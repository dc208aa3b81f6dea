"""The rollout view in a real browser: Debian's Chromium driven by Playwright against ``live_server``.

A plan rolled back by its guard after real traffic through the gateway API (:mod:`analytics.tests.rollout_traffic`)
is opened from the list of plans; the view must draw one chart per guard metric with both cohorts (the values the
API gives), the stage and the rollback marked, the sample sizes and the decision log with the breached guard.
A screenshot goes to ``test-output/screenshots/analytics-rollout.png``.
"""

from __future__ import annotations

from typing import Any

import pytest

from analytics.tests.rollout_traffic import rolled_back_plan, through_http
from analytics.tests.test_dashboard_browser import log_in, rows
from routing.rollout_plans import GUARD_METRICS
from tests.browser_fixtures import screenshot_path

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SCREENSHOT = "analytics-rollout.png"
ROLLBACK_RED = "#c62828"


@pytest.fixture(autouse=True)
def unthrottled(settings):
    settings.API_MESSAGE_RATE_PER_KEY = "off"


def wait_until_drawn(page, query: str) -> None:
    page.wait_for_function(
        """query => {
            const root = document.getElementById("content-main");
            if (!root || root.dataset.state === "loading" || root.dataset.query !== query) return false;
            const charts = [...document.querySelectorAll(".analytics-chart")].filter(chart => !chart.hidden);
            return charts.length > 0 && charts.every(chart => chart.dataset.rendered === "true");
        }""",
        arg=query,
    )
    assert page.get_attribute("#content-main", "data-state") == "ready", page.inner_text("#analytics-error")


def chart(page, chart_id: str) -> dict[str, Any]:
    """What ECharts holds for the chart (series, data, mark lines), after checking that it drew a canvas."""
    assert page.locator(f"#{chart_id} canvas").count() >= 1, chart_id
    return page.evaluate(
        """id => {
            const option = echarts.getInstanceByDom(document.getElementById(id)).getOption();
            return {axis: {min: option.xAxis[0].min, max: option.xAxis[0].max}, series: option.series.map(s => ({
                name: s.name, type: s.type, data: s.data,
                marks: ((s.markLine || {}).data || []).map(m => ({
                    name: m.name, x: m.xAxis, colour: (m.lineStyle || {}).color, label: (m.label || {}).formatter,
                })),
            }))};
        }""",
        chart_id,
    )


def test_staff_open_a_rolled_back_plan_and_see_both_cohorts_the_rollback_and_the_decision_log(
    live_server, browser_page, staff_user, telecom, tenant_key
):
    plan, rollback = rolled_back_plan(through_http(live_server.url, tenant_key.raw))
    page, base = browser_page, live_server.url

    log_in(page, base, username="analyst", password="analyst-password", next_path="/analytics/rollouts/")
    assert rows(page, "table-rollouts", "plan-id", "status") == [(str(plan.pk), "rolled_back")]
    page.click(f"#table-rollouts tr[data-plan-id='{plan.pk}'] a")
    page.wait_for_url(f"**/analytics/rollouts/{plan.pk}/")
    wait_until_drawn(page, "")

    answer = page.request.get(f"{base}/api/analytics/rollouts/{plan.pk}")
    assert answer.status == 200, answer.text()
    view = answer.json()
    points = view["series"]["points"]
    assert len(points) == 12
    assert page.inner_text("#plan-status") == "Rolled back"
    assert page.inner_text("#plan-stage") == "1 of 3 (20 %)"

    # One chart per guard metric, candidate and control, drawing the API's values; the stage and the rollback marked.
    for name in GUARD_METRICS:
        drawn_chart = chart(page, f"chart-{name}")
        drawn = drawn_chart["series"]
        assert [(series["name"], series["type"]) for series in drawn] == [("Candidate", "line"), ("Control", "line")]
        for series, cohort in zip(drawn, ("candidate", "control"), strict=True):
            assert [value for _, value in series["data"]] == [point[cohort]["values"][name] for point in points], name
        marks = drawn[0]["marks"]
        assert [(mark["name"], mark["label"]) for mark in marks] == [("stage", "20 %"), ("rollback", "Rolled back")]
        assert marks[1]["colour"] == ROLLBACK_RED
        assert all(drawn_chart["axis"]["min"] <= mark["x"] <= drawn_chart["axis"]["max"] for mark in marks), name
    fallback = chart(page, "chart-fallback_rate")["series"]
    candidate_rates = [value for _, value in fallback[0]["data"] if value is not None]
    control_rates = [value for _, value in fallback[1]["data"] if value is not None]
    assert candidate_rates and control_rates
    assert min(candidate_rates) > 0.9 > 0.1 > max(control_rates)

    # Sample sizes: per slice in the chart and the table, in total in the figures on top.
    samples = chart(page, "chart-samples")["series"]
    assert [[value for _, value in series["data"]] for series in samples] == [
        [point[cohort]["conversations"] for point in points] for cohort in ("candidate", "control")
    ]
    totals = {cohort: sum(point[cohort]["conversations"] for point in points) for cohort in ("candidate", "control")}
    assert totals == {cohort: rollback.figures[cohort]["conversations"] for cohort in ("candidate", "control")}
    for cohort, total in totals.items():
        assert page.get_attribute(f"#sample-{cohort}", "data-value") == str(total)
    assert rows(page, "table-samples", "candidate", "control") == [
        (str(point["candidate"]["conversations"]), str(point["control"]["conversations"])) for point in points
    ]

    # The decision log, newest first, with each guard's verdict: the fallback rate breached.
    assert rows(page, "table-decisions", "decision-id", "action", "percentage") == [
        (str(rollback.pk), "rollback", "20"),
        (str(view["decisions"][1]["id"]), "start", "20"),
    ]
    breached = page.eval_on_selector_all(
        f"#table-decisions tr[data-decision-id='{rollback.pk}'] .rollout-verdict[data-breached='true']",
        "spans => spans.map(span => span.dataset.metric)",
    )
    assert breached == ["fallback_rate"]
    assert page.locator(f"#table-decisions tr[data-decision-id='{rollback.pk}']", has_text="Fisher p").count() == 1
    page.screenshot(path=str(screenshot_path(SCREENSHOT)), full_page=True)

    # Fewer slices, asked through the form: the charts are drawn again.
    page.fill("#filter-slices", "4")
    page.click("#filter-apply")
    wait_until_drawn(page, "slices=4")
    assert len(chart(page, "chart-judge_score")["series"][0]["data"]) == 4
    assert page.errors == []


def test_slices_out_of_range_are_named_on_the_page(live_server, browser_page, staff_user, telecom):
    from agents.models import AgentProfile
    from releases.models import RolloutPlan

    plan = RolloutPlan.objects.create(name="ready", profile=AgentProfile.objects.get(agent_id="telecom_contas"))
    page, base = browser_page, live_server.url
    log_in(
        page,
        base,
        username="analyst",
        password="analyst-password",
        next_path=f"/analytics/rollouts/{plan.pk}/?slices=99",
    )

    page.wait_for_function("() => document.getElementById('content-main').dataset.state === 'error'")
    assert "slices" in page.inner_text("#analytics-error")
