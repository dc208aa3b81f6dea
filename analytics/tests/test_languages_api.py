"""``/api/analytics/languages`` against the hand-built traffic (analytics/tests/traffic.py), numbers worked by hand.

The ``traffic`` fixture reads every figure four ways (every closed day from the daily totals, none, some days and
hours, a live day's closed hours): a sealed day and an unsealed one give the same figures. Tenant A's API key and the
default 30 days (D29..today) unless a test says otherwise: c5's creation and its D40 turn and decision are outside.
"""

from __future__ import annotations

import datetime as dt

import pytest

pytestmark = pytest.mark.django_db


def get(client, **params):
    response = client.get("/api/analytics/languages", params)
    assert response.status_code == 200, response.content
    return response.json()


def row(language, conversations, messages, judge, routed, fallbacks):
    return {
        "language": language,
        "conversations": conversations,
        "messages": messages,
        "answers": messages,  # every user message of the traffic has its answer
        "avg_judge_score": judge,
        "routed": routed,
        "fallbacks": fallbacks,
        "fallback_rate_percentage": round(100 * fallbacks / routed, 2) if routed else 0.0,
    }


@pytest.mark.sqlite_too  # the dashboard's panel draws this answer: on the embedded default's database too
def test_each_language_counts_its_conversations_messages_answers_judge_score_and_fallbacks(api, traffic):
    assert get(api)["languages"] == [
        # c1, c8; c1's two turns and c5's D1 one (c5, created on D40, is not a conversation of the window);
        # judge (.8 + .6 + .5) / 3; decisions: c1 keyword ×2, c5 llm (c5's D40 fallback is outside)
        row("pt", 2, 3, 0.633, 3, 0),
        # c3, c7; c3's two turns (.9, .7); c3's two fallbacks
        row("es", 2, 2, 0.8, 2, 2),
        # c2, c6; c2's two turns (1, .4) (its supervisor part and system note are neither); c2's coordinator and
        # sub_conversation, c6's state
        row("en", 2, 2, 0.7, 3, 0),
        row("none", 1, 1, 0.1, 1, 0),  # c4, whose language was never told
    ]


def test_the_filters_narrow_every_language_and_a_language_without_traffic_is_listed_at_zero(api, traffic):
    by_language = {item["language"]: item for item in get(api, cohort="single_agent")["languages"]}  # c3, c7
    assert by_language.keys() == {"pt", "es", "en"}
    assert by_language["es"] == row("es", 2, 2, 0.8, 2, 2)
    assert by_language["pt"] == by_language["en"] | {"language": "pt"} == row("pt", 0, 0, None, 0, 0)

    assert get(api, profile="retail_loja")["languages"][-1] == row("none", 1, 1, 0.1, 1, 0)  # c4 alone
    # A conversation's version is its first user message's: c1 and c2 (c6 and c8 have no message).
    assert [item["conversations"] for item in get(api, version="2")["languages"]] == [1, 0, 1]
    yesterday = get(api, start=traffic.day(1), end=traffic.day(1))["languages"]
    assert [(item["language"], item["conversations"], item["messages"]) for item in yesterday] == [
        ("pt", 1, 1),  # c8 (no message); c5's D1 turn
        ("es", 2, 2),
        ("en", 1, 2),
    ]


def test_another_tenants_languages_never_show(api, staff_api, traffic):
    spanish = next(item for item in get(api)["languages"] if item["language"] == "es")
    assert (spanish["conversations"], spanish["messages"]) == (2, 2)  # b1 is tenant B's
    every = next(item for item in get(staff_api)["languages"] if item["language"] == "es")
    assert (every["conversations"], every["messages"], every["routed"], every["fallbacks"]) == (3, 4, 5, 5)


def days_summed_from_d40(settings) -> int:
    """How many of the days D40..D1 the read sums (see analytics/tests/conftest.py): every one with no grace, D2 and
    D40 with a grace of a year, every one but D1 when D1 is the live day."""
    if not settings.ANALYTICS_ROLLUPS:
        return 0
    if settings.ANALYTICS_ROLLUP_GRACE_SECONDS == 0:
        return 40
    return 2 if settings.ANALYTICS_ROLLUP_GRACE_SECONDS > 2 * 86400 else 39


def test_a_conversation_whose_language_changes_keeps_its_earlier_messages_under_the_earlier_language(
    api, traffic, settings
):
    """Messages and route decisions are counted under the language their turn was read in (the row keeps it), the
    conversation under its language as it is now: only the day it was created is summed again."""
    from analytics.models import RollupDay
    from conversations.models import Conversation, Message, RouteDecisionRecord
    from conversations.signals import conversation_recounted

    c5 = traffic.conversations["c5"]  # pt, rows on D40 and D1
    before = {item["language"]: item for item in get(api, days=90)["languages"]}
    assert (before["pt"]["messages"], before["en"]["messages"]) == (4, 2)
    assert (before["pt"]["conversations"], before["en"]["conversations"]) == (3, 2)
    window = RollupDay.objects.filter(day__gte=traffic.today - dt.timedelta(days=40), sealed=True)
    summed = days_summed_from_d40(settings)
    assert window.count() == summed

    # A turn of today in English, as the turn's write leaves it: the conversation's language, its signal, the rows.
    settings.ANALYTICS_ROLLUP_GRACE_SECONDS = 0  # a sealed day is a closed one (the "mixed" reads seal two early)
    Conversation.objects.filter(pk=c5.pk).update(language="en")
    conversation_recounted.send(sender=Conversation, created_at=c5.created_at)
    asked = Message.objects.create(conversation=c5, role="user", content="and my invoice?", cohort=c5.cohort)
    RouteDecisionRecord.objects.create(
        conversation=c5, message=asked, mode="router", route="x", agent="x", intent="x", method="fallback"
    )

    assert asked.language == "en" and not window.filter(day=c5.created_at.astimezone(dt.UTC).date()).exists()
    assert window.count() == max(summed - 1, 0)  # D40 alone
    after = {item["language"]: item for item in get(api, days=90)["languages"]}
    assert (after["pt"]["messages"], after["en"]["messages"]) == (4, 3)
    assert (after["pt"]["conversations"], after["en"]["conversations"]) == (2, 3)
    assert (after["pt"]["routed"], after["pt"]["fallbacks"]) == (before["pt"]["routed"], before["pt"]["fallbacks"])
    assert (after["en"]["routed"], after["en"]["fallbacks"]) == (before["en"]["routed"] + 1, 1)
