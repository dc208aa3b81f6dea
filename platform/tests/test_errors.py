"""Every error outside the admin and the pages is JSON in the one shape of common/errors.py (docs/api.md, Errors)."""

from __future__ import annotations

import asyncio
import logging

import pytest
from channels.testing import WebsocketCommunicator
from django.test import Client

from common.errors import (
    ERROR_BAD_REQUEST,
    ERROR_PATH_NOT_FOUND,
    ERROR_SERVER,
    ERROR_SERVICE_UNAVAILABLE,
    RETRY_AFTER_SECONDS,
)
from platform.asgi import application  # sets Django up (and its logging) now, not under caplog

pytestmark = pytest.mark.django_db


@pytest.fixture
def failing_urls(settings):
    settings.ROOT_URLCONF = "platform.tests.error_urls"


@pytest.fixture
def client() -> Client:
    client = Client()
    client.raise_request_exception = False  # as in production: the 500 handler answers
    return client


def assert_error(response, status: int, code: str, message: str | None = None) -> dict:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == "application/json", response["Content-Type"]
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "fields"}
    assert body["error"]["code"] == code
    if message is not None:
        assert body["error"]["message"] == message
    return body["error"]


@pytest.mark.parametrize("path", ["/nothing-here", "/api/nothing", "/api/analytics/nothing", "/a2a/nothing"])
def test_an_unknown_path_is_a_json_404(client, path):
    assert_error(client.get(path), 404, "not_found", ERROR_PATH_NOT_FOUND)


def test_an_unknown_path_under_v1_is_a_404_in_openais_shape(client):
    response = client.post("/v1/nothing", {}, content_type="application/json")
    assert response.status_code == 404 and response["Content-Type"] == "application/json"
    assert response.json() == {
        "error": {
            "message": "Invalid URL (POST /v1/nothing).",
            "type": "invalid_request_error",
            "param": None,
            "code": "unknown_url",
        }
    }


def test_pages_and_the_admin_keep_their_html_404(client, staff_user):
    client.force_login(staff_user)
    response = client.get("/admin/no-such-app/")
    assert response.status_code == 404 and response["Content-Type"].startswith("text/html")


def test_a_wrong_method_is_a_json_405(api):
    error = assert_error(api.put("/api/agents"), 405, "method_not_allowed")
    assert "PUT" in error["message"]


def test_an_unhandled_exception_is_a_json_500(client, failing_urls, caplog):
    with caplog.at_level(logging.ERROR):
        assert_error(client.get("/api/test/broken"), 500, "server_error", ERROR_SERVER)
    assert any(record.exc_info for record in caplog.records), "a bug is still logged with its traceback"


def test_an_unhandled_exception_on_a_page_keeps_the_html_500(client, failing_urls):
    response = client.get("/analytics/test/broken")
    assert response.status_code == 500 and response["Content-Type"].startswith("text/html")


@pytest.mark.parametrize("path", ["/api/test/database-down", "/api/test/database-down-drf"])
def test_a_database_outage_is_a_json_503_with_retry_after_logged_as_one_warning(client, failing_urls, path, caplog):
    with caplog.at_level(logging.INFO):
        response = client.get(path)

    assert_error(response, 503, "service_unavailable", ERROR_SERVICE_UNAVAILABLE)
    assert response["Retry-After"] == str(RETRY_AFTER_SECONDS)
    problems = [r for r in caplog.records if r.levelno >= logging.WARNING and r.name != "django.request"]
    assert len(problems) == 1, [r.getMessage() for r in problems]
    assert problems[0].levelname == "WARNING" and problems[0].exc_info is None
    assert "OperationalError" in problems[0].getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_bad_host_is_a_json_400(client):
    assert_error(client.get("/api/health", HTTP_HOST="evil.example"), 400, "bad_request", ERROR_BAD_REQUEST)


def test_a_body_django_refuses_as_too_big_is_a_json_413(client, failing_urls, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    # A plain Django view that reads its form: Django's own check, answered by handler400.
    response = client.post("/api/test/form", {"x": "a" * 200})
    assert_error(response, 413, "body_too_large")


def test_a_csrf_failure_on_an_api_path_is_a_json_403_and_the_admin_keeps_its_page(failing_urls, staff_user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff_user)

    error = assert_error(client.post("/api/test/form", {"x": "1"}), 403, "csrf_failed")
    assert error["fields"]["csrf"]
    admin = client.post("/admin/logout/", {})
    assert admin.status_code == 403 and admin["Content-Type"].startswith("text/html")


def test_a_session_without_its_csrf_token_gets_a_json_403_from_the_api(staff_user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff_user)
    error = assert_error(
        client.post("/api/gateway/message", {}, content_type="application/json"), 403, "permission_denied"
    )
    assert "CSRF" in error["message"]


def test_too_many_requests_is_a_json_429_with_retry_after(client, failing_urls):
    from django.core.cache import cache

    cache.clear()
    try:
        assert client.get("/api/test/throttled").status_code == 200
        response = client.get("/api/test/throttled")
    finally:
        cache.clear()
    assert_error(response, 429, "throttled")
    assert int(response["Retry-After"]) > 0


# -- WebSocket --------------------------------------------------------------------------------------------


def handshake(path: str) -> tuple[bool, int | str | None]:
    async def go():
        communicator = WebsocketCommunicator(application, path)
        connected, detail = await communicator.connect(timeout=5)
        await communicator.disconnect()
        return connected, detail

    return asyncio.run(go())


@pytest.mark.parametrize("path", ["/ws/chat/telecom_contas/../../x/", "/ws/nothing/", "/ws/chat/a b/c/"])
def test_a_websocket_path_no_route_matches_is_refused_at_the_handshake_without_a_traceback(path, caplog):
    with caplog.at_level(logging.INFO):
        connected, code = handshake(path)

    assert connected is False and code == 4404
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert any("no route for path" in r.getMessage() for r in caplog.records)


@pytest.mark.django_db(transaction=True)
def test_a_chat_websocket_url_without_its_trailing_slash_is_accepted(tenant_key, telecom):
    connected, _ = handshake(f"/ws/chat/telecom_contas/no-slash?key={tenant_key.raw}")
    assert connected is True
