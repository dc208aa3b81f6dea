"""With Redis down the shared cache answers as a miss, chat goes on, the outage is logged once; Redis is used
again as soon as it is back, without a restart."""

from __future__ import annotations

import json
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
            "BACKEND": "common.infra.cache.ResilientRedisCache",
            "LOCATION": private_redis.url,
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 1.0, "outage_pause": PAUSE_SECONDS},
        }
    }
    return private_redis


def stored_keys(url: str) -> list[bytes]:
    return redis.Redis.from_url(url).keys("*")


def outage_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "common.infra.cache"]


def test_the_cache_answers_as_a_miss_while_redis_is_down_and_uses_redis_again_when_it_returns(redis_cache, caplog):
    caplog.set_level(logging.WARNING, logger="common.infra.cache")
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
    assert backend.circuit.is_open and not backend.circuit.allows()
    redis_cache.start()
    assert backend.get("x") is None  # still skipped: the circuit is open for the pause
    assert backend.circuit.is_open
    time.sleep(PAUSE_SECONDS + 0.1)
    backend.set("x", 1)
    assert not backend.circuit.is_open and backend.get("x") == 1


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


def served_messages(tenant_key, count: int, session: str) -> list[int]:
    """``count`` messages posted through the ASGI application, each a request of its own, as a server runs them."""
    from channels.testing import HttpCommunicator

    from platform.asgi import django_asgi_app
    from tests.streaming import run

    body = json.dumps(
        {"agent_id": "telecom_contas", "payload": {"text": "Minha fatura veio alta", "session_id": session}}
    )
    headers = [
        (b"host", b"testserver"),
        (b"content-type", b"application/json"),
        (b"authorization", f"Bearer {tenant_key.raw}".encode()),
        (b"content-length", str(len(body)).encode()),
    ]

    async def go() -> list[int]:
        statuses = []
        for _ in range(count):
            communicator = HttpCommunicator(
                django_asgi_app, "POST", "/api/gateway/message", body=body.encode(), headers=headers
            )
            statuses.append((await communicator.get_response(timeout=30))["status"])
            await communicator.wait(timeout=30)
        return statuses

    return run(go())


def connections_received(url: str) -> int:
    return redis.Redis.from_url(url).info("stats")["total_connections_received"]


@pytest.mark.django_db(transaction=True)
def test_requests_served_over_asgi_share_one_redis_connection_pool(redis_cache, tenant_key, telecom):
    """Under ASGI each request runs in a context of its own, and Django builds the cache anew for each: a Redis
    connection per request, opened and dropped."""
    served_messages(tenant_key, 1, "warm")
    before = connections_received(redis_cache.url)

    assert served_messages(tenant_key, 20, "pooled") == [200] * 20

    assert connections_received(redis_cache.url) - before <= 2  # the pool's, kept: not one per request


@pytest.mark.django_db(transaction=True)
def test_while_redis_is_down_requests_served_over_asgi_skip_it_together_and_the_outage_is_logged_once(
    redis_cache, tenant_key, telecom, caplog
):
    caplog.set_level(logging.WARNING, logger="common.infra.cache")
    served_messages(tenant_key, 1, "warm")
    redis_cache.stop()

    assert served_messages(tenant_key, 5, "down") == [200] * 5

    assert len([line for line in outage_lines(caplog) if "unreachable" in line]) == 1  # one circuit, not one a request


def test_the_file_cache_makes_its_folder_once_per_process_and_again_when_a_write_finds_it_gone(tmp_path):
    import shutil

    from common.infra.cache import FileCache

    folder = tmp_path / "cache"
    first = FileCache(str(folder), {})
    assert folder.is_dir()
    first.set("kept", 1)
    shutil.rmtree(folder)

    second = FileCache(str(folder), {})  # a request's own object: no folder made for it
    assert not folder.exists()
    assert second.get("kept") is None
    second.set("again", 2)
    assert second.get("again") == 2 and folder.is_dir()
