"""A rehearsed turn (a conversation test's) tells nobody: its operational events are not published and nothing is
pushed to a group, while the same calls outside a rehearsal reach the channel layer."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from common.infra import bus
from common.rehearsal import rehearsing
from common.tests.private_redis import PrivateRedis
from conversations.delivery import push_now


@pytest.fixture
def layer_on_private_redis(settings, monkeypatch):
    with PrivateRedis() as redis:
        settings.CHANNEL_LAYERS = {
            "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [redis.url]}}
        }
        settings.EVENTS_CHANNEL_LAYER = True
        settings.EVENTS_WEBHOOK_URL = ""
        monkeypatch.setattr(bus, "_current", None)
        yield get_channel_layer()


def listening(layer, group: str) -> str:
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(group, channel)
    return channel


def received(layer, channel: str) -> dict:
    return async_to_sync(layer.receive)(channel)


def test_an_event_of_a_rehearsed_turn_is_not_published_and_one_outside_it_is(layer_on_private_redis):
    layer = layer_on_private_redis
    channel = listening(layer, bus.EVENTS_GROUP)

    with rehearsing():
        assert bus.publish_event("agent.completed", {"n": 1}, tenant="tenant_a") is None
    bus.publish_event("agent.completed", {"n": 2}, tenant="tenant_a")
    assert bus.events_flush(timeout=10)

    assert [event["data"] for event in received(layer, channel)["events"]] == [{"n": 2}]


def test_a_push_from_a_rehearsed_turn_reaches_no_group_and_one_outside_it_does(layer_on_private_redis):
    layer = layer_on_private_redis
    channel = listening(layer, "desk.1")

    with rehearsing():
        push_now("desk.1", "desk.event", {"n": 1})
    push_now("desk.1", "desk.event", {"n": 2})

    # A group's messages arrive in the order they were sent: the first is the one sent outside the rehearsal.
    assert received(layer, channel) == {"type": "desk.event", "event": {"n": 2}}
