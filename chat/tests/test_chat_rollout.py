"""``POST /api/chat/message`` follows the multi_agent rollout flag; the preview endpoint bypasses it."""

from __future__ import annotations

import pytest

from agents.models import AgentProfile
from chat.intake import MessageIn, Route, turn_input_build
from common.config_version import config_version_bump
from conversations.models import Conversation, Message
from conversations.public import TurnInput
from routing.rollout import bucket
from routing.services import rollout_flag_set, rollout_tenant_override_set, rollout_user_override_set
from tenants.models import ApiKey

FLAG = "multi_agent"
TWO_TOPICS = "Meu pedido atrasou e minha fatura veio duplicada"


def users(count: int, *, inside: bool, percentage: int = 50) -> list[str]:
    """``count`` user ids in the flag's cohort at ``percentage`` (``inside``), or outside it."""
    ids = (f"user-{i}" for i in range(10_000))
    return [user for user in ids if (bucket(FLAG, user) <= percentage) == inside][:count]


IN_AT_50 = users(2, inside=True)
OUT_AT_50 = users(2, inside=False)


@pytest.fixture
def supervised(telecom):
    AgentProfile.objects.filter(pk=telecom.pk).update(routing_mode="supervisor")
    config_version_bump()  # QuerySet.update bypasses the invalidation signals
    return telecom


def rollout(**changes):
    rollout_flag_set(key=FLAG, actor="test", **changes)


def chat(api, text, user, *, path="/api/chat/message", session=None):
    payload = {"text": text, "user_id": user}
    if session or user:
        payload["session_id"] = session or user
    return api.post(path, {"agent_id": "telecom_contas", "payload": payload}, format="json")


def answer(api, text, user, **kwargs):
    response = chat(api, text, user, **kwargs)
    assert response.status_code == 200, response.content
    return response.json()


def test_a_user_in_the_cohort_gets_the_multi_agent_graph_and_the_metadata_says_why(api, supervised):
    rollout(percentage=50)
    user = IN_AT_50[0]

    body = answer(api, TWO_TOPICS, user)

    assert body["metadata"]["route"] == "supervisor_agent"
    assert body["metadata"]["route_decision"]["agents"] == ["billing_agent", "orders_agent"]
    flag = body["metadata"]["flags"][FLAG]
    assert flag["enabled"] is True and flag["reason"] == "bucket"
    assert flag["bucket"] == bucket(FLAG, user) <= 50
    assert (flag["percentage"], flag["stickiness"], flag["stickiness_value"]) == (50, "user_id", user)
    assert body["metadata"]["cohort"] == "multi_agent"


def test_a_user_outside_gets_the_single_agent_path(api, supervised):
    rollout(percentage=50)
    user = OUT_AT_50[0]

    body = answer(api, TWO_TOPICS, user)

    assert body["agent"] == "support_agent"  # the profile's general (fallback) specialist
    assert body["metadata"]["mode"] == "single_agent"
    assert body["metadata"]["agents"] == ["support_agent"]
    assert body["metadata"]["supervisor"] is None and body["metadata"]["handoffs"] == []
    assert body["metadata"]["route_decision"]["metadata"]["routed_agent"] == "billing_agent"  # the router's pick
    flag = body["metadata"]["flags"][FLAG]
    assert flag["enabled"] is False and flag["reason"] == "bucket" and flag["bucket"] > 50
    assert body["metadata"]["cohort"] == "single_agent"


def test_the_same_user_stays_in_the_same_cohort(api, supervised):
    rollout(percentage=50)
    for user in IN_AT_50 + OUT_AT_50:
        first = answer(api, TWO_TOPICS, user, session=f"{user}-a")["metadata"]["cohort"]
        again = answer(api, TWO_TOPICS, user, session=f"{user}-b")["metadata"]["cohort"]
        assert first == again == ("multi_agent" if user in IN_AT_50 else "single_agent")


def test_a_user_override_beats_the_percentage_and_a_tenant_override_beats_the_bucket(api, supervised, tenant):
    rollout(percentage=0)
    rollout_user_override_set(key=FLAG, user_id="alpha-tester", enabled=True, actor="test")
    body = answer(api, TWO_TOPICS, "alpha-tester")
    assert body["metadata"]["flags"][FLAG]["reason"] == "user_override"
    assert body["metadata"]["route"] == "supervisor_agent"

    rollout(percentage=100)
    rollout_tenant_override_set(key=FLAG, tenant_slug=tenant.slug, enabled=False, actor="test")
    body = answer(api, TWO_TOPICS, IN_AT_50[0])
    assert body["metadata"]["flags"][FLAG]["reason"] == "tenant_override"
    assert body["metadata"]["mode"] == "single_agent"
    # ... and the user override still wins over the tenant's.
    assert answer(api, TWO_TOPICS, "alpha-tester")["metadata"]["cohort"] == "multi_agent"


def test_the_kill_switch_moves_everyone_to_the_single_agent_path_at_once(api, supervised):
    rollout(percentage=100)
    rollout_user_override_set(key=FLAG, user_id="alpha-tester", enabled=True, actor="test")
    assert {answer(api, TWO_TOPICS, u)["metadata"]["cohort"] for u in [*IN_AT_50, "alpha-tester"]} == {"multi_agent"}

    rollout(kill_switch=True)

    for user in [*IN_AT_50, *OUT_AT_50, "alpha-tester"]:
        body = answer(api, TWO_TOPICS, user)
        assert body["metadata"]["mode"] == "single_agent"
        assert body["metadata"]["flags"][FLAG]["reason"] == "kill_switch"


def test_the_cohort_is_stored_with_the_messages_and_the_conversation(api, supervised):
    rollout(percentage=50)
    inside = answer(api, TWO_TOPICS, IN_AT_50[0])
    outside = answer(api, TWO_TOPICS, OUT_AT_50[0])

    for body, cohort in ((inside, "multi_agent"), (outside, "single_agent")):
        conversation = Conversation.objects.get(conversation_key=body["conversation_key"])
        assert conversation.cohort == cohort
        assert set(Message.objects.filter(conversation=conversation).values_list("cohort", flat=True)) == {cohort}
        stored = Message.objects.get(conversation=conversation, role="assistant").metadata["flags"][FLAG]
        assert stored == body["metadata"]["flags"][FLAG]


def test_a_change_of_percentage_applies_to_the_users_next_conversation_not_mid_conversation(api, supervised):
    rollout(percentage=0)
    user = IN_AT_50[0]
    assert answer(api, TWO_TOPICS, user, session="first")["metadata"]["cohort"] == "single_agent"

    rollout(percentage=50)

    kept = answer(api, TWO_TOPICS, user, session="first")["metadata"]
    assert kept["cohort"] == "single_agent" and kept["mode"] == "single_agent"
    assert kept["flags"]["multi_agent"]["reason"] == "conversation_cohort"
    assert answer(api, TWO_TOPICS, user, session="second")["metadata"]["cohort"] == "multi_agent"


def test_the_kill_switch_moves_a_conversation_mid_way_all_the_same(api, supervised):
    rollout(percentage=100)
    user = IN_AT_50[0]
    assert answer(api, TWO_TOPICS, user, session="s")["metadata"]["cohort"] == "multi_agent"

    rollout(kill_switch=True)

    assert answer(api, TWO_TOPICS, user, session="s")["metadata"]["cohort"] == "single_agent"


def test_without_a_user_id_session_stickiness_decides_and_user_stickiness_says_so(api, supervised):
    rollout(percentage=100)
    body = answer(api, TWO_TOPICS, "")
    assert body["metadata"]["flags"][FLAG]["reason"] == "no_stickiness_value"
    assert body["metadata"]["cohort"] == "single_agent"

    rollout(stickiness="session_id")
    body = answer(api, TWO_TOPICS, "", session="sess-1")
    assert body["metadata"]["flags"][FLAG]["stickiness_value"] == "sess-1"
    assert body["metadata"]["cohort"] == "multi_agent"


def test_the_flag_costs_no_query_beyond_the_gateways(api, supervised, django_assert_num_queries):
    rollout(percentage=100)
    answer(api, "Minha fatura veio alta", "warm-user")
    # the same budget as POST /api/gateway/message (chat/tests/test_api.py): the flag is in the snapshot.
    with django_assert_num_queries(2):
        answer(api, "Minha fatura veio alta de novo", "warm-user")


def test_the_preview_endpoint_needs_a_preview_key_or_staff(api, supervised, tenant_key, client, staff_user):
    rollout(percentage=0)

    refused = chat(api, TWO_TOPICS, "someone", path="/api/chat/multi-agent/message")
    assert refused.status_code == 403
    assert "can_preview" in refused.json()["error"]["message"]

    ApiKey.objects.filter(pk=tenant_key.pk).update(can_preview=True)
    config_version_bump()
    body = answer(api, TWO_TOPICS, OUT_AT_50[0], path="/api/chat/multi-agent/message")
    assert body["metadata"]["route"] == "supervisor_agent"
    flag = body["metadata"]["flags"][FLAG]
    assert (flag["enabled"], flag["reason"], flag["flag_result"]) == (True, "preview", False)
    assert body["metadata"]["cohort"] == ""  # forced, so not part of the cohort comparison

    client.force_login(staff_user)
    staff = client.post(
        "/api/chat/multi-agent/message",
        {"agent_id": "telecom_contas", "tenant_id": tenant_key.tenant.slug, "payload": {"text": TWO_TOPICS}},
        content_type="application/json",
    )
    assert staff.status_code == 200
    assert staff.json()["metadata"]["route"] == "supervisor_agent"


def test_bad_input_on_the_chat_endpoint_names_the_field_and_stores_nothing(api, supervised):
    response = api.post("/api/chat/message", {"agent_id": "telecom_contas", "payload": {"text": ""}}, format="json")
    assert response.status_code == 400
    assert "payload.text" in response.json()["error"]["fields"]
    assert Conversation.objects.count() == 0


def test_a_messages_engine_input_is_built_once_with_the_flags_answer_in_it(supervised, tenant, monkeypatch):
    rollout(percentage=50)
    inside, outside = IN_AT_50[0], OUT_AT_50[0]
    built: list[str] = []
    init = TurnInput.__init__

    def counted(self, *args, **kwargs):
        built.append(kwargs.get("user_id", ""))
        init(self, *args, **kwargs)

    monkeypatch.setattr(TurnInput, "__init__", counted)

    def built_for(user: str) -> TurnInput:
        message = MessageIn(agent_id="telecom_contas", text=TWO_TOPICS, session_id=user, user_id=user, channel="web")
        return turn_input_build(tenant=tenant, message=message, route=Route.ROLLOUT, counted=False)

    cohort, single = built_for(inside), built_for(outside)

    assert built == [inside, outside]  # once each, the rollout's answer given to the one construction
    assert (cohort.cohort, cohort.single_agent, cohort.flags[FLAG]["reason"]) == ("multi_agent", False, "bucket")
    assert (single.cohort, single.single_agent, single.flags[FLAG]["enabled"]) == ("single_agent", True, False)
