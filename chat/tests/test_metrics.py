"""``GET /metrics``: who may read it, and the figures a turn with a tool call and a handoff moves."""

from __future__ import annotations

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from chat.metrics import ERROR_METRICS_FORBIDDEN, ERROR_METRICS_UNAUTHENTICATED

pytestmark = pytest.mark.django_db

TOKEN = "scrape-token-for-tests"


@pytest.fixture
def metrics_token(settings):
    settings.METRICS_TOKEN = TOKEN
    return TOKEN


def scrape(client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``/metrics``: (sample name, sorted labels) → value."""
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def moved(before: dict, after: dict, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


def send(api, text, **payload):
    body = {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": "metrics-1", **payload}}
    response = api.post("/api/gateway/message", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_turn_with_a_tool_call_and_a_handoff_moves_every_figure_by_what_happened(
    api, client, live_mcp, scripted_llm, metrics_token
):
    before = scrape(client)
    scripted_llm.reply_tool_call(
        "consultar_fatura", {"msisdn": "5511999999999", "invoice_id": "INV001"}, usage=(120, 11)
    )
    scripted_llm.reply("Sua fatura INV001 é de R$ 289,90.", usage=(150, 9))
    scripted_llm.reply("Seu pedido está a caminho.", usage=(80, 5))

    first = send(api, "Minha fatura veio alta", context={"msisdn": "5511999999999", "invoice_id": "INV001"})
    second = send(api, "E o meu pedido?")
    after = scrape(client)

    assert first["metadata"]["mcp_results"][0]["status"] == "ok"
    assert second["metadata"]["handoffs"][0]["kind"] == "routing_handoff"
    route = {"route": "api/gateway/message", "method": "POST"}
    assert moved(before, after, "platform_http_requests_total", **route, status="200") == 2
    assert moved(before, after, "platform_http_request_duration_seconds_count", **route) == 2
    assert moved(before, after, "platform_http_requests_total", route="metrics", method="GET", status="200") == 1
    turns = {"profile": "telecom_contas", "mode": "router", "method": "keyword"}
    assert moved(before, after, "platform_turns_total", **turns) == 2
    assert moved(before, after, "platform_turn_duration_seconds_count", profile="telecom_contas", mode="router") == 2
    # Three model calls (the tool call, its answer, the second answer), each with the usage the model reported.
    model = {"model": "scripted-model"}
    assert moved(before, after, "platform_model_call_duration_seconds_count", **model, outcome="ok") == 3
    assert moved(before, after, "platform_model_tokens_total", **model, kind="prompt") == 120 + 150 + 80
    assert moved(before, after, "platform_model_tokens_total", **model, kind="completion") == 11 + 9 + 5
    assert moved(before, after, "platform_mcp_tool_calls_total", tool="consultar_fatura", status="ok") == 1
    assert moved(before, after, "platform_mcp_tool_call_duration_seconds_count", tool="consultar_fatura") == 1
    assert moved(before, after, "platform_handoffs_total", kind="routing_handoff", status="completed") == 1
    assert not any("metrics-1" in str(labels) for _, labels in after)  # no conversation key is a label


def test_a_model_that_fails_is_counted_as_an_error(api, client, telecom, scripted_llm, metrics_token):
    before = scrape(client)
    scripted_llm.reply_error(500)

    send(api, "Minha fatura veio alta")

    after = scrape(client)
    model = {"model": "scripted-model"}
    assert moved(before, after, "platform_model_call_duration_seconds_count", **model, outcome="error") == 1
    assert moved(before, after, "platform_model_tokens_total", **model, kind="prompt") == 0


def test_a_path_no_route_matches_is_counted_as_unmatched_not_by_its_path(client, metrics_token):
    before = scrape(client)

    assert client.get("/no-such-path-12345").status_code == 404
    assert client.get("/api/no-such-path-12345").status_code == 404  # the API prefixes' JSON 404 (their last route)
    assert client.get("/v1/no-such-path-12345").status_code == 404

    after = scrape(client)
    assert moved(before, after, "platform_http_requests_total", route="unmatched", method="GET", status="404") == 3
    assert not any("no-such-path" in str(labels) for _, labels in after)


def test_the_queue_length_is_read_from_the_broker_when_scraped(client, settings, metrics_token):
    if not settings.REDIS_URL:
        pytest.skip("needs a Redis broker (scripts/services.py --redis)")
    settings.CELERY_BROKER_URL = settings.REDIS_URL
    settings.CELERY_TASK_DEFAULT_QUEUE = "metrics-test-queue"
    broker = redis.Redis.from_url(settings.REDIS_URL)
    broker.delete("metrics-test-queue")
    try:
        broker.rpush("metrics-test-queue", "a", "b", "c")
        assert scrape(client)[("platform_celery_queue_length", (("queue", "metrics-test-queue"),))] == 3
    finally:
        broker.delete("metrics-test-queue")


def test_without_a_broker_there_is_no_queue_length(client, settings, metrics_token):
    settings.CELERY_BROKER_URL = "memory://"
    assert not [name for name, _ in scrape(client) if name == "platform_celery_queue_length"]


# -- who may read them -------------------------------------------------------------------------


def test_without_credentials_the_metrics_answer_401_with_a_bearer_challenge(client, metrics_token):
    response = client.get("/metrics")

    assert response.status_code == 401
    assert response.json()["error"]["message"] == ERROR_METRICS_UNAUTHENTICATED
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_a_wrong_token_is_refused_with_403(client, metrics_token):
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer not-the-token")

    assert response.status_code == 403
    assert response.json()["error"]["message"] == ERROR_METRICS_FORBIDDEN


def test_no_token_is_accepted_while_none_is_configured(client, settings):
    settings.METRICS_TOKEN = ""

    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 403


def test_a_tenants_api_key_does_not_open_the_metrics(client, tenant_key, metrics_token):
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {tenant_key.raw}").status_code == 403


def test_a_staff_session_without_the_debug_right_over_every_tenant_is_refused(client, django_user_model):
    user = django_user_model.objects.create_user("staff", "staff@example.com", "pw", is_staff=True)
    client.force_login(user)

    assert client.get("/metrics").status_code == 403


def test_a_staff_session_with_the_debug_right_reads_the_metrics(client, django_user_model):
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user("operator", "operator@example.com", "pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="debug_tenant", content_type__app_label="tenants"))
    client.force_login(user)

    response = client.get("/metrics")

    assert response.status_code == 200
    assert "platform_http_requests_total" in response.content.decode()


def test_switched_off_the_metrics_are_not_found_even_with_the_token(client, settings, metrics_token):
    settings.METRICS_ENABLED = False

    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
