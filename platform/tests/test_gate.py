"""What a request must be before the application reads it (platform/gate.py).

A path or query value with a NUL character, and a query string with too many fields, are refused in Django's
middleware with a 400 naming the field, before any view hands them to the database (PostgreSQL's text cannot hold
a NUL: each was a 500 with a traceback).

An API request's body is refused by its credentials and its announced size before one byte of it is read (Django's
handler read the whole upload, to disk, first), and a chunked body is read, up to the limit (Django and DRF read it
as empty).
"""

from __future__ import annotations

import contextlib
import json

import pytest
from channels.testing import ApplicationCommunicator
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler as DjangoASGIHandler
from django.db.backends.utils import CursorWrapper
from django.test import Client

from common.errors import ERROR_INVALID_KEY, ERROR_NOT_AUTHENTICATED
from common.parsers import ERROR_BODY_TOO_LARGE, ERROR_NUL_CHARACTER
from common.tests.database_outage import database_outage
from conversations.models import Conversation, Message
from platform.asgi import django_asgi_app
from platform.gate import ERROR_PAGE_BODY_TOO_LARGE, ERROR_TOO_MANY_QUERY_FIELDS, RequestGate
from tests.fixtures import _key
from tests.streaming import run

pytestmark = pytest.mark.django_db

NUL_KEY = "tenant_a:telecom_contas:a%00b"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", f"/api/sessions/{NUL_KEY}/messages"),
        ("get", f"/api/sessions/{NUL_KEY}/checkpoint"),
        ("delete", f"/api/sessions/{NUL_KEY}"),
        ("post", f"/api/sessions/{NUL_KEY}/clear"),
        ("post", f"/api/sessions/{NUL_KEY}/feedback"),
    ],
)
def test_a_nul_in_a_session_key_is_a_400_naming_the_key(api, telecom, method, path):
    body = {"message_id": 1, "rating": "up"} if path.endswith("/feedback") else None
    response = getattr(api, method)(path, body, format="json")

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert error["fields"] == {"conversation_key": [ERROR_NUL_CHARACTER]}
    assert not Conversation.objects.exists()


@pytest.mark.parametrize(
    "path",
    [
        "/api/analytics/handoffs",
        "/api/analytics/handoffs/recent",
        "/api/analytics/feedback",
        "/api/analytics/goals",
        "/api/analytics/usage",
        "/api/debug/usage",
    ],
)
def test_a_nul_in_a_query_value_is_a_400_naming_the_parameter(debug_api, telecom, path):
    response = debug_api.get(path, {"days": "7", "profile": "a\x00"})

    assert response.status_code == 400, response.content
    assert response.json()["error"]["fields"] == {"profile": [ERROR_NUL_CHARACTER]}


def test_a_nul_in_a_query_parameters_name_is_a_400_naming_the_query(debug_api):
    response = debug_api.get("/api/analytics/handoffs?pro%00file=x")

    assert response.status_code == 400, response.content
    assert response.json()["error"]["fields"] == {"query": [ERROR_NUL_CHARACTER]}


def test_a_nul_in_an_admin_search_is_a_400_page(client, staff_user):
    client.force_login(staff_user)

    response = client.get("/admin/routing/intent/", {"q": "fatura\x00"})

    assert response.status_code == 400
    assert not response["Content-Type"].startswith("application/json")


def test_a_query_string_with_more_fields_than_the_limit_is_a_400_naming_the_query_without_an_error_log(
    api, settings, caplog
):
    limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
    query = "&".join(f"p{n}=1" for n in range(5_000))

    with caplog.at_level("INFO"):
        response = api.get(f"/api/analytics/handoffs?{query}")

    assert response.status_code == 400, response.content
    message = ERROR_TOO_MANY_QUERY_FIELDS.format(limit=limit)
    assert response.json()["error"]["fields"] == {"query": [message]}
    assert not [record for record in caplog.records if record.levelname in ("ERROR", "CRITICAL")]
    assert not [record for record in caplog.records if record.exc_info]


def test_a_query_string_at_the_field_limit_is_read(api, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 3

    assert api.get("/api/analytics/handoffs?days=7&x=1&y=2").status_code == 200
    assert api.get("/api/analytics/handoffs?days=7&x=1&y=2&z=3").status_code == 400


# -- the ASGI gate: an API request's body is refused by its credentials and its size before it is read ----------


MESSAGE = json.dumps(
    {"channel": "web", "agent_id": "telecom_contas", "payload": {"text": "Minha fatura veio alta", "session_id": "g1"}}
).encode()
COMPLETION = json.dumps({"model": "telecom_contas", "messages": [{"role": "user", "content": "oi"}]}).encode()
CHUNK = b" " * 65_536  # whitespace: JSON would take it, were it ever read


@pytest.fixture(params=["served", "stock"])
def app(request):
    """The served ASGI application (the gate around the handler of platform/middleware.py), and the gate around
    Django's own handler: the gate holds whichever handler is behind it."""
    if request.param == "served":
        return django_asgi_app
    return RequestGate(DjangoASGIHandler())


def exchange(
    app,
    path: str,
    headers: dict[str, str],
    chunks: list[bytes],
    *,
    ends: bool = True,
    client="127.0.0.1",
    page: bool = False,
):
    """A POST through ``app`` as uvicorn hands one over: its head, then ``chunks`` of its body (the last one ending
    it when ``ends``). The answer ``{"status", "headers", "json", "unread"}``, ``unread`` the body messages still
    waiting, never taken by the application. Every answer but a ``page``'s is JSON, with one ``Content-Type``."""
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), *((k.lower().encode(), v.encode()) for k, v in headers.items())],
        "client": (client, 50_000),
        "server": ("testserver", 80),
    }

    async def go() -> dict:
        communicator = ApplicationCommunicator(app, scope)
        for n, chunk in enumerate(chunks):
            await communicator.send_input(
                {"type": "http.request", "body": chunk, "more_body": not (ends and n == len(chunks) - 1)}
            )
        start = await communicator.receive_output(timeout=30)
        body = b""
        while True:
            message = await communicator.receive_output(timeout=30)
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        unread = communicator.input_queue.qsize()
        await communicator.send_input({"type": "http.disconnect"})
        await communicator.wait(timeout=30)
        answer_headers = {name.decode().lower(): value.decode() for name, value in start["headers"]}
        types = [value.decode() for name, value in start["headers"] if name.lower() == b"content-type"]
        assert len(types) == 1, start["headers"]
        if page:
            return {"status": start["status"], "headers": answer_headers, "text": body.decode(), "unread": unread}
        assert types[0].startswith("application/json"), start["headers"]
        return {"status": start["status"], "headers": answer_headers, "json": json.loads(body), "unread": unread}

    return run(go())


def bearer(raw: str) -> dict[str, str]:
    return {"authorization": f"Bearer {raw}", "content-type": "application/json"}


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
@pytest.mark.django_db(transaction=True)
def test_an_anonymous_upload_is_refused_401_before_its_body_is_read(app, framing):
    head = {"content-length": "300000000"} if framing == "content-length" else {"transfer-encoding": "chunked"}

    answer = exchange(app, "/api/gateway/message", head, [CHUNK] * 3, ends=False)

    assert answer["status"] == 401, answer
    assert answer["json"]["error"]["message"] == ERROR_NOT_AUTHENTICATED
    assert answer["headers"]["www-authenticate"] == "Bearer"
    assert answer["headers"]["connection"] == "close"  # the rest of the upload is never read
    assert answer["unread"] == 3


@pytest.mark.django_db(transaction=True)
def test_a_wrong_key_is_refused_401_before_the_body_is_read_in_the_faces_own_shape(app, tenant_key):
    wrong = {**bearer(tenant_key.raw + "x"), "content-length": "300000000"}

    api = exchange(app, "/api/gateway/message", wrong, [CHUNK] * 2, ends=False, client="10.0.0.1")
    openai = exchange(app, "/v1/chat/completions", wrong, [CHUNK] * 2, ends=False, client="10.0.0.1")

    assert (api["status"], api["unread"]) == (401, 2)
    assert api["json"]["error"] == {"code": "authentication_failed", "message": ERROR_INVALID_KEY, "fields": {}}
    assert (openai["status"], openai["unread"]) == (401, 2)
    assert openai["json"]["error"]["type"] == "authentication_error"
    assert openai["json"]["error"]["code"] == "invalid_api_key"


@pytest.mark.parametrize("path", ["/api/gateway/message", "/v1/chat/completions"])
@pytest.mark.parametrize("authorization", [None, "Bearer ark_0000_wrong", "Basic dXNlcjpwdw=="])
@pytest.mark.django_db(transaction=True)
def test_the_gate_refuses_as_the_route_itself_would(app, path, authorization):
    """The same status, body and challenge as the view behind it gives once it has read the whole body."""
    head = {"content-type": "application/json", "content-length": str(len(MESSAGE))}
    if authorization:
        head["authorization"] = authorization

    gated = exchange(app, path, head, [MESSAGE], client="10.0.0.4")
    behind = exchange(app.app, path, head, [MESSAGE], client="10.0.0.5")

    assert gated["status"] == behind["status"] == 401
    assert gated["json"] == behind["json"]
    assert gated["headers"]["www-authenticate"] == behind["headers"]["www-authenticate"]


@pytest.mark.parametrize("path", ["/api/gateway/message", "/v1/chat/completions"])
@pytest.mark.django_db(transaction=True)
def test_the_gates_413_is_the_routes_own(app, tenant_key, settings, path):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100_000
    head = {**bearer(tenant_key.raw), "content-length": str(2 * len(CHUNK))}

    gated = exchange(app, path, head, [CHUNK, CHUNK])
    behind = exchange(app.app, path, head, [CHUNK, CHUNK])

    assert (gated["status"], gated["unread"]) == (413, 2)
    assert behind["status"] == 413 and gated["json"] == behind["json"]


@pytest.mark.django_db(transaction=True)
def test_an_address_locked_out_is_refused_429_before_the_body_is_read(app, tenant_key, settings):
    settings.AUTH_FAILURE_LIMIT = 2
    address = f"10.0.0.{2 if app is django_asgi_app else 3}"  # the lockout outlives the test, in the cache
    wrong = {**bearer("ark_0000_wrong"), "content-length": str(len(MESSAGE))}
    for _ in range(2):
        assert exchange(app, "/api/gateway/message", wrong, [MESSAGE], client=address)["status"] == 401

    answer = exchange(app, "/api/gateway/message", wrong, [CHUNK], ends=False, client=address)

    assert (answer["status"], answer["unread"]) == (429, 1)
    assert int(answer["headers"]["retry-after"]) > 0


@pytest.mark.django_db(transaction=True)
def test_a_key_that_cannot_be_looked_up_during_a_database_outage_is_a_503_before_the_body_is_read(app, tenant_key):
    head = {**bearer(tenant_key.raw), "content-length": "300000000"}

    with database_outage() as (down, _up):
        down()
        answer = exchange(app, "/api/gateway/message", head, [CHUNK], ends=False)

    assert (answer["status"], answer["unread"]) == (503, 1), answer
    assert answer["json"]["error"]["code"] == "service_unavailable"
    assert int(answer["headers"]["retry-after"]) > 0


@pytest.mark.parametrize(("path", "shape"), [("/api/gateway/message", "api"), ("/v1/chat/completions", "openai")])
@pytest.mark.django_db(transaction=True)
def test_a_body_announced_over_the_limit_is_refused_413_before_it_is_read(app, tenant_key, settings, path, shape):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100_000
    head = {**bearer(tenant_key.raw), "content-length": "100001"}

    answer = exchange(app, path, head, [CHUNK], ends=False)

    assert (answer["status"], answer["unread"]) == (413, 1), answer
    assert answer["json"]["error"]["code"] == "body_too_large"
    assert answer["json"]["error"]["message"] == ERROR_BODY_TOO_LARGE.format(limit=100_000)
    assert ("param" in answer["json"]["error"]) == (shape == "openai")


@pytest.mark.django_db(transaction=True)
def test_a_chunked_message_is_read_and_answered(app, tenant_key, telecom):
    head = {**bearer(tenant_key.raw), "transfer-encoding": "chunked"}
    parts = [MESSAGE[:10], MESSAGE[10:40], MESSAGE[40:]]

    first = exchange(app, "/api/gateway/message", head, parts)  # a key this process had not seen yet
    again = exchange(app, "/api/gateway/message", head, parts)

    assert first["status"] == 200, first
    assert first["json"]["agent"] == "billing_agent"
    assert again["status"] == 200 and again["json"]["conversation_key"] == first["json"]["conversation_key"]
    assert Message.objects.filter(role="user").count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_chunked_completion_is_read_and_answered(app, tenant_key, telecom):
    head = {**bearer(tenant_key.raw), "transfer-encoding": "chunked"}

    answer = exchange(app, "/v1/chat/completions", head, [COMPLETION[:7], COMPLETION[7:]])

    assert answer["status"] == 200, answer
    assert answer["json"]["object"] == "chat.completion"


@pytest.mark.django_db(transaction=True)
def test_a_chunked_body_past_the_limit_is_a_413_and_the_rest_is_not_read(app, tenant_key, telecom, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 150_000
    head = {**bearer(tenant_key.raw), "transfer-encoding": "chunked"}

    answer = exchange(app, "/api/gateway/message", head, [CHUNK] * 4)

    assert (answer["status"], answer["unread"]) == (413, 1), answer
    assert answer["json"]["error"]["message"] == ERROR_BODY_TOO_LARGE.format(limit=150_000)
    assert not Message.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_session_cookie_lets_the_body_through_to_djangos_own_checks(app, staff_user):
    """The gate cannot read a session without a query: Django does, and DRF's CSRF check refuses this one."""
    client = Client()
    client.force_login(staff_user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    head = {"cookie": cookie, "content-type": "application/json", "content-length": str(len(MESSAGE))}

    answer = exchange(app, "/api/gateway/message", head, [MESSAGE])

    assert answer["status"] == 403
    assert "CSRF" in answer["json"]["error"]["message"]


@pytest.mark.parametrize("path", ["/admin/login/", "/chat/", "/no/such/page/"])
def test_an_upload_to_a_page_announced_over_the_page_limit_is_refused_413_before_it_is_read(app, settings, path):
    settings.PAGE_MAX_BODY_BYTES = 100_000
    head = {"content-length": "3000000000", "content-type": "application/x-www-form-urlencoded"}

    answer = exchange(app, path, head, [CHUNK] * 3, ends=False, page=True)

    assert (answer["status"], answer["headers"]["connection"], answer["unread"]) == (413, "close", 3), answer
    assert answer["text"] == ERROR_PAGE_BODY_TOO_LARGE.format(limit=100_000)


def test_a_chunked_body_to_a_page_past_the_page_limit_is_a_413_and_the_rest_is_not_read(app, settings):
    settings.PAGE_MAX_BODY_BYTES = 100_000
    head = {"transfer-encoding": "chunked", "content-type": "application/x-www-form-urlencoded"}

    answer = exchange(app, "/admin/login/", head, [CHUNK] * 4, page=True)

    assert (answer["status"], answer["unread"]) == (413, 2), answer  # two chunks pass the limit: the rest is left


@pytest.mark.django_db(transaction=True)
def test_a_chunked_login_form_within_the_page_limit_is_read_whole_by_the_admin(app, staff_user):
    """Without a length Django would read the form as empty; the gate hands it on with the length it read."""
    token = "a" * 32  # CSRF's secret, as its cookie and as the form's token
    form = f"csrfmiddlewaretoken={token}&username={staff_user.username}&password=wrong&next=/admin/".encode()
    head = {
        "transfer-encoding": "chunked",
        "content-type": "application/x-www-form-urlencoded",
        "cookie": f"{settings.CSRF_COOKIE_NAME}={token}",
    }

    answer = exchange(app, "/admin/login/", head, [form[:40], form[40:]], page=True)

    assert (answer["status"], answer["unread"]) == (200, 0), answer
    assert "Please enter the correct username and password" in answer["text"]  # not "This field is required"


@contextlib.contextmanager
def statements_of_every_thread():
    """The SQL every database connection runs meanwhile, whichever thread runs it (Django's cursor wrapper, which
    every statement goes through, recording them)."""
    statements: list[str] = []
    original = CursorWrapper._execute_with_wrappers

    def recorded(self, sql, params, many, executor):
        statements.append(sql)
        return original(self, sql, params, many, executor)

    CursorWrapper._execute_with_wrappers = recorded
    try:
        yield statements
    finally:
        CursorWrapper._execute_with_wrappers = original


@pytest.mark.django_db(transaction=True)
def test_a_message_costs_the_same_statements_behind_the_gate_as_without_it(app, tenant, telecom):
    """For a key this process knows (every message but a key's first) the gate reads the key cache alone; for a
    key it has never seen it makes the lookup the request would make, and the request then finds the key cached.
    (The first message builds the routing snapshot: it is sent before counting.)"""
    warm, *first_keys = [_key("tenant_a", f"key {n}") for n in range(3)]
    head = {"content-type": "application/json", "content-length": str(len(MESSAGE))}
    assert exchange(app, "/api/gateway/message", {**head, **bearer(warm.raw)}, [MESSAGE])["status"] == 200
    counts = {}
    for gated, key in zip((True, False), first_keys, strict=True):
        served = app if gated else app.app
        for seen in (False, True):
            with statements_of_every_thread() as statements:
                answer = exchange(served, "/api/gateway/message", {**head, **bearer(key.raw)}, [MESSAGE])
            assert answer["status"] == 200, answer
            counts[gated, seen] = len(statements)

    assert counts[True, False] == counts[False, False]
    assert counts[True, True] == counts[False, True]
