"""Throttling per API key and staff user, per end user's session, per tenant, and the lockout of addresses that
send wrong keys (tenants/throttles.py).

Rates here are per day, so that no test straddles a window's end.
"""

from __future__ import annotations

import logging
import time

import pytest
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from rest_framework.test import APIClient

from tenants import auth, throttles
from tenants.auth import _KEY_CACHE
from tenants.models import Tenant
from tenants.throttles import (
    ERROR_AUTH_LOCKED,
    ERROR_RATE_KEY_MESSAGES,
    ERROR_RATE_SESSION,
    MESSAGES_SCOPE,
    auth_failure_record,
    auth_lockout_wait,
    client_address,
    proxy_settings_check,
    rate_hit,
    rate_parse,
    request_throttle,
    session_throttle,
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


# -- messages: per key, per end user or session, per tenant ------------------------------------------------------


def limits_set(tenant: Tenant, **limits: str) -> None:
    """Limits saved as the tenant page saves them: every process sees the change at its next message."""
    for name, value in limits.items():
        setattr(tenant, name, value)
    tenant.save(update_fields=list(limits))


def message(session: str = "", agent: str = "telecom_contas", **payload) -> dict:
    body = {"text": "Qual o melhor plano?", **({"session_id": session} if session else {}), **payload}
    return {"agent_id": agent, "payload": body}


def test_one_key_that_serves_every_customer_sends_360_messages_a_minute_by_default(tenant_key, telecom):
    for n in range(356):  # counted as a message route counts them, without their turns (~80 ms each here)
        request_throttle(scope=MESSAGES_SCOPE, ident=f"key:{tenant_key.pk}", tenant_pk=tenant_key.tenant_id)
        session_throttle(tenant_pk=tenant_key.tenant_id, session_id=f"c{n}", user_id="")
    client = keyed(tenant_key.raw)
    answered = [
        client.post("/api/gateway/message", message(f"c{n}"), format="json").status_code for n in range(356, 360)
    ]
    assert answered == [200] * 4


def test_one_session_flooding_is_refused_while_the_tenants_other_sessions_are_answered(tenant_key, telecom):
    limits_set(tenant_key.tenant, message_rate_per_session="2/day")
    client = keyed(tenant_key.raw)
    assert [client.post("/api/gateway/message", message("flood"), format="json").status_code for _ in range(2)] == [
        200,
        200,
    ]
    refused = client.post("/api/chat/message", message("flood"), format="json")  # every face, one count
    assert_throttled(refused)
    assert refused.json()["error"]["message"].startswith(ERROR_RATE_SESSION.format(rate="2/day"))
    assert client.post("/api/gateway/message", message("calm"), format="json").status_code == 200


def test_without_a_session_the_end_user_is_counted(tenant_key, telecom):
    limits_set(tenant_key.tenant, message_rate_per_session="1/day")
    client = keyed(tenant_key.raw)
    assert client.post("/api/gateway/message", message(user_id="u-flood"), format="json").status_code == 200
    assert_throttled(client.post("/api/gateway/message", message(user_id="u-flood"), format="json"))
    assert client.post("/api/gateway/message", message(user_id="u-calm"), format="json").status_code == 200


def test_a_tenants_own_key_rate_replaces_the_default_for_its_keys_only(tenant_key, outsider_key, telecom):
    limits_set(tenant_key.tenant, message_rate_per_key="2/day")
    client = keyed(tenant_key.raw)
    for session in ("a", "b"):
        assert client.post("/api/gateway/message", message(session), format="json").status_code == 200
    refused = client.post("/api/gateway/message", message("c"), format="json")
    assert_throttled(refused)
    assert refused.json()["error"]["message"].startswith(ERROR_RATE_KEY_MESSAGES.format(rate="2/day"))
    assert keyed(outsider_key.raw).post("/api/gateway/message", message("c"), format="json").status_code == 200


def test_the_debug_route_is_no_message_of_the_session(debug_key, telecom):
    limits_set(debug_key.tenant, message_rate_per_session="1/day")
    client = keyed(debug_key.raw)
    assert {client.post("/api/debug/route", message("s"), format="json").status_code for _ in range(3)} == {200}
    assert client.post("/api/gateway/message", message("s"), format="json").status_code == 200


# -- the lockout of addresses that send wrong keys ---------------------------------------------------------------


def test_wrong_keys_lock_the_address_out_without_touching_the_database(
    tenant_key, telecom, settings, django_assert_num_queries
):
    settings.AUTH_FAILURE_LIMIT = 3
    for n in range(3):
        assert keyed(f"ark_wrong_{n}", "203.0.113.7").get("/api/agents").status_code == 401
    with django_assert_num_queries(1):  # the active keys' digests, once per configuration version in a process
        assert_throttled(keyed("ark_wrong_first", "203.0.113.7").get("/api/agents"))
    with django_assert_num_queries(0):
        locked = keyed("ark_wrong_new", "203.0.113.7").get("/api/agents")
    assert_throttled(locked)
    assert locked.json()["error"]["message"].startswith(ERROR_AUTH_LOCKED)
    assert int(locked["Retry-After"]) <= settings.AUTH_LOCKOUT_SECONDS

    assert keyed("ark_wrong_elsewhere", "203.0.113.8").get("/api/agents").status_code == 401  # another address
    assert keyed(tenant_key.raw, "203.0.113.8").get("/api/agents").status_code == 200


def process_restarted() -> None:
    """What a web server's restart forgets: the keys it verified (the shared cache keeps counts and lockouts)."""
    _KEY_CACHE.clear()
    auth._active_digests = (None, frozenset())


def test_a_valid_key_this_process_never_saw_passes_the_lockout_of_its_address(
    tenant_key, outsider_key, telecom, settings
):
    settings.AUTH_FAILURE_LIMIT = 3
    assert keyed(tenant_key.raw, "203.0.113.30").get("/api/agents").status_code == 200
    for n in range(3):
        assert keyed(f"ark_wrong_{n}", "203.0.113.30").get("/api/agents").status_code == 401
    assert_throttled(keyed("ark_wrong_new", "203.0.113.30").get("/api/agents"))  # the guesser stays locked out

    assert keyed(outsider_key.raw, "203.0.113.30").get("/api/agents").status_code == 200  # never seen before
    process_restarted()
    assert keyed(tenant_key.raw, "203.0.113.30").get("/api/agents").status_code == 200  # the key that worked
    assert_throttled(keyed("ark_wrong_after", "203.0.113.30").get("/api/agents"))  # the lockout outlived it


def test_a_revoked_key_is_refused_by_the_lockout_like_any_wrong_key(tenant_key, telecom, settings):
    settings.AUTH_FAILURE_LIMIT = 1
    assert keyed("ark_wrong", "203.0.113.31").get("/api/agents").status_code == 401
    tenant_key.is_active = False
    tenant_key.save(update_fields=["is_active"])
    assert_throttled(keyed(tenant_key.raw, "203.0.113.31").get("/api/agents"))


def test_the_lockout_ends_when_its_time_is_up_and_stragglers_do_not_extend_it(telecom, settings):
    settings.AUTH_FAILURE_LIMIT = 1
    settings.AUTH_LOCKOUT_SECONDS = 1
    auth_failure_record("203.0.113.32")
    first = auth_lockout_wait("203.0.113.32")
    assert first is not None and 0 < first <= 1
    time.sleep(0.3)
    auth_failure_record("203.0.113.32")  # a failure counted while the lockout runs (a request already in flight)
    later = auth_lockout_wait("203.0.113.32")
    assert later is not None and later < first - 0.2  # not pushed back
    time.sleep(later + 0.05)
    assert auth_lockout_wait("203.0.113.32") is None
    assert keyed("ark_wrong_again", "203.0.113.32").get("/api/agents").status_code == 401


def test_behind_a_proxy_that_is_not_declared_wrong_keys_do_not_lock_out_the_other_clients(
    tenant_key, telecom, settings
):
    settings.AUTH_FAILURE_LIMIT = 3  # TRUSTED_PROXY_COUNT=0: every client has the proxy's address
    for n in range(3):
        keyed(f"ark_wrong_{n}", "10.0.0.1", HTTP_X_FORWARDED_FOR=f"198.51.100.{n}").get("/api/agents")
    process_restarted()  # a deploy
    customer = keyed(tenant_key.raw, "10.0.0.1", HTTP_X_FORWARDED_FOR="198.51.100.77")
    assert customer.get("/api/agents").status_code == 200


def test_x_forwarded_for_is_ignored_unless_proxies_are_trusted(telecom, settings):
    settings.AUTH_FAILURE_LIMIT = 2
    for n in range(2):  # a client cannot escape the lockout by making up the header
        keyed(f"ark_wrong_{n}", "203.0.113.9", HTTP_X_FORWARDED_FOR=f"10.0.0.{n}").get("/api/agents")
    assert keyed("ark_wrong_x", "203.0.113.9", HTTP_X_FORWARDED_FOR="10.0.0.9").get("/api/agents").status_code == 429

    settings.TRUSTED_PROXY_COUNT = 1  # behind one proxy: the address it saw, the last hop
    behind = keyed("ark_wrong_y", "203.0.113.9", HTTP_X_FORWARDED_FOR="10.0.0.9")
    assert behind.get("/api/agents").status_code == 401


def test_x_forwarded_for_without_a_trusted_proxy_is_warned_about_once_per_process(telecom, caplog, monkeypatch):
    monkeypatch.setattr(throttles, "_proxy_warned", False)
    with caplog.at_level(logging.WARNING, logger="tenants.throttles"):
        for n in range(3):
            keyed(f"ark_wrong_{n}", "10.0.0.2", HTTP_X_FORWARDED_FOR="198.51.100.9").get("/api/agents")
    warnings = [r.getMessage() for r in caplog.records if r.getMessage() == throttles.WARNING_PROXY_UNDECLARED]
    assert len(warnings) == 1 and "198.51.100.9" not in caplog.text


def test_check_deploy_warns_when_a_proxy_terminates_tls_but_no_proxy_is_trusted_for_addresses(settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    assert [warning.id for warning in proxy_settings_check()] == ["tenants.W001"]
    settings.TRUSTED_PROXY_COUNT = 1
    assert proxy_settings_check() == []


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
    throttles.cache_circuit.reset()  # whatever an earlier test's outage left
    settings.API_RATE_PER_KEY = "1/day"
    settings.AUTH_FAILURE_LIMIT = 1
    unreachable = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:9/0"}
    }
    with override_settings(CACHES=unreachable), caplog.at_level(logging.WARNING, logger="tenants.throttles"):
        assert [rate_hit(scope="api", ident="key:1") for _ in range(3)] == [None, None, None]
        auth_failure_record("203.0.113.10")
        assert auth_lockout_wait("203.0.113.10") is None
    assert len([r for r in caplog.records if "throttling skipped" in r.getMessage()]) == 1
