"""Customers' ratings in the daily totals (:data:`analytics.rollups.RATINGS`): ``GET /api/analytics/quality`` reads the
same ratings whichever days and hours are summed, a rating counts by when its answer was given, and every writer of a
rating unseals exactly the day or hour whose ratings it changed.

The rated turns (days counted back from today: ``D1`` yesterday), tenant A:

====  ===============  ============  =======  =============  =====================  ======
conv  profile          cohort        version  answered       route → written by     rating
====  ===============  ============  =======  =============  =====================  ======
r1    telecom_contas   multi_agent   2        D40 10:00      billing → billing      up
r1    telecom_contas   multi_agent   2        D2 10:00       billing → billing      up
r1    telecom_contas   multi_agent   2        D2 11:00       billing → billing      down
r1    telecom_contas   multi_agent   2        D1 09:30       billing → billing      (none)
r2    telecom_contas   single_agent  1        D1 09:10       billing → billing      up
r2    telecom_contas   single_agent  1        D1 09:12       billing → orders       down
r2    telecom_contas   single_agent  1        D1 10:20       support → support      up
r2    telecom_contas   single_agent  1        D1 12:05       support → support      down
r3    retail_loja      (blank)       draft    D1 15:00       orders → orders        down
====  ===============  ============  =======  =============  =====================  ======

The outsider: b1, telecom_contas, multi_agent version 2, D1 09:15 billing → billing, rated down. Every rating is
given after its answer's day or hour may have been summed (the rows are built, then rated): it counts on the answer's.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pytest
from django.utils import timezone

from analytics.models import DailyRatings, RollupDay, RollupHour
from analytics.services import rollup_build, rollup_hours_build, window_open
from conversations.feedback import feedback_give
from conversations.models import Conversation, Message
from conversations.public import session_clear
from conversations.tests.stored_turns import StoredTurn, conversation_of, stored_turn
from tenants.models import Tenant

pytestmark = pytest.mark.django_db

QUALITY = "/api/analytics/quality"


@dataclass
class Rated:
    today: dt.date
    conversations: dict[str, Conversation]
    turns: dict[str, StoredTurn]

    def at(self, days_ago: int, hour: int, minute: int = 0) -> dt.datetime:
        return dt.datetime.combine(self.today - dt.timedelta(days=days_ago), dt.time(hour, minute), tzinfo=dt.UTC)


def build_rated(tenant: Tenant, outsider: Tenant) -> Rated:
    today = timezone.now().astimezone(dt.UTC).date()
    rated = Rated(today=today, conversations={}, turns={})
    conversations = rated.conversations
    conversations["r1"] = conversation_of(tenant, "telecom_contas", "r1")
    conversations["r2"] = conversation_of(tenant, "telecom_contas", "r2")
    conversations["r3"] = conversation_of(tenant, "retail_loja", "r3")
    conversations["b1"] = conversation_of(outsider, "telecom_contas", "b1")
    slices = {"r1": ("multi_agent", 2), "r2": ("single_agent", 1), "r3": ("", None), "b1": ("multi_agent", 2)}
    for name, (cohort, version) in slices.items():
        Conversation.objects.filter(pk=conversations[name].pk).update(cohort=cohort, routing_version=version)

    def turn(name, conv, days_ago, hour, minute, agent):
        cohort, version = slices[conv]
        rated.turns[name] = stored_turn(
            conversations[conv],
            f"pergunta {name}",
            agent=agent,
            cohort=cohort,
            version=version,
            when=rated.at(days_ago, hour, minute),
        )

    turn("t1", "r1", 40, 10, 0, "billing_agent")
    turn("t2", "r1", 2, 10, 0, "billing_agent")
    turn("t3", "r1", 2, 11, 0, "billing_agent")
    turn("t4", "r1", 1, 9, 30, "billing_agent")
    turn("t5", "r2", 1, 9, 10, "billing_agent")
    # A second answer of t5's turn, written by another agent than its route decision chose.
    t5 = rated.turns["t5"]
    second = Message.objects.create(
        conversation=conversations["r2"], role="assistant", agent="orders_agent", content="…", cohort="single_agent"
    )
    Message.objects.filter(pk=second.pk).update(created_at=rated.at(1, 9, 12), routing_version=1)
    rated.turns["t6"] = StoredTurn(question=t5.question, decision=t5.decision, answer=second)
    turn("t7", "r2", 1, 10, 20, "support_agent")
    turn("t8", "r2", 1, 12, 5, "support_agent")
    turn("t9", "r3", 1, 15, 0, "orders_agent")
    turn("b", "b1", 1, 9, 15, "billing_agent")
    ratings = {"t1": "up", "t2": "up", "t3": "down", "t5": "up", "t6": "down", "t7": "up", "t8": "down"}
    ratings |= {"t9": "down", "b": "down"}
    for name, rating in ratings.items():
        answer = rated.turns[name].answer
        feedback_give(conversation=answer.conversation, message_id=answer.pk, rating=rating)
    return rated


@pytest.fixture
def rated(read_way, tenant, outsider):
    """The rated turns, read each of the four ways (``read_way``: all closed days summed, none, some days and hours,
    a live day's every closed hour)."""
    built = build_rated(tenant, outsider)
    read_way(built.today)
    return built


def chosen(body):
    ratings = body["routing_accuracy"]["ratings"]
    return (ratings["rated"], ratings["up"], ratings["down"], ratings["accuracy_percentage"]), [
        (row["profile"], row["agent"], row["rated"], row["up"], row["down"]) for row in ratings["agents"]
    ]


def written(body):
    return sorted(
        (row["profile"], row["agent"], row["answers"], row["rated"], row["up"], row["down"])
        for row in body["agents"]
        if row["rated"] or row["answers"]
    )


def test_quality_counts_the_same_ratings_whichever_days_and_hours_are_summed(api, staff_api, rated, outsider):
    body = api.get(QUALITY, {"days": 30}).json()
    assert chosen(body) == (
        (7, 3, 4, 42.86),
        [
            ("telecom_contas", "billing_agent", 4, 2, 2),  # t2, t3, t5 and t6 (t6 written by orders_agent)
            ("telecom_contas", "support_agent", 2, 1, 1),
            ("retail_loja", "orders_agent", 1, 0, 1),
        ],
    )
    assert written(body) == [
        ("retail_loja", "orders_agent", 1, 1, 0, 1),
        ("telecom_contas", "billing_agent", 4, 3, 2, 1),  # t2, t3, t4 (unrated), t5
        ("telecom_contas", "orders_agent", 1, 1, 0, 1),
        ("telecom_contas", "support_agent", 2, 2, 1, 1),
    ]
    # Ninety days reach t1 (D40); the outsider's rating only for a staff session.
    assert chosen(api.get(QUALITY, {"days": 90}).json())[0] == (8, 4, 4, 50.0)
    assert chosen(staff_api.get(QUALITY, {"days": 30}).json())[1][0] == ("telecom_contas", "billing_agent", 5, 2, 3)
    assert chosen(staff_api.get(QUALITY, {"days": 30, "tenant": outsider.slug}).json())[0] == (1, 0, 1, 0.0)
    # Sliced by the answer's cohort, version and profile.
    assert chosen(api.get(QUALITY, {"days": 30, "cohort": "single_agent"}).json())[0] == (4, 2, 2, 50.0)
    assert chosen(api.get(QUALITY, {"days": 30, "version": "draft"}).json())[0] == (1, 0, 1, 0.0)
    assert chosen(api.get(QUALITY, {"days": 30, "version": "2"}).json())[0] == (2, 1, 1, 50.0)
    assert chosen(api.get(QUALITY, {"days": 30, "profile": "retail_loja"}).json())[0] == (1, 0, 1, 0.0)
    # A window of D1 alone: the live hours and the rows around them.
    d1 = (rated.today - dt.timedelta(days=1)).isoformat()
    assert chosen(api.get(QUALITY, {"start": d1, "end": d1}).json())[0] == (5, 2, 3, 40.0)


def _days_sealed(rated, *days_ago):
    return sorted(
        (rated.today - day).days
        for day in RollupDay.objects.filter(sealed=True).values_list("day", flat=True)
        if (rated.today - day).days in days_ago
    )


def test_a_rating_given_or_changed_on_an_answer_of_a_summed_day_unseals_that_day_and_counts_on_it(
    api, settings, tenant, outsider
):
    rated = build_rated(tenant, outsider)
    settings.ANALYTICS_ROLLUP_GRACE_SECONDS = 0
    window_open(rated.at(3, 0), rated.at(0, 0))  # D3, D2 and D1 summed
    assert _days_sealed(rated, 1, 2, 3) == [1, 2, 3]
    t4 = rated.turns["t4"].answer  # D1 09:30, not rated yet

    feedback_give(conversation=t4.conversation, message_id=t4.pk, rating="down")
    assert _days_sealed(rated, 1, 2, 3) == [2, 3]  # counted on its answer's day, whenever given
    feedback_give(conversation=t4.conversation, message_id=t4.pk, rating="down", comment="still wrong")
    assert _days_sealed(rated, 1, 2, 3) == [2, 3]
    rollup_build(first=rated.today - dt.timedelta(days=1), last=rated.today - dt.timedelta(days=1))
    feedback_give(conversation=t4.conversation, message_id=t4.pk, rating="down", comment="a comment alone")
    assert _days_sealed(rated, 1, 2, 3) == [1, 2, 3]  # no count changed
    t3 = rated.turns["t3"].answer
    feedback_give(conversation=t3.conversation, message_id=t3.pk, rating="up")  # D2's down becomes up
    assert _days_sealed(rated, 1, 2, 3) == [1, 3]

    d2 = {"start": (rated.today - dt.timedelta(days=2)).isoformat(), "end": rated.today.isoformat()}
    assert chosen(api.get(QUALITY, d2).json())[0] == (8, 4, 4, 50.0)
    settings.ANALYTICS_ROLLUPS = False
    assert chosen(api.get(QUALITY, d2).json())[0] == (8, 4, 4, 50.0)


def test_a_rating_of_an_answer_in_a_summed_hour_of_the_live_day_unseals_that_hour_of_the_ratings_alone(
    api, settings, tenant, outsider
):
    rated = build_rated(tenant, outsider)
    settings.ANALYTICS_ROLLUP_GRACE_SECONDS = (timezone.now() - rated.at(1, 12, 30)).total_seconds()  # D1 live
    hours = [rated.at(1, hour) for hour in range(12)]
    rollup_hours_build(hours)
    assert not RollupHour.objects.filter(sealed=False).exists()
    t4 = rated.turns["t4"].answer  # D1 09:30

    feedback_give(conversation=t4.conversation, message_id=t4.pk, rating="up")

    assert list(RollupHour.objects.filter(sealed=False).values_list("fact", "hour")) == [("ratings", rated.at(1, 9))]
    d1 = dict.fromkeys(("start", "end"), (rated.today - dt.timedelta(days=1)).isoformat())
    assert chosen(api.get(QUALITY, d1).json())[0] == (6, 3, 3, 50.0)  # the hour summed again on the read
    assert not RollupHour.objects.filter(sealed=False).exists()
    assert sum(DailyRatings.objects.filter(hour=9).values_list("n", flat=True)) == 4  # t4, t5, t6 and the outsider's
    settings.ANALYTICS_ROLLUPS = False
    assert chosen(api.get(QUALITY, d1).json())[0] == (6, 3, 3, 50.0)


def test_a_cleared_session_unseals_its_ratings_hours_and_days_and_they_count_no_more(api, settings, tenant, outsider):
    rated = build_rated(tenant, outsider)
    settings.ANALYTICS_ROLLUP_GRACE_SECONDS = (timezone.now() - rated.at(1, 12, 30)).total_seconds()  # D1 live
    window_open(rated.at(3, 0), rated.at(1, 12))  # D3 and D2 summed, D1's hours to 11:00

    session_clear(conversation=rated.conversations["r2"])  # t5-t8: D1 09:00, 10:00 and 12:00

    assert ("ratings", rated.at(1, 9)) in set(RollupHour.objects.filter(sealed=False).values_list("fact", "hour"))
    assert ("ratings", rated.at(1, 10)) in set(RollupHour.objects.filter(sealed=False).values_list("fact", "hour"))
    assert _days_sealed(rated, 2, 3) == [2, 3]
    window = {"start": (rated.today - dt.timedelta(days=3)).isoformat(), "end": rated.today.isoformat()}
    assert chosen(api.get(QUALITY, window).json())[0] == (3, 1, 2, 33.33)  # t2, t3, t9
    settings.ANALYTICS_ROLLUPS = False
    assert chosen(api.get(QUALITY, window).json())[0] == (3, 1, 2, 33.33)
