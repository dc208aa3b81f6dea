"""Throttling per API key and staff user, and the lockout of addresses that send wrong keys (tenants/throttles.py).

Rates here are per day, so that no test straddles a window's end.
"""

from __future__ import annotations

import logging

import pytest
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from rest_framework.test import APIClient

from tenants import throttles
from tenants.auth import _KEY_CACHE
from tenants.throttles import (
    ERROR_AUTH_LOCKED,
    auth_failure_record,
    auth_lockout_wait,
    client_address,
    rate_hit,
    rate_parse,
    throttle_settings_check,
)

pytestmark = pytest.mark.django_db

MESSAGE = {"channel": "web", "agent_id": "telecom_contas", "payload": {"text": "Qual o melhor plano?"}}


@pytest.fixture(autouse=True)
def fresh_counters():
    """Counters and lockouts of earlier tests (the same key ids, 127.0.0.1) start from nothing."""
    cache.clear()
    _KEY_CACHE.clear()
    yield
    cache.clear()


def keyed(raw: str, address: str = "198.51.100.1", **extra) -> APIClient:
    client = APIClient(REMOTE_ADDR=address, **extra)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def assert_throttled(response) -> None:
    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 1
    error = response.json()["error"]
    assert error["code"] == "throttled" and error["fields"] == {}


# -- per key and per user ----------------------------------------------------------------------------------------


def test_a_burst_over_the_message_rate_of_one_key_is_answered_429(tenant_key, outsider_key, telecom, settings):
    settings.API_MESSAGE_RATE_PER_KEY = "3/day"
    client = keyed(tenant_key.raw)
    statuses = [client.post("/api/gateway/message", MESSAGE, format="json").status_code for _ in range(3)]
    assert statuses == [200, 200, 200]
    assert_throttled(client.post("/api/gateway/message", MESSAGE, format="json"))
    assert_throttled(client.post("/api/chat/message", MESSAGE, format="json"))  # one rate for every message route

    other = keyed(outsider_key.raw)  # another key, same address: its own count
    assert other.post("/api/gateway/message", MESSAGE, format="json").status_code == 200
    assert client.get("/api/agents").status_code == 200  # the other routes have their own rate


def test_every_other_api_route_counts_against_the_api_rate(tenant_key, telecom, settings):
    settings.API_RATE_PER_KEY = "2/day"
    client = keyed(tenant_key.raw)
    assert [client.get("/api/agents").status_code for _ in range(2)] == [200, 200]
    assert_throttled(client.get("/api/agents"))
    assert_throttled(client.get("/api/sessions/tenant_a:telecom_contas:x/messages"))


def test_a_staff_session_is_counted_per_user(client, staff_user, django_user_model, telecom, settings):
    settings.API_RATE_PER_KEY = "1/day"
    client.force_login(staff_user)
    assert client.get("/api/agents").status_code == 200
    assert_throttled(client.get("/api/agents"))
    client.force_login(django_user_model.objects.create_superuser("second", "s@example.com", "pw"))
    assert client.get("/api/agents").status_code == 200


def test_anonymous_health_checks_are_not_counted(client, settings):
    settings.API_RATE_PER_KEY = "1/day"
    assert [client.get("/api/health").status_code for _ in range(3)] == [200, 200, 200]


def test_off_turns_a_rate_off(tenant_key, telecom, settings):
    settings.API_RATE_PER_KEY = "off"
    client = keyed(tenant_key.raw)
    assert {client.get("/api/agents").status_code for _ in range(5)} == {200}


# -- the lockout of addresses that send wrong keys ---------------------------------------------------------------


def test_wrong_keys_lock_the_address_out_without_touching_the_database(
    tenant_key, telecom, settings, django_assert_num_queries
):
    settings.AUTH_FAILURE_LIMIT = 3
    for n in range(3):
        assert keyed(f"ark_wrong_{n}", "203.0.113.7").get("/api/agents").status_code == 401
    with django_assert_num_queries(0):
        locked = keyed("ark_wrong_new", "203.0.113.7").get("/api/agents")
    assert_throttled(locked)
    assert locked.json()["error"]["message"].startswith(ERROR_AUTH_LOCKED)
    assert int(locked["Retry-After"]) <= settings.AUTH_LOCKOUT_SECONDS

    assert keyed("ark_wrong_elsewhere", "203.0.113.8").get("/api/agents").status_code == 401  # another address
    assert keyed(tenant_key.raw, "203.0.113.8").get("/api/agents").status_code == 200


def test_x_forwarded_for_is_ignored_unless_proxies_are_trusted(telecom, settings):
    settings.AUTH_FAILURE_LIMIT = 2
    for n in range(2):  # a client cannot escape the lockout by making up the header
        keyed(f"ark_wrong_{n}", "203.0.113.9", HTTP_X_FORWARDED_FOR=f"10.0.0.{n}").get("/api/agents")
    assert keyed("ark_wrong_x", "203.0.113.9", HTTP_X_FORWARDED_FOR="10.0.0.9").get("/api/agents").status_code == 429

    settings.TRUSTED_PROXY_COUNT = 1  # behind one proxy: the address it saw, the last hop
    behind = keyed("ark_wrong_y", "203.0.113.9", HTTP_X_FORWARDED_FOR="10.0.0.9")
    assert behind.get("/api/agents").status_code == 401


def test_the_client_address_is_the_hop_the_outermost_trusted_proxy_saw(settings):
    assert client_address("10.0.0.1", "1.1.1.1, 2.2.2.2") == "10.0.0.1"
    settings.TRUSTED_PROXY_COUNT = 1
    assert client_address("10.0.0.1", "1.1.1.1, 2.2.2.2") == "2.2.2.2"
    settings.TRUSTED_PROXY_COUNT = 2
    assert client_address("10.0.0.1", "1.1.1.1, 2.2.2.2") == "1.1.1.1"
    assert client_address("10.0.0.1", "2.2.2.2") == "2.2.2.2"  # fewer hops than proxies: the farthest one
    assert client_address("10.0.0.1", None) == "10.0.0.1"


# -- settings, and a cache that fails --------------------------------------------------------------------------


def test_rates_read_as_count_and_period():
    assert rate_parse("300/minute") == (300, 60)
    assert rate_parse("5/s") == (5, 1)
    assert rate_parse("off") is None
    for bad in ("many/minute", "5/fortnight", "0/minute", "5"):
        with pytest.raises(ImproperlyConfigured):
            rate_parse(bad)


def test_a_bad_rate_fails_the_system_check(settings):
    settings.API_RATE_PER_KEY = "lots"
    assert [error.id for error in throttle_settings_check()] == ["tenants.E001"]


def test_a_cache_that_fails_lets_requests_through_and_is_logged_once(settings, caplog, monkeypatch):
    monkeypatch.setattr(throttles, "_failing", False)  # whatever an earlier test's outage left
    settings.API_RATE_PER_KEY = "1/day"
    settings.AUTH_FAILURE_LIMIT = 1
    unreachable = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:9/0"}
    }
    with override_settings(CACHES=unreachable), caplog.at_level(logging.WARNING, logger="tenants.throttles"):
        assert [rate_hit(scope="api", ident="key:1") for _ in range(3)] == [None, None, None]
        auth_failure_record("203.0.113.10")
        assert auth_lockout_wait("203.0.113.10") is None
    assert len([r for r in caplog.records if "Throttling skipped" in r.getMessage()]) == 1
