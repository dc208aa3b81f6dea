"""Handoffs made by the real graph are what the analytics count."""

from __future__ import annotations

import datetime as dt

import pytest

from analytics.rollups import FACTS

pytestmark = pytest.mark.django_db


def send(api, text):
    response = api.post(
        "/api/gateway/message",
        {"channel": "web", "agent_id": "telecom_contas", "payload": {"text": text, "session_id": "web-001"}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_a_routing_handoff_made_by_the_gateway_is_counted(api, telecom):
    assert send(api, "Minha fatura veio alta")["agent"] == "billing_agent"
    assert send(api, "E o meu pedido?")["agent"] == "orders_agent"  # the router moves the conversation

    assert api.get("/api/analytics/handoffs").json() == {
        "total_handoffs": 1,
        "handoff_paths": [{"profile": "telecom_contas", "from": "billing_agent", "to": "orders_agent", "count": 1}],
        "conversations_with_handoffs": 1,
        "total_conversations": 1,
        "handoff_rate_percentage": 100.0,
    }
    assert api.get("/api/analytics/agents").json() == [
        {"profile": "telecom_contas", "agent": "billing_agent", "path": "routed", "turns": 1, "share_percentage": 50.0},
        {"profile": "telecom_contas", "agent": "orders_agent", "path": "routed", "turns": 1, "share_percentage": 50.0},
    ]
    methods = api.get("/api/analytics/routing-methods").json()
    assert (methods["methods"][0], methods["total"]) == (
        {"method": "keyword", "count": 2, "share_percentage": 100.0},
        2,
    )
    timeline = api.get("/api/analytics/handoffs/timeline", {"days": 1, "bucket": "hour"}).json()
    assert sum(period["by_kind"]["routing_handoff"] for period in timeline) == 1
    [recent] = api.get("/api/analytics/handoffs/recent").json()
    assert (recent["conversation_key"], recent["kind"]) == ("tenant_a:telecom_contas:web-001", "routing_handoff")


def test_a_single_agent_turn_is_the_general_agent_on_its_path_and_not_fallback_routing(api, telecom):
    from routing.services import rollout_flag_set

    rollout_flag_set(key="multi_agent", actor="test", percentage=0)  # everyone on the single-agent path
    response = api.post(
        "/api/chat/message",
        {"agent_id": "telecom_contas", "payload": {"text": "Minha fatura veio alta", "user_id": "u-1"}},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["metadata"]["cohort"] == "single_agent"
    general = body["agent"]  # the profile's general (fallback) specialist answered, the router chose billing
    assert body["metadata"]["route_decision"]["metadata"]["routed_agent"] == "billing_agent" != general

    assert api.get("/api/analytics/agents").json() == [
        {"profile": "telecom_contas", "agent": general, "path": "single_agent", "turns": 1, "share_percentage": 100.0}
    ]
    methods = api.get("/api/analytics/routing-methods", {"cohort": "single_agent"}).json()
    assert (methods["fallback_rate_percentage"], methods["total"]) == (0.0, 1)  # routed by keyword
    assert api.get("/api/analytics/agents", {"cohort": "multi_agent"}).json() == []


def _to_yesterday(conversation_key: str) -> dt.date:
    """Date the conversation and everything written so far back to yesterday; returns that day."""
    from conversations.models import Conversation, Message, RouteDecisionRecord, ToolCall
    from handoffs.models import Handoff

    yesterday = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    conversation = Conversation.objects.get(conversation_key=conversation_key)
    for model in (Message, RouteDecisionRecord, ToolCall, Handoff):
        model.objects.filter(conversation=conversation).update(created_at=yesterday)
    Conversation.objects.filter(pk=conversation.pk).update(created_at=yesterday)
    return yesterday.date()


def test_a_conversation_of_a_summed_day_that_moves_today_is_counted_again(api, telecom, settings):
    from analytics.models import RollupDay

    settings.ANALYTICS_ROLLUP_GRACE_SECONDS = 0
    assert send(api, "Minha fatura veio alta")["agent"] == "billing_agent"
    day = _to_yesterday("tenant_a:telecom_contas:web-001")
    before = api.get("/api/analytics/handoffs", {"days": 2}).json()  # sums yesterday: one conversation, no move
    assert (before["total_conversations"], before["conversations_with_handoffs"]) == (1, 0)
    assert RollupDay.objects.get(day=day).sealed

    assert send(api, "E o meu pedido?")["agent"] == "orders_agent"  # today's turn: its first routing handoff

    assert not RollupDay.objects.get(day=day).sealed  # yesterday's conversation is counted under new kinds
    after = api.get("/api/analytics/handoffs", {"days": 2}).json()
    assert (after["total_handoffs"], after["total_conversations"], after["conversations_with_handoffs"]) == (1, 1, 1)
    assert RollupDay.objects.get(day=day).sealed  # summed again by that read


def test_clearing_a_session_unseals_the_days_of_the_rows_it_deletes(api, telecom, settings):
    from analytics.models import RollupDay

    settings.ANALYTICS_ROLLUP_GRACE_SECONDS = 0
    send(api, "Minha fatura veio alta")
    send(api, "E o meu pedido?")
    day = _to_yesterday("tenant_a:telecom_contas:web-001")
    assert sum(row["turns"] for row in api.get("/api/analytics/agents", {"days": 2}).json()) == 2
    assert RollupDay.objects.get(day=day).sealed

    response = api.post("/api/sessions/tenant_a:telecom_contas:web-001/clear")
    assert response.status_code == 200, response.content

    assert not RollupDay.objects.get(day=day).sealed
    assert api.get("/api/analytics/agents", {"days": 2}).json() == []
    assert api.get("/api/analytics/handoffs", {"days": 2}).json()["total_handoffs"] == 1  # handoff rows stay


def _rows_back(conversation_key: str, days: int) -> dt.date:
    """Date the conversation's rows written today ``days`` back (the conversation too, if created today)."""
    from conversations.models import Conversation, Message, RouteDecisionRecord, ToolCall
    from handoffs.models import Handoff

    now = dt.datetime.now(dt.UTC)
    back, today = now - dt.timedelta(days=days), dt.datetime.combine(now.date(), dt.time.min, tzinfo=dt.UTC)
    conversation = Conversation.objects.get(conversation_key=conversation_key)
    for model in (Message, RouteDecisionRecord, ToolCall, Handoff):
        model.objects.filter(conversation=conversation, created_at__gte=today).update(created_at=back)
    Conversation.objects.filter(pk=conversation.pk, created_at__gte=today).update(created_at=back)
    return back.date()


def test_a_conversation_whose_language_changes_today_moves_and_its_earlier_messages_stay_under_the_earlier_one(
    api, telecom, settings
):
    """The conversation is counted under its language as it is now (the day it was created is summed again); each
    message under the language its turn was read in (yesterday's totals stay as they were)."""
    from analytics.models import RollupDay

    settings.ANALYTICS_ROLLUP_GRACE_SECONDS = 0
    key = "tenant_a:telecom_contas:web-001"
    send(api, "Minha fatura veio alta")
    created = _rows_back(key, 2)
    send(api, "Minha fatura veio alta de novo")
    yesterday = _rows_back(key, 1)  # a day with its messages that is not the day it was created on

    def languages() -> dict:
        found = api.get("/api/analytics/languages", {"days": 3}).json()["languages"]
        return {item["language"]: item for item in found}

    before = languages()
    assert (before["pt"]["conversations"], before["pt"]["messages"], before["en"]["messages"]) == (1, 2, 0)
    assert RollupDay.objects.filter(day__in=[created, yesterday], sealed=True).count() == 2

    send(api, "My phone has no signal since yesterday")  # clear evidence: the conversation's language is English now

    assert list(RollupDay.objects.filter(day__in=[created, yesterday], sealed=True).values_list("day", flat=True)) == [
        yesterday
    ]
    after = languages()
    assert (after["pt"]["conversations"], after["pt"]["messages"], after["pt"]["answers"]) == (0, 2, 2)
    assert (after["en"]["conversations"], after["en"]["messages"], after["en"]["answers"]) == (1, 1, 1)
    assert RollupDay.objects.filter(day__in=[created, yesterday], sealed=True).count() == 2  # summed again


def test_a_conversation_counts_under_the_version_it_started_on_read_live_and_summed_alike(api, telecom, settings):
    """Its later turn, served by the next version, counts under that one; the conversation stays under the first."""
    from agents.models import AgentProfile
    from analytics.models import RollupDay
    from releases.versions import version_publish
    from routing.models import Keyword

    settings.ANALYTICS_ROLLUP_GRACE_SECONDS = 0
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    version_publish(profile=profile, note="first")
    assert send(api, "Minha fatura veio alta")["metadata"]["version"] == 1
    Keyword.objects.create(intent=profile.intents.get(name="retail_order_tracking"), text="modem")
    version_publish(profile=profile, note="modem routes to orders", based_on=1)
    assert send(api, "meu modem")["metadata"]["version"] == 2

    def figures() -> list[tuple[int, int]]:
        read = {"days": 2}
        return [
            (
                api.get("/api/analytics/handoffs", {**read, "version": version}).json()["total_conversations"],
                api.get("/api/analytics/routing-methods", {**read, "version": version}).json()["total"],
            )
            for version in ("1", "2", "draft")
        ]

    day = _to_yesterday("tenant_a:telecom_contas:web-001")
    settings.ANALYTICS_ROLLUPS = False  # every row read
    live = figures()
    settings.ANALYTICS_ROLLUPS = True
    assert figures() == live == [(1, 1), (0, 1), (0, 0)]  # yesterday summed by the read
    assert RollupDay.objects.get(day=day).sealed


def _rows_to(conversation_key: str, moment: dt.datetime) -> None:
    """Date the conversation and everything written so far at ``moment``."""
    from conversations.models import Conversation, Message, RouteDecisionRecord, ToolCall
    from handoffs.models import Handoff

    conversation = Conversation.objects.get(conversation_key=conversation_key)
    for model in (Message, RouteDecisionRecord, ToolCall, Handoff):
        model.objects.filter(conversation=conversation).update(created_at=moment)
    Conversation.objects.filter(pk=conversation.pk).update(created_at=moment)


def _live_day_at(settings, moment: dt.datetime) -> None:
    """Days and hours closed up to ``moment`` (by the grace): its day is the live day, its earlier hours closed."""
    settings.ANALYTICS_ROLLUP_GRACE_SECONDS = (dt.datetime.now(dt.UTC) - moment).total_seconds()


def _yesterday_at(hour: int, minute: int = 0) -> dt.datetime:
    return dt.datetime.combine(dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1), dt.time(hour, minute), dt.UTC)


def _marks(hour: dt.datetime) -> dict[str, bool]:
    from analytics.models import RollupHour

    return dict(RollupHour.objects.filter(hour=hour).values_list("fact", "sealed"))


def test_a_conversation_of_a_summed_hour_that_moves_later_unseals_that_hour_of_the_conversations_alone(
    api, telecom, settings
):
    """On the live day the mark is each table's hour: the messages' hour stays summed, the conversations' is summed
    again by the next read."""
    assert send(api, "Minha fatura veio alta")["agent"] == "billing_agent"
    _rows_to("tenant_a:telecom_contas:web-001", _yesterday_at(10, 10))
    _live_day_at(settings, _yesterday_at(12, 30))  # yesterday is the live day, its hours up to 11:00 closed
    before = api.get("/api/analytics/handoffs", {"days": 2}).json()  # sums yesterday's 00:00-11:00
    assert (before["total_conversations"], before["conversations_with_handoffs"]) == (1, 0)
    ten = _yesterday_at(10)
    assert set(_marks(ten).values()) == {True} and len(_marks(ten)) == len(FACTS)

    assert send(api, "E o meu pedido?")["agent"] == "orders_agent"  # its first routing handoff, counted again

    assert {fact for fact, sealed in _marks(ten).items() if not sealed} == {"conversations"}
    after = api.get("/api/analytics/handoffs", {"days": 2}).json()
    assert (after["total_handoffs"], after["total_conversations"], after["conversations_with_handoffs"]) == (1, 1, 1)
    assert set(_marks(ten).values()) == {True}  # summed again by that read


def test_a_rating_given_through_the_api_on_an_answer_of_a_summed_hour_unseals_that_hour_of_the_ratings_alone(
    api, telecom, settings
):
    """A rating counts in the hour its answer was given, however much later: the ratings' hour is summed again by the
    next read, every other table's stays."""
    answered = send(api, "Minha fatura veio alta")
    _rows_to("tenant_a:telecom_contas:web-001", _yesterday_at(10, 10))
    _live_day_at(settings, _yesterday_at(12, 30))
    window = {"days": 2}
    assert api.get("/api/analytics/quality", window).json()["routing_accuracy"]["ratings"]["rated"] == 0
    ten = _yesterday_at(10)
    assert set(_marks(ten).values()) == {True}

    for rating in ("down", "up"):
        response = api.post(
            f"/api/sessions/{answered['conversation_key']}/feedback",
            {"message_id": answered["message_id"], "rating": rating},
            format="json",
        )
        assert response.status_code in (200, 201), response.content
        assert {fact for fact, sealed in _marks(ten).items() if not sealed} == {"ratings"}
        ratings = api.get("/api/analytics/quality", window).json()["routing_accuracy"]["ratings"]
        assert (ratings["rated"], ratings[rating]) == (1, 1)
        assert set(_marks(ten).values()) == {True}  # summed again by that read


def test_clearing_a_session_unseals_the_hours_of_the_rows_it_deletes_on_the_live_day(api, telecom, settings):
    send(api, "Minha fatura veio alta")
    send(api, "E o meu pedido?")
    _rows_to("tenant_a:telecom_contas:web-001", _yesterday_at(9, 45))
    _live_day_at(settings, _yesterday_at(12, 30))
    assert sum(row["turns"] for row in api.get("/api/analytics/agents", {"days": 2}).json()) == 2
    nine = _yesterday_at(9)
    assert set(_marks(nine).values()) == {True}

    response = api.post("/api/sessions/tenant_a:telecom_contas:web-001/clear")
    assert response.status_code == 200, response.content

    assert set(_marks(nine).values()) == {False}
    assert set(_marks(_yesterday_at(10)).values()) == {True}  # no row of theirs was written then
    assert api.get("/api/analytics/agents", {"days": 2}).json() == []
    assert api.get("/api/analytics/handoffs", {"days": 2}).json()["total_handoffs"] == 1  # handoff rows stay
