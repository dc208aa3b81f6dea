"""``GET /api/analytics/outcomes`` (and ``.../timeline``): resolved, escalated and abandoned conversations and CSAT,
grouped by profile, intent or goal, agent, cohort or version, with the analytics' filters and tenant scoping; and
``GET /api/analytics/quality``: routing accuracy from the saved tests, the corrected decisions and the ratings, and
response quality by agent, from real turns through the gateway."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.models import AgentProfile
from analytics.models import RollupDay
from analytics.outcomes import ERROR_BY
from analytics.services import rollup_build
from conversations.models import Conversation, ConversationOutcome, Message, RouteDecisionRecord
from conversations.outcomes import outcomes_close
from handoffs.models import PERSON, Handoff
from releases.models import RoutingTestCase
from releases.versions import version_publish
from tests.factories import AgentProfileFactory, ConversationFactory

pytestmark = pytest.mark.django_db

URL = "/api/analytics/outcomes"
QUALITY = "/api/analytics/quality"


def days_ago(days: int, hour: int = 10) -> dt.datetime:
    today = timezone.now().astimezone(dt.UTC).date()
    return dt.datetime.combine(today - dt.timedelta(days=days), dt.time(hour), tzinfo=dt.UTC)


@pytest.fixture(params=("daily_totals", "rows", "mixed", "hours"))
def decided(request, tenant, outsider, settings):
    """Outcomes, as the close and the graph write them (by days back from today), read four ways: every closed day
    from the daily totals, every day from the rows, D2 and D40 from the totals and the rest from the rows, or D1 as the
    live day at 23:30 (every earlier day from the totals, D1's closed hours summed by the hour on the first read):

    ======  =======  ==============  ===========  ========  =====================  =======  =========
    tenant  profile  outcome         cohort       version   intent / goal          agent    up, down
    ======  =======  ==============  ===========  ========  =====================  =======  =========
    A       telecom  resolved (D1)   multi_agent  2         billing_invoice        billing  2, 0
    A       telecom  resolved (D2)   multi_agent  2         billing_invoice        billing  0, 0
    A       telecom  escalated (D1)  single       1         billing_invoice        billing  0, 1
    A       telecom  abandoned (D2)  multi_agent  2         orders                 orders   0, 0
    A       finance  abandoned (D1)  —            draft     (goal) finance.QUOTE   planner  0, 0
    B       telecom  resolved (D1)   multi_agent  2         billing_invoice        billing  1, 0
    A       telecom  abandoned (D40) multi_agent  1         billing_invoice        billing  0, 0
    ======  =======  ==============  ===========  ========  =====================  =======  =========
    """
    telecom = AgentProfileFactory(agent_id="telecom_contas")
    finance = AgentProfileFactory(agent_id="finance_assistente")
    rows = [
        (tenant, telecom, "resolved", 1, "multi_agent", 2, "billing_invoice", "", "billing_agent", 2, 0),
        (tenant, telecom, "resolved", 2, "multi_agent", 2, "billing_invoice", "", "billing_agent", 0, 0),
        (tenant, telecom, "escalated", 1, "single_agent", 1, "billing_invoice", "", "billing_agent", 0, 1),
        (tenant, telecom, "abandoned", 2, "multi_agent", 2, "orders", "", "orders_agent", 0, 0),
        (tenant, finance, "abandoned", 1, "", None, "finance.QUOTE", "finance.QUOTE", "goal_planner", 0, 0),
        (outsider, telecom, "resolved", 1, "multi_agent", 2, "billing_invoice", "", "billing_agent", 1, 0),
        (tenant, telecom, "abandoned", 40, "multi_agent", 1, "billing_invoice", "", "billing_agent", 0, 0),
    ]
    for owner, profile, outcome, age, cohort, version, intent, goal, agent, up, down in rows:
        conversation = ConversationFactory(tenant=owner, profile=profile, cohort=cohort, outcome=outcome)
        ConversationOutcome.objects.create(
            conversation=conversation,
            tenant=owner,
            profile=profile,
            outcome=outcome,
            cohort=cohort,
            routing_version=version,
            intent=intent,
            goal=goal,
            agent=agent,
            rated_up=up,
            rated_down=down,
            started_at=days_ago(age, 9),
            decided_at=days_ago(age),
        )
    if request.param == "rows":
        settings.ANALYTICS_ROLLUPS = False
    else:
        settings.ANALYTICS_ROLLUP_GRACE_SECONDS = 0
    if request.param == "mixed":
        for age in (2, 40):
            day = days_ago(age).date()
            assert rollup_build(first=day, last=day) == [day]
        settings.ANALYTICS_ROLLUP_GRACE_SECONDS = 366 * 86400  # no other day closes
    if request.param == "hours":
        live_until = days_ago(1, 23) + dt.timedelta(minutes=30)
        settings.ANALYTICS_ROLLUP_GRACE_SECONDS = (timezone.now() - live_until).total_seconds()


def figures(resolved, escalated, abandoned, up, down) -> dict:
    decided = resolved + escalated + abandoned

    def share(part, whole):
        return round(100 * part / whole, 2) if whole else None

    return {
        "decided": decided,
        "resolved": resolved,
        "escalated": escalated,
        "abandoned": abandoned,
        "resolved_percentage": share(resolved, decided),
        "escalated_percentage": share(escalated, decided),
        "abandoned_percentage": share(abandoned, decided),
        "rated": up + down,
        "up": up,
        "down": down,
        "csat_percentage": share(up, up + down),
    }


@pytest.mark.sqlite_too
def test_a_key_reads_its_own_tenants_outcomes_in_total_and_per_profile(api, decided):
    response = api.get(URL, {"days": 30})

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["total"] == figures(2, 1, 2, 2, 1)  # CSAT 66.67: 2 of the 3 rated answers up
    assert body["total"]["csat_percentage"] == 66.67
    assert body["by"] == "profile"
    assert body["groups"] == [
        {"profile": "telecom_contas", "group": "telecom_contas", **figures(2, 1, 1, 2, 1)},
        {"profile": "finance_assistente", "group": "finance_assistente", **figures(0, 0, 1, 0, 0)},
    ]


@pytest.mark.sqlite_too
@pytest.mark.parametrize(
    ("by", "expected"),
    [
        (
            "intent",
            [
                ("telecom_contas", "billing_invoice", figures(2, 1, 0, 2, 1)),
                ("finance_assistente", "finance.QUOTE", figures(0, 0, 1, 0, 0)),  # goal mode: by its goal
                ("telecom_contas", "orders", figures(0, 0, 1, 0, 0)),
            ],
        ),
        (
            "agent",
            [
                ("telecom_contas", "billing_agent", figures(2, 1, 0, 2, 1)),
                ("finance_assistente", "goal_planner", figures(0, 0, 1, 0, 0)),
                ("telecom_contas", "orders_agent", figures(0, 0, 1, 0, 0)),
            ],
        ),
        (
            "cohort",
            [
                (None, "multi_agent", figures(2, 0, 1, 2, 0)),
                (None, "none", figures(0, 0, 1, 0, 0)),  # the flag did not decide: as the cohort filter says it
                (None, "single_agent", figures(0, 1, 0, 0, 1)),
            ],
        ),
        (
            "version",
            [
                ("telecom_contas", "2", figures(2, 0, 1, 2, 0)),
                ("finance_assistente", "draft", figures(0, 0, 1, 0, 0)),
                ("telecom_contas", "1", figures(0, 1, 0, 0, 1)),
            ],
        ),
    ],
)
def test_outcomes_group_by_intent_or_goal_agent_cohort_and_version(api, decided, by, expected):
    body = api.get(URL, {"days": 30, "by": by}).json()

    assert body["by"] == by
    assert [(group["profile"], group["group"], {k: group[k] for k in expected[0][2]}) for group in body["groups"]] == (
        expected
    )


def test_the_filters_slice_the_outcomes_and_the_window_is_by_decision(api, decided):
    def total(**params):
        return api.get(URL, params).json()["total"]

    assert total(days=30, cohort="single_agent") == figures(0, 1, 0, 0, 1)
    assert total(days=30, version="draft") == figures(0, 0, 1, 0, 0)
    assert total(days=30, profile="telecom_contas", version=2) == figures(2, 0, 1, 2, 0)
    assert total(days=2) == figures(1, 1, 1, 2, 1)  # today and yesterday: none of the D2 rows
    assert total(days=90) == figures(2, 1, 3, 2, 1)  # the D40 abandonment too
    assert total(start=days_ago(40).date().isoformat(), end=days_ago(40).date().isoformat()) == figures(0, 0, 1, 0, 0)


def test_the_timeline_counts_outcomes_per_day_of_decision(api, decided):
    timeline = api.get(f"{URL}/timeline", {"days": 3, "bucket": "day"}).json()

    assert [row["period"][:10] for row in timeline] == [days_ago(age).date().isoformat() for age in (2, 1, 0)]
    assert [(row["resolved"], row["escalated"], row["abandoned"]) for row in timeline] == [
        (1, 0, 1),
        (1, 1, 1),
        (0, 0, 0),
    ]
    assert timeline[1]["csat_percentage"] == 66.67 and timeline[2]["csat_percentage"] is None


def test_tenants_see_only_their_outcomes_and_bad_input_names_the_field(
    api, outsider_api, decided, tenant_analyst, django_user_model
):
    assert outsider_api.get(URL, {"days": 30}).json()["total"] == figures(1, 0, 0, 1, 0)
    assert api.get(URL, {"tenant": "outsider"}).status_code == 404
    granted = Client()
    granted.force_login(tenant_analyst)  # tenant_a's conversations only
    assert granted.get(URL, {"days": 30}).json()["total"] == figures(2, 1, 2, 2, 1)
    assert granted.get(URL, {"tenant": "outsider"}).status_code == 404
    everyone = django_user_model.objects.create_user("ops", "ops@example.com", "pw", is_staff=True)
    everyone.user_permissions.add(Permission.objects.get(codename="view_analytics"))
    client = Client()
    client.force_login(everyone)
    assert client.get(URL, {"days": 30}).json()["total"] == figures(3, 1, 2, 3, 1)
    nobody = Client()
    nobody.force_login(django_user_model.objects.create_user("nobody", "n@example.com", "pw", is_staff=True))
    assert nobody.get(URL).status_code == 403
    assert Client().get(URL).status_code == 401
    bad = api.get(URL, {"by": "colour"})
    assert bad.status_code == 400
    assert bad.json()["error"]["fields"] == {"by": [ERROR_BY]}
    assert set(api.get(URL, {"cohort": "blue", "days": "x"}).json()["error"]["fields"]) == {"cohort", "days"}


def test_the_outcomes_are_two_queries_at_most_whatever_the_number_of_groups(api, decided):
    assert api.get(URL, {"days": 30}).status_code == 200  # the closed days are summed on the first read
    counted = []
    for by in ("profile", "agent", "intent"):
        with CaptureQueriesContext(connection) as read:
            assert api.get(URL, {"days": 30, "by": by}).status_code == 200
        tables = ("conversations_conversationoutcome", "analytics_dailyoutcomes")
        counted.append(len([query for query in read.captured_queries if any(t in query["sql"] for t in tables)]))
    # The closed days from the daily totals, the rest from the rows: one grouped query each (rows alone: one).
    assert counted == [counted[0]] * 3 and counted[0] <= 2


# -- from real turns -----------------------------------------------------------------------------------------------


def say(api, text, session):
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": session}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def rate(api, body, rating):
    response = api.post(
        f"/api/sessions/{body['conversation_key']}/feedback",
        {"message_id": body["message_id"], "rating": rating},
        format="json",
    )
    assert response.status_code == 201, response.content


def test_customers_conversations_closed_after_their_timeout_are_counted_with_their_csat(api, telecom):
    thanked = say(api, "Minha fatura veio alta", "thanked")
    rate(api, thanked, "up")
    say(api, "obrigado, tchau", "thanked")
    say(api, "quero rastrear meu pedido", "left")
    say(api, "quero falar com um atendente", "person")
    # The customers went quiet 31 minutes ago (the profile's timeout is 30); the close runs now, so the outcomes are
    # decided today whatever the time of day.
    quiet_since = timezone.now() - dt.timedelta(minutes=31)
    Conversation.objects.update(created_at=quiet_since, turn_started_at=quiet_since)
    outcomes_close()

    body = api.get(URL, {"days": 1, "by": "intent"}).json()

    assert body["total"] == figures(1, 1, 1, 1, 0)
    assert body["total"]["csat_percentage"] == 100.0
    assert ("telecom_contas", "billing_invoice_explanation") in [(g["profile"], g["group"]) for g in body["groups"]]


def test_a_summed_days_outcomes_are_summed_again_once_a_conversation_decided_on_it_is_rated_or_reopened(
    api, telecom, settings
):
    rated = say(api, "Minha fatura veio alta", "rated")
    say(api, "quero rastrear meu pedido", "reopened")
    quiet_since = timezone.now() - dt.timedelta(minutes=31)
    Conversation.objects.update(created_at=quiet_since, turn_started_at=quiet_since)
    assert outcomes_close().abandoned == 2
    ConversationOutcome.objects.update(decided_at=days_ago(3))  # decided on a day that has closed since
    settings.ANALYTICS_ROLLUP_GRACE_SECONDS = 0
    window = {"days": 7}

    assert api.get(URL, window).json()["total"] == figures(0, 0, 2, 0, 0)
    assert RollupDay.objects.get(day=days_ago(3).date()).sealed  # read from the daily totals from now on

    rate(api, rated, "up")  # the outcome row counts the rating: that day's totals are summed again
    assert api.get(URL, window).json()["total"] == figures(0, 0, 2, 1, 0)
    timeline = api.get(f"{URL}/timeline", window).json()
    assert [day["abandoned"] for day in timeline if day["period"].startswith(days_ago(3).date().isoformat())] == [2]

    say(api, "e agora?", "reopened")  # a customer writing again opens it: its outcome is undecided
    assert api.get(URL, window).json()["total"] == figures(0, 0, 1, 1, 0)


@pytest.fixture
def published(telecom):
    return version_publish(profile=AgentProfile.objects.get(agent_id="telecom_contas"), note="v1")


def test_routing_accuracy_runs_the_saved_tests_against_the_live_version(api, published):
    profile = published.profile
    RoutingTestCase.objects.create(
        profile=profile,
        name="fatura",
        message="Minha fatura veio alta",
        expect={"intent": "billing_invoice_explanation"},
    )
    RoutingTestCase.objects.create(
        profile=profile, name="pedido", message="quero rastrear meu pedido", expect={"agent": "orders_agent"}
    )
    wrong = RoutingTestCase.objects.create(
        profile=profile, name="wrong", message="Minha fatura veio alta", expect={"intent": "retail_order_tracking"}
    )
    RoutingTestCase.objects.create(
        profile=profile, name="off", message="x", expect={"intent": "nothing"}, enabled=False
    )

    tests = api.get(QUALITY).json()["routing_accuracy"]["tests"]

    assert (tests["total"], tests["passed"], tests["failed"], tests["accuracy_percentage"]) == (3, 2, 1, 66.67)
    assert tests["profiles"] == [
        {"profile": "telecom_contas", "version": 1, "total": 3, "passed": 2, "failed": 1, "accuracy_percentage": 66.67}
    ]
    wrong.expect = {"intent": "billing_invoice_explanation"}
    wrong.save()  # a changed test is run again, not read from the last run
    assert api.get(QUALITY).json()["routing_accuracy"]["tests"]["passed"] == 3


@pytest.mark.sqlite_too
def test_corrected_decisions_count_against_the_routing_in_the_tenant_that_saw_them(api, outsider_api, published):
    say(api, "Minha fatura veio alta", "a")
    say(api, "quero rastrear meu pedido", "b")
    say(outsider_api, "quero rastrear meu pedido", "c")
    decisions = RouteDecisionRecord.objects.select_related("message", "conversation__tenant").order_by("id")
    for index, decision in enumerate(decisions):
        corrected = decision.message.content == "quero rastrear meu pedido"
        RoutingTestCase.objects.create(
            profile=published.profile,
            name=f"from-{index}",
            message=decision.message.content,
            expect={"intent": "retail_orders_other" if corrected else decision.intent, "agent": decision.agent},
            source_message_id=decision.message_id,
            source_intent=decision.intent,
            source_agent=decision.agent,
            enabled=False,
        )

    ours = api.get(QUALITY).json()["routing_accuracy"]["corrections"]
    theirs = outsider_api.get(QUALITY).json()["routing_accuracy"]["corrections"]

    assert ours == {"reviewed": 2, "corrected": 1, "accuracy_percentage": 50.0}
    assert theirs == {"reviewed": 1, "corrected": 1, "accuracy_percentage": 0.0}
    assert api.get(QUALITY, {"start": days_ago(5).date().isoformat(), "end": days_ago(3).date().isoformat()}).json()[
        "routing_accuracy"
    ]["corrections"] == {"reviewed": 0, "corrected": 0, "accuracy_percentage": None}


def test_response_quality_per_agent_reads_the_judge_the_ratings_and_the_escalations(api, outsider_api, published):
    billing = say(api, "Minha fatura veio alta", "q1")
    orders = say(api, "quero rastrear meu pedido", "q2")
    rate(api, billing, "up")
    rate(api, orders, "down")
    say(api, "Minha fatura veio alta", "q3")
    say(api, "quero falar com um atendente", "q3")  # handed to a person from billing_agent
    say(outsider_api, "Minha fatura veio alta", "theirs")

    body = api.get(QUALITY, {"days": 1}).json()

    chosen = body["routing_accuracy"]["ratings"]
    assert (chosen["rated"], chosen["up"], chosen["accuracy_percentage"]) == (2, 1, 50.0)
    assert {(row["agent"], row["up_percentage"]) for row in chosen["agents"]} == {
        ("billing_agent", 100.0),
        ("orders_agent", 0.0),
    }
    agents = {row["agent"]: row for row in body["agents"]}
    ours = Message.objects.filter(role="assistant", conversation__tenant__slug="tenant_a", agent="billing_agent")
    scores = [score for score in ours.values_list("judge_score", flat=True) if score is not None]
    assert agents["billing_agent"]["answers"] == ours.count() == 2  # the outsider's answer is not counted
    assert agents["billing_agent"]["judge_mean"] == (round(sum(scores) / len(scores), 3) if scores else None)
    assert (agents["billing_agent"]["rated"], agents["billing_agent"]["up_percentage"]) == (1, 100.0)
    assert (agents["orders_agent"]["rated"], agents["orders_agent"]["up_percentage"]) == (1, 0.0)
    moved = Handoff.objects.get(kind="human", to_agent=PERSON)
    assert agents[moved.from_agent]["escalations"] == 1
    assert sum(row["escalations"] for row in body["agents"]) == 1


def test_a_rated_later_turn_counts_for_the_agent_its_own_question_was_routed_to(api, published):
    first = say(api, "Minha fatura veio alta", "turns")
    second = say(api, "quero rastrear meu pedido", "turns")
    rate(api, first, "up")
    rate(api, second, "down")
    decided = dict(
        RouteDecisionRecord.objects.filter(message__conversation__session_id="turns").values_list(
            "message__content", "agent"
        )
    )

    assert len(set(decided.values())) == 2  # two turns routed to two agents
    chosen = api.get(QUALITY, {"days": 1}).json()["routing_accuracy"]["ratings"]

    assert {(row["agent"], row["up"], row["down"]) for row in chosen["agents"]} == {
        (decided["Minha fatura veio alta"], 1, 0),
        (decided["quero rastrear meu pedido"], 0, 1),
    }


@pytest.mark.sqlite_too
def test_the_quality_report_reads_its_ratings_questions_in_a_constant_number_of_queries_whatever_their_count(
    api, published
):
    answers = [say(api, text, f"count{n}") for n, text in enumerate(["Minha fatura veio alta"] * 2 + ["pedido"] * 2)]

    def queries() -> int:
        with CaptureQueriesContext(connection) as read:
            assert api.get(QUALITY, {"days": 1}).status_code == 200
        return len(read.captured_queries)

    rate(api, answers[0], "up")
    queries()  # the first read sums today's closed hours
    one = queries()
    for answer in answers[1:]:
        rate(api, answer, "down")
    assert queries() == one
