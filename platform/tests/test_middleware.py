"""The ASGI application's middleware: Django's, run as its async twins (platform/middleware.py), behaves as Django's."""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.testing import ApplicationCommunicator, HttpCommunicator
from django.conf import settings
from django.db import connection
from django.test import Client
from django.utils.module_loading import import_string

from platform.asgi import django_asgi_app
from platform.middleware import ASYNC_TWINS, async_middleware
from tests.stock_paths import fast_path_only
from tests.streaming import run

pytestmark = pytest.mark.django_db(transaction=True)

MESSAGE = {
    "channel": "web",
    "agent_id": "telecom_contas",
    "payload": {"text": "Minha fatura veio alta", "session_id": "twins", "user_id": "u1"},
}


def served(method: str, path: str, *, body: bytes = b"", headers: list[tuple[bytes, bytes]] = ()) -> dict:
    """One request through the ASGI application, as uvicorn hands it over: ``{"status", "headers", "body"}``."""

    headers = [*headers, (b"content-length", str(len(body)).encode())] if body else list(headers)

    async def go() -> dict:
        communicator = HttpCommunicator(
            django_asgi_app, method, path, body=body, headers=[(b"host", b"testserver"), *headers]
        )
        response = await communicator.get_response(timeout=30)
        await communicator.wait(timeout=30)  # as a server does: the request ends (and gives its connection back)
        return response

    response = run(go())
    response["headers"] = {name.decode().lower(): value.decode() for name, value in response["headers"]}
    return response


def message_sent(*, authorization: str, cookie: bytes) -> dict:
    """:data:`MESSAGE` posted to the gateway with that ``Authorization`` header and that cookie."""
    headers = [(b"content-type", b"application/json"), (b"authorization", authorization.encode()), (b"cookie", cookie)]
    return served("POST", "/api/gateway/message", body=json.dumps(MESSAGE).encode(), headers=headers)


def session_cookie(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()


def test_the_asgi_handler_loads_every_middleware_in_its_place_each_twin_a_subclass_of_what_it_replaces():
    loaded = async_middleware(settings.MIDDLEWARE)

    assert len(loaded) == len(settings.MIDDLEWARE)
    for listed, twin in zip(settings.MIDDLEWARE, loaded, strict=True):
        assert issubclass(import_string(twin), import_string(listed))
        assert (twin != listed) == (listed in ASYNC_TWINS)
    assert [mw for mw in settings.MIDDLEWARE if mw not in ASYNC_TWINS] == [
        "platform.middleware.RequestMetricsMiddleware",  # async itself
        "platform.gate.InputMiddleware",  # async itself
        "platform.errors.DatabaseUnavailableMiddleware",
    ]


def test_a_message_with_an_api_key_gets_the_security_headers_and_leaves_the_session_alone(tenant_key, telecom):
    response = message_sent(
        authorization=f"Bearer {tenant_key.raw}", cookie=f"{settings.SESSION_COOKIE_NAME}=not-a-session".encode()
    )

    assert response["status"] == 200, response["body"]
    assert json.loads(response["body"])["agent"] == "billing_agent"
    headers = response["headers"]
    assert headers["x-frame-options"] == "DENY"
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "same-origin"
    assert "cookie" not in headers.get("vary", "").lower()  # the session was never read
    assert "set-cookie" not in headers


def test_a_wrong_key_is_refused_as_before_without_falling_back_to_the_session(staff_user, telecom):
    response = message_sent(authorization="Bearer wrong", cookie=session_cookie(staff_user))

    assert response["status"] == 401
    assert "API key" in json.loads(response["body"])["error"]["message"]


def test_a_staff_session_reaches_the_admin_and_the_api_through_the_asgi_application(staff_user, telecom):
    cookie = session_cookie(staff_user)

    page = served("GET", "/admin/", headers=[(b"cookie", cookie)])
    assert page["status"] == 200
    assert b"analyst" in page["body"]  # the session's user, read through the session middleware's thread

    api = served("GET", "/api/agents", headers=[(b"cookie", cookie)])
    assert api["status"] == 200, api["body"]


def test_a_session_post_without_the_csrf_token_is_refused_through_the_asgi_application(staff_user):
    response = served("POST", "/admin/logout/", headers=[(b"cookie", session_cookie(staff_user))])

    assert response["status"] == 403


def test_a_path_without_its_slash_is_redirected_as_before(staff_user):
    response = served("GET", "/admin")

    assert response["status"] == 301
    assert response["headers"]["location"] == "/admin/"


def test_a_database_trial_whose_client_leaves_before_the_answer_does_not_keep_the_circuit_shut(
    tenant_key, telecom, settings
):
    """Django cancels a request's view when its client disconnects; the circuit's trial must end with it, or the
    worker answers 503 at once to every request after it, the database long back (the fault tests' outage)."""
    from common.infra.outages import database_circuit

    settings.OFFLINE_LLM_LATENCY_MS = 3000  # the trial is still in the graph when its client leaves
    settings.DATABASE_OUTAGE_PAUSE_SECONDS = 0.05
    body = json.dumps(MESSAGE).encode()
    headers = [
        (b"host", b"testserver"),
        (b"content-type", b"application/json"),
        (b"authorization", f"Bearer {tenant_key.raw}".encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    database_circuit.trip()

    async def leave_during_the_trial() -> None:
        await asyncio.sleep(0.1)  # the pause runs out: the next request is the trial
        scope = {
            "type": "http",
            "http_version": "1.1",
            "method": "POST",
            "path": "/api/gateway/message",
            "raw_path": b"/api/gateway/message",
            "query_string": b"",
            "headers": headers,
        }
        communicator = ApplicationCommunicator(django_asgi_app, scope)
        await communicator.send_input({"type": "http.request", "body": body, "more_body": False})
        await asyncio.sleep(1.0)
        await communicator.send_input({"type": "http.disconnect"})
        await communicator.wait(timeout=10)

    run(leave_during_the_trial())
    settings.OFFLINE_LLM_LATENCY_MS = 0

    response = served("GET", "/api/agents", headers=[(b"authorization", f"Bearer {tenant_key.raw}".encode())])
    assert response["status"] == 200, response["body"]  # the next request was the trial, and closed the circuit
    assert not database_circuit.is_open


def test_a_served_process_has_the_language_model_loaded_before_its_first_request():
    """Every turn's judge reads languages: loaded in the first request instead, a restarted worker's first turns
    under load ran past their steps' time limits."""
    import subprocess
    import sys

    probe = "import platform.asgi; from common import language; print(language._scorer is not None)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)

    assert result.stdout.strip().splitlines()[-1] == "True", result.stderr


def test_requests_one_after_another_run_their_database_work_on_a_reused_thread_one_request_at_a_time(
    tenant_key, telecom
):
    """Django gives every request a thread of its own for its synchronous work, created and joined per request;
    the ASGI handler keeps those threads for the next requests instead. A thread still serves one request at a
    time, and the work of one request stays on one thread."""
    import threading

    from asgiref.sync import sync_to_async

    from platform.middleware import request_threads

    seen: list[str] = []

    async def go() -> None:
        for _ in range(3):
            communicator = HttpCommunicator(
                django_asgi_app,
                "GET",
                "/api/agents",
                headers=[(b"host", b"testserver"), (b"authorization", f"Bearer {tenant_key.raw}".encode())],
            )
            response = await communicator.get_response(timeout=30)
            assert response["status"] == 200
            await communicator.wait(timeout=30)
        # A thread-sensitive call outside any request still runs, on a thread of no request.
        seen.append(await sync_to_async(lambda: threading.current_thread().name)())

    before = request_threads.created
    run(go())

    assert request_threads.created - before <= 1  # the three requests shared one thread
    assert not seen[0].startswith("request")


@fast_path_only
def test_a_message_crosses_to_its_thread_twice_never_back_and_its_answer_is_rendered_in_the_event_loop(
    tenant_key, telecom, monkeypatch
):
    """The crossings of a message served by the ASGI application, counted (docs/benchmarks.md: each costs about
    a tenth of a millisecond of CPU): DRF's checks with the message's intake and the turn's start (its ticket,
    the conversation's state and history), then the turn's write. Django's request_started and request_finished
    are sent in the event loop: the request's thread holds no connection for their receivers to close. The JSON
    is encoded in the event loop."""
    import threading

    from asgiref.sync import AsyncToSync, SyncToAsync

    from common.infra.renderers import JSONRenderer

    crossings: list[str] = []
    back_to_the_loop: list[str] = []
    rendered_on: list[str] = []
    cross, cross_back, render = SyncToAsync.__call__, AsyncToSync.__call__, JSONRenderer.render

    async def counted(self, *args, **kwargs):
        crossings.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await cross(self, *args, **kwargs)

    def counted_back(self, *args, **kwargs):
        back_to_the_loop.append(getattr(self.awaitable, "__qualname__", repr(self.awaitable)))
        return cross_back(self, *args, **kwargs)

    def spied(self, *args, **kwargs):
        rendered_on.append(threading.current_thread().name)
        return render(self, *args, **kwargs)

    authorization = f"Bearer {tenant_key.raw}"
    assert message_sent(authorization=authorization, cookie=b"")["status"] == 200  # the conversation exists now
    monkeypatch.setattr(SyncToAsync, "__call__", counted)
    monkeypatch.setattr(AsyncToSync, "__call__", counted_back)
    monkeypatch.setattr(JSONRenderer, "render", spied)

    response = message_sent(authorization=authorization, cookie=b"")

    assert response["status"] == 200
    assert json.loads(response["body"])["agent"] == "billing_agent"
    served_by_the_app = [name for name in crossings if name != "BaseConnectionHandler.close_all"]  # run()'s own
    assert served_by_the_app == ["MessageApi.initial", "turn_persist"], crossings
    assert back_to_the_loop == []  # adrf's checks went back to the event loop for throttles, though ours are sync
    assert rendered_on == [threading.main_thread().name]


@fast_path_only  # STOCK_PATHS: adrf's own dispatch wraps DRF's checks anew
def test_a_message_makes_no_wrapper_for_its_turns_write_that_an_earlier_message_made(tenant_key, telecom, monkeypatch):
    """asgiref's ``sync_to_async`` wrappers made while messages are served, counted (about 4 µs each to make): the
    turn's write and DRF's checks are given the wrappers made for the process's first message
    (common.infra.crossing), not one a message."""
    from asgiref.sync import SyncToAsync

    made: list[str] = []
    make = SyncToAsync.__init__

    def counted(self, func, *args, **kwargs):
        made.append(getattr(func, "__qualname__", repr(func)))
        make(self, func, *args, **kwargs)

    authorization = f"Bearer {tenant_key.raw}"
    monkeypatch.setattr(SyncToAsync, "__init__", counted)
    assert message_sent(authorization=authorization, cookie=b"")["status"] == 200
    first, made[:] = list(made), []

    assert message_sent(authorization=authorization, cookie=b"")["status"] == 200

    assert first.count("turn_persist") <= 1 and first.count("MessageApi.initial") <= 1  # none if a test made them
    assert "turn_persist" not in made and "MessageApi.initial" not in made, made


@fast_path_only
def test_a_request_that_leaves_a_connection_open_has_it_closed_on_its_own_thread(tenant_key, telecom, monkeypatch):
    """A view that does not hand its connection back (most of Django's do not): request_finished goes to the
    request's thread, as under Django, and the connection goes back to the pool."""
    import threading

    from django.core.signals import request_finished

    from platform.middleware import RequestThread, request_threads

    authorization = f"Bearer {tenant_key.raw}"
    key = json.loads(message_sent(authorization=authorization, cookie=b"")["body"])["conversation_key"]
    held: list[bool] = []
    run = RequestThread._run

    def watched(self, *args):
        try:
            return run(self, *args)
        finally:
            held.append(self.holds_connection)

    monkeypatch.setattr(RequestThread, "_run", watched)
    response = served("GET", f"/api/sessions/{key}/messages", headers=[(b"authorization", authorization.encode())])

    assert response["status"] == 200
    assert held[0] and not held[-1]  # the view left its connection open; request_finished closed it, there
    assert request_threads._free[-1].submit(lambda: connection.connection is None).result()

    finished_on: list[str] = []

    def seen(**_kwargs) -> None:
        finished_on.append(threading.current_thread().name)

    request_finished.connect(seen)  # a receiver of the project's own: always on the request's thread
    try:
        assert message_sent(authorization=f"Bearer {tenant_key.raw}", cookie=b"")["status"] == 200
    finally:
        request_finished.disconnect(seen)
    assert len(finished_on) == 1 and finished_on[0].startswith("request")


def test_the_calls_of_one_request_on_its_thread_read_the_configuration_version_once_and_the_next_request_anew(
    monkeypatch,
):
    """A message's key check, routing and knowledge search are calls of their own on the request's thread: the
    first reads the version from the shared cache, the others see that reading (one version a message, no cache
    read of theirs); the thread's next request reads it again."""
    from django.core.cache import cache, caches

    from common.config_version import CACHE_KEY, config_version
    from platform.middleware import RequestThreads

    backend = type(caches["default"])  # each thread has its own cache object: count on their class
    reads: list[str] = []
    cache_get = backend.get

    def counted(self, key, *args, **kwargs):
        reads.append(key)
        return cache_get(self, key, *args, **kwargs)

    threads = RequestThreads(keep=1)
    thread = threads.take()
    cache.set(CACHE_KEY, 41)
    monkeypatch.setattr(backend, "get", counted)
    try:
        assert thread.submit(config_version).result() == 41
        cache.set(CACHE_KEY, 42)  # another process publishes a change while the request runs
        assert thread.submit(config_version).result() == 41
        assert thread.submit(config_version).result() == 41
        assert reads == [CACHE_KEY]
        threads.give_back(thread)
        again = threads.take()
        assert again is thread
        assert again.submit(config_version).result() == 42
        assert reads == [CACHE_KEY, CACHE_KEY]
    finally:
        cache.delete(CACHE_KEY)
        thread.shutdown()


def test_an_admin_change_served_by_the_asgi_application_names_its_editor_and_address_in_the_history(
    staff_user, telecom
):
    """auditlog's context for a request is set by the async twin (one receiver for the process, not one per
    request): an admin edit records who made it, from where, under the request's correlation id."""
    from urllib.parse import urlencode

    from auditlog.models import LogEntry

    from tests.adminkit import change_url, form_data

    intent = telecom.intents.get(name="billing_invoice_explanation")
    browser = Client()
    browser.force_login(staff_user)
    data = form_data(browser.get(change_url(intent)))
    data["priority"] = str(intent.priority + 1)
    csrf = browser.cookies[settings.CSRF_COOKIE_NAME].value
    cookie = f"{session_cookie(staff_user).decode()}; {settings.CSRF_COOKIE_NAME}={csrf}".encode()
    data["csrfmiddlewaretoken"] = csrf

    response = served(
        "POST",
        change_url(intent),
        body=urlencode(data, doseq=True).encode(),
        headers=[
            (b"content-type", b"application/x-www-form-urlencoded"),
            (b"cookie", cookie),
            (b"x-correlation-id", b"edit-42"),
            (b"x-forwarded-for", b"203.0.113.9"),
        ],
    )

    assert response["status"] == 302, response["body"][:500]
    updates = LogEntry.objects.get_for_object(intent).filter(action=LogEntry.Action.UPDATE)
    [entry] = [entry for entry in updates if "priority" in entry.changes_dict]
    assert entry.actor == staff_user
    assert entry.remote_addr == "203.0.113.9"
    assert entry.cid == "edit-42"


@fast_path_only
def test_a_client_that_leaves_while_its_message_is_checked_does_not_hold_the_conversation(
    tenant_key, telecom, settings, monkeypatch
):
    """The checks of a message take its ticket (chat/rest/messages.py, MessageApi.initial); a client that disconnects
    meanwhile gets its request cancelled, and the ticket is handed on: the next message does not wait for the
    lease."""
    import threading
    import time

    from chat.rest import messages
    from conversations.models import Conversation, Message

    settings.CONVERSATION_TURN_LEASE_SECONDS = 300
    began, go_on = threading.Event(), threading.Event()
    begin = messages.turn_begin

    def held_up(data):
        turn = begin(data)  # the ticket is taken
        began.set()
        go_on.wait(10)
        return turn

    monkeypatch.setattr(messages, "turn_begin", held_up)
    body = json.dumps({**MESSAGE, "payload": {**MESSAGE["payload"], "session_id": "left"}}).encode()
    headers = [
        (b"host", b"testserver"),
        (b"content-type", b"application/json"),
        (b"authorization", f"Bearer {tenant_key.raw}".encode()),
        (b"content-length", str(len(body)).encode()),
    ]

    async def leave() -> None:
        scope = {"type": "http", "http_version": "1.1", "method": "POST", "path": "/api/gateway/message"}
        communicator = ApplicationCommunicator(
            django_asgi_app, {**scope, "headers": headers, "query_string": b"", "client": ("127.0.0.1", 1)}
        )
        await communicator.send_input({"type": "http.request", "body": body})
        await asyncio.get_running_loop().run_in_executor(None, began.wait, 10)
        await communicator.send_input({"type": "http.disconnect"})
        await asyncio.sleep(0.3)  # the handler cancels the view while the checks still run
        go_on.set()
        await communicator.wait(timeout=10)

    run(leave())
    monkeypatch.setattr(messages, "turn_begin", begin)

    deadline = time.monotonic() + 60  # a hang guard
    while True:
        row = Conversation.objects.values("turn_tickets_issued", "turn_tickets_done").get(session_id="left")
        if row["turn_tickets_done"] == row["turn_tickets_issued"] == 1:
            break  # handed on
        assert time.monotonic() < deadline, row
        time.sleep(0.05)
    assert not Message.objects.filter(conversation__session_id="left").exists()  # without a turn: it was cancelled
    answered = served("POST", "/api/gateway/message", body=body, headers=headers[1:3])
    assert answered["status"] == 200, answered["body"]
    assert json.loads(answered["body"])["metadata"]["turn"] == 2  # the conversation's next message, at once
