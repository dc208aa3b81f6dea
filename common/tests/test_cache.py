"""With Redis down the shared cache answers as a miss, chat goes on, the outage is logged once; Redis is used
again as soon as it is back, without a restart."""

from __future__ import annotations

import logging
import time

import pytest
import redis
from django.core.cache import cache

from common.tests.private_redis import PrivateRedis

PAUSE_SECONDS = 0.5


@pytest.fixture
def redis_cache(settings):
    with PrivateRedis() as private_redis:
        yield _pointed_at(settings, private_redis)


def _pointed_at(settings, private_redis: PrivateRedis) -> PrivateRedis:
    settings.CACHES = {
        "default": {
            "BACKEND": "common.cache.ResilientRedisCache",
            "LOCATION": private_redis.url,
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 1.0, "outage_pause": PAUSE_SECONDS},
        }
    }
    return private_redis


def stored_keys(url: str) -> list[bytes]:
    return redis.Redis.from_url(url).keys("*")


def outage_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "common.cache"]


def test_the_cache_answers_as_a_miss_while_redis_is_down_and_uses_redis_again_when_it_returns(redis_cache, caplog):
    caplog.set_level(logging.WARNING, logger="common.cache")
    cache.set("before", 1)
    assert cache.get("before") == 1 and stored_keys(redis_cache.url)

    redis_cache.stop()
    for _ in range(20):
        assert cache.get("before") is None
        cache.set("during", 2)  # dropped, not raised
        assert cache.add("during", 2) is False
    with pytest.raises(ValueError):
        cache.incr("before")
    assert len(outage_lines(caplog)) == 1  # one line for the outage, not one per call
    assert "unreachable" in outage_lines(caplog)[0]

    redis_cache.start()  # empty: nothing was persisted
    time.sleep(PAUSE_SECONDS + 0.1)
    cache.set("after", 3)
    assert cache.get("after") == 3
    assert stored_keys(redis_cache.url)  # written to Redis again
    assert "reachable again" in outage_lines(caplog)[-1]


def test_an_open_circuit_skips_redis_instead_of_waiting_on_it(redis_cache):
    from django.core.cache import caches

    redis_cache.stop()
    backend = caches["default"]
    assert backend.get("x") is None
    assert backend.circuit.down and not backend.circuit.allows()
    redis_cache.start()
    assert backend.get("x") is None  # still skipped: the circuit is open for the pause
    assert backend.circuit.down
    time.sleep(PAUSE_SECONDS + 0.1)
    backend.set("x", 1)
    assert not backend.circuit.down and backend.get("x") == 1


@pytest.mark.django_db(transaction=True)
def test_chat_answers_while_redis_is_down(redis_cache, api, telecom):
    def send(session_id: str) -> int:
        response = api.post(
            "/api/gateway/message",
            {"agent_id": "telecom_contas", "payload": {"text": "Minha fatura veio alta", "session_id": session_id}},
            format="json",
        )
        return response.status_code

    assert send("up") == 200
    redis_cache.stop()
    assert [send(f"down-{i}") for i in range(5)] == [200] * 5
    redis_cache.start()
    time.sleep(PAUSE_SECONDS + 0.1)
    assert send("back") == 200
    assert stored_keys(redis_cache.url)  # the configuration version went back to the shared cache
