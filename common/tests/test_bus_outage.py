"""While the events' channel layer (Redis) is down, its copies are dropped and the outage is logged once, not per
event or batch; when Redis is back the events reach the layer again, and that is logged once too."""

from __future__ import annotations

import logging
import time

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from common.infra import bus
from common.tests.private_redis import PrivateRedis

WINDOWS = 12  # events published apart, each window its own batch for the layer


@pytest.fixture
def courier_on_private_redis(settings, monkeypatch):
    """A courier of the test's own (the process's may have been made with other settings), its layer on a Redis the
    test stops and starts."""
    with PrivateRedis() as redis:
        settings.CHANNEL_LAYERS = {
            "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [redis.url]}}
        }
        settings.EVENTS_CHANNEL_LAYER = True
        settings.EVENTS_WEBHOOK_URL = ""
        settings.REDIS_OUTAGE_PAUSE_SECONDS = 0.2
        monkeypatch.setattr(bus, "_current", None)
        yield redis


def publish(n: int) -> None:
    bus.publish_event("agent.completed", {"n": n}, tenant="tenant_a")
    assert bus.events_flush(timeout=10)


def test_a_redis_outage_is_logged_once_for_the_events_layer_not_per_batch_and_its_end_once(
    courier_on_private_redis, caplog
):
    redis = courier_on_private_redis
    publish(0)
    redis.stop()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="common"):
        for n in range(WINDOWS):
            publish(n)
            time.sleep(0.05)
        redis.start()
        layer = get_channel_layer()
        channel = async_to_sync(layer.new_channel)()
        async_to_sync(layer.group_add)(bus.EVENTS_GROUP, channel)
        time.sleep(0.25)  # the circuit's pause after the last failure
        publish(WINDOWS)

    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith("Redis (events channel layer) unreachable")
    assert warnings[1].startswith("Redis (events channel layer) reachable again")
    received = async_to_sync(layer.receive)(channel)
    assert [event["data"] for event in received["events"]] == [{"n": WINDOWS}]
