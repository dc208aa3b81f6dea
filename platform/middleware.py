"""The middleware stack without thread hops where a hook does no I/O.

In an async server Django runs a ``MiddlewareMixin`` middleware's ``process_request``, ``process_view`` and
``process_response`` each in a thread (``sync_to_async``), and a middleware with no async side at all (auditlog's,
WhiteNoise's) sends everything after it into a thread of its own, the view brought back to the event loop with
``async_to_sync``. A chat message crossed about twenty such hops; under load a fifth of the server's CPU went to
them (docs/benchmarks.md: "Where a message's CPU went").

So :class:`ASGIHandler`, the ASGI application's handler, loads ``MIDDLEWARE`` with each middleware replaced by its
async twin here (:data:`ASYNC_TWINS`): the hooks that only compute — headers, a cookie read, a path check, a context
variable — run in the event loop (:class:`InlineHooks`), and the sessions, the session's user and the flash
messages, which can read and write the session table, keep their thread for the browser but are not consulted on a
request that authenticates with an API key (:func:`key_request`), which never uses a session. ``MIDDLEWARE`` itself
names Django's classes, so Django's system checks (the deploy checks of the security middleware among them) read
it as they expect; a WSGI server and Django's test client run those classes as they are.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any

from asgiref.sync import SyncToAsync, ThreadSensitiveContext, iscoroutinefunction, markcoroutinefunction, sync_to_async
from auditlog import context as auditlog_context
from auditlog import get_logentry_model
from auditlog.cid import set_cid
from django.conf import settings
from django.contrib.auth.middleware import AuthenticationMiddleware as DjangoAuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware as DjangoMessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware as DjangoSessionMiddleware
from django.core import signals
from django.core.cache import close_caches
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler as DjangoASGIHandler
from django.core.handlers.asgi import get_script_prefix
from django.core.handlers.base import reset_urlconf
from django.db import close_old_connections, connections, reset_queries
from django.db.models.signals import pre_save
from django.http import HttpRequest, HttpResponseBase
from django.middleware.clickjacking import XFrameOptionsMiddleware as DjangoXFrameOptionsMiddleware
from django.middleware.common import CommonMiddleware as DjangoCommonMiddleware
from django.middleware.csrf import CsrfViewMiddleware as DjangoCsrfViewMiddleware
from django.middleware.security import SecurityMiddleware as DjangoSecurityMiddleware
from django.urls import ResolverMatch, set_script_prefix
from django.utils.deprecation import MiddlewareMixin
from whitenoise.middleware import WhiteNoiseMiddleware as BaseWhiteNoiseMiddleware

from common.config_version import Pin, config_version_pinned
from common.history.registry import HistoryActorMiddleware as SyncHistoryActorMiddleware
from common.infra.metrics import UNMATCHED, http_request_observe
from common.infra.outages import database_circuit
from platform.errors import DatabaseCircuitMiddleware as SyncDatabaseCircuitMiddleware

# The routes a program calls with ``Authorization: Bearer <key>`` (the chat API, the OpenAI-compatible one, A2A).
KEY_PREFIXES = ("/api/", "/v1/", "/a2a/")


def key_request(request: HttpRequest) -> bool:
    """Whether ``request`` authenticates with an API key: an API route with a Bearer header. DRF's key
    authentication comes first and either accepts the key or refuses the request, so the session is never read."""
    header = request.META.get("HTTP_AUTHORIZATION", "")
    return header[:7].lower() == "bearer " and request.path_info.startswith(KEY_PREFIXES)


class InlineHooks:
    """For a ``MiddlewareMixin`` whose hooks do no I/O: under an async server they are called in the event loop."""

    process_request: Any
    process_response: Any
    process_view: Any
    get_response: Any
    async_mode: bool

    def __init__(self, get_response: Any) -> None:
        super().__init__(get_response)  # type: ignore[call-arg]  # MiddlewareMixin's
        if self.async_mode and hasattr(self, "process_view"):
            sync_view = self.process_view

            async def process_view(*args: Any) -> Any:  # Django awaits a coroutine function's hook as it is
                return sync_view(*args)

            self.process_view = process_view

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.process_request(request) if hasattr(self, "process_request") else None
        response = response or await self.get_response(request)
        if hasattr(self, "process_response"):
            response = self.process_response(request, response)
        return response


class BrowserOnly:
    """For a middleware that serves browsers (sessions, flash messages): an API-key request passes it by."""

    get_response: Any

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        if key_request(request):
            return await self.get_response(request)
        return await super().__acall__(request)  # type: ignore[misc]  # MiddlewareMixin's, hooks in threads


class DatabaseCircuitMiddleware(InlineHooks, SyncDatabaseCircuitMiddleware):
    """In the event loop a request is cancelled when its client leaves (Django's ``listen_for_disconnect``), and
    ``process_response`` never runs: a trial cut off so must still end, or the circuit never admits another."""

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        try:
            return await super().__acall__(request)
        finally:
            if request.__dict__.pop("_database_trial", False):  # still set: the answer never came back
                database_circuit.trial_abandoned()


class SecurityMiddleware(InlineHooks, DjangoSecurityMiddleware):
    pass


class SessionMiddleware(BrowserOnly, DjangoSessionMiddleware):
    pass


class CommonMiddleware(InlineHooks, DjangoCommonMiddleware):
    pass


class CsrfViewMiddleware(InlineHooks, DjangoCsrfViewMiddleware):
    """Reads the CSRF cookie (``CSRF_USE_SESSIONS`` is off) and checks it in ``process_view``: no I/O."""


class AuthenticationMiddleware(BrowserOnly, InlineHooks, DjangoAuthenticationMiddleware):
    """Sets the lazy ``request.user`` from the session (read only if something asks); an API-key request's user is
    the key's, set by DRF."""


class MessageMiddleware(BrowserOnly, DjangoMessageMiddleware):
    pass


class XFrameOptionsMiddleware(InlineHooks, DjangoXFrameOptionsMiddleware):
    pass


class AsyncSide:
    """For a middleware written for sync only: under an async server Django calls its ``__acall__``."""

    async_capable = True
    sync_capable = True
    async_mode: bool

    def __init__(self, get_response: Any) -> None:
        super().__init__(get_response)  # type: ignore[call-arg]  # the middleware's own
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.async_mode:
            return self.__acall__(request)
        return super().__call__(request)  # type: ignore[misc]  # the middleware's own

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        raise NotImplementedError


class RequestMetricsMiddleware(MiddlewareMixin):
    """Counts every request by route (the URL pattern it resolved to, :data:`~common.infra.metrics.UNMATCHED` when none
    did), method and status, and times it: one ``perf_counter`` pair and one recording per request
    (:func:`common.infra.metrics.http_request_observe`). First in ``MIDDLEWARE``, so it times the whole stack; a
    streamed
    answer is timed to its first byte. Both sync (WSGI, the test client) and async (the ASGI handler): Django's
    ``MiddlewareMixin`` tells which the chain is."""

    get_response: Callable[[HttpRequest], Any]  # a response, or under ASGI its coroutine

    def __call__(self, request: HttpRequest) -> Any:
        if self.async_mode:
            return self.__acall__(request)
        started = time.perf_counter()
        response = self.get_response(request)
        _observe(request, response, time.perf_counter() - started)
        return response

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        started = time.perf_counter()
        response = await self.get_response(request)
        _observe(request, response, time.perf_counter() - started)
        return response


def _observe(request: HttpRequest, response: HttpResponseBase, seconds: float) -> None:
    http_request_observe(route_label(request.resolver_match), request.method or "", response.status_code, seconds)


def route_label(match: ResolverMatch | None) -> str:
    """A request's ``route`` label: the URL pattern it resolved to, :data:`~common.infra.metrics.UNMATCHED` when none
    did —
    or when the route that took it stands for none (a view whose class says ``unmatched``: the last routes of the API
    prefixes, chat/unknown_paths.py)."""
    if match is None or getattr(getattr(match.func, "view_class", None), "unmatched", False):
        return UNMATCHED
    return match.route


# auditlog's receiver for the requests' context, connected once (auditlog's own middleware connects and disconnects
# a receiver per request, and each connect and disconnect clears the cache of every model's save receivers).
REQUEST_CONTEXT = ("set_actor", "request")


def _request_context_receiver() -> None:
    pre_save.connect(
        partial(auditlog_context._set_extra_data, signal_duid=REQUEST_CONTEXT),
        sender=get_logentry_model(),
        dispatch_uid=REQUEST_CONTEXT,
        weak=False,
    )


class HistoryActorMiddleware(AsyncSide, SyncHistoryActorMiddleware):
    """auditlog's context (correlation id, remote address, the lazy user as actor), set in the event loop.

    The context is auditlog's context variable, read by one receiver that lives as long as the process; a context
    set inside the request (``auditlog.context.set_actor``) takes over with a receiver of its own, as in auditlog.
    """

    def __init__(self, get_response: Any) -> None:
        super().__init__(get_response)
        _request_context_receiver()

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        set_cid(request)
        token = auditlog_context.auditlog_value.set({**self.get_extra_data(request), "signal_duid": REQUEST_CONTEXT})
        try:
            return await self.get_response(request)
        finally:
            auditlog_context.auditlog_value.reset(token)


class WhiteNoiseMiddleware(AsyncSide, BaseWhiteNoiseMiddleware):
    """WhiteNoise's static files; every other path goes on without a thread."""

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        static_file = self.find_file(request.path_info) if self.autorefresh else self.files.get(request.path_info)
        if static_file is not None:
            return await sync_to_async(self.serve, thread_sensitive=False)(static_file, request)
        return await self.get_response(request)


# Each middleware of MIDDLEWARE that has an async twin, and the twin the ASGI handler loads instead.
ASYNC_TWINS: dict[str, type] = {
    "platform.errors.DatabaseCircuitMiddleware": DatabaseCircuitMiddleware,
    "django.middleware.security.SecurityMiddleware": SecurityMiddleware,
    "django.contrib.sessions.middleware.SessionMiddleware": SessionMiddleware,
    "django.middleware.common.CommonMiddleware": CommonMiddleware,
    "django.middleware.csrf.CsrfViewMiddleware": CsrfViewMiddleware,
    "django.contrib.auth.middleware.AuthenticationMiddleware": AuthenticationMiddleware,
    "common.history.registry.HistoryActorMiddleware": HistoryActorMiddleware,
    "django.contrib.messages.middleware.MessageMiddleware": MessageMiddleware,
    "django.middleware.clickjacking.XFrameOptionsMiddleware": XFrameOptionsMiddleware,
    "whitenoise.middleware.WhiteNoiseMiddleware": WhiteNoiseMiddleware,
}


def async_middleware(listed: list[str]) -> list[str]:
    """``listed`` (``MIDDLEWARE``) in the same order, each middleware that has an async twin replaced by it."""
    return [f"{__name__}.{ASYNC_TWINS[path].__name__}" if path in ASYNC_TWINS else path for path in listed]


class RequestThread(ThreadPoolExecutor):
    """A request's thread (one worker) that knows, after each call it ran, whether the thread holds anything of
    the request's: an open database connection, or queries logged (``DEBUG``). The routing configuration's
    version is read once a request, by its first call that asks (:func:`common.config_version.config_version_pinned`
    with :attr:`version_pin`, which :meth:`RequestThreads.take` empties for each request): a message's key check,
    its routing and its knowledge search, each a call of its own, see one version."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="request")
        self.holds_connection = False
        self.version_pin: Pin = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        return super().submit(self._run, fn, args, kwargs)

    def _run(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            with config_version_pinned(self.version_pin):  # read once a request
                return fn(*args, **kwargs)
        finally:
            self.holds_connection = any(
                connection.connection is not None or connection.queries_log
                for connection in connections.all(initialized_only=True)
            )


class RequestThreads:
    """Single-thread executors for requests' synchronous work, kept from one request for the next.

    Django runs each request in a :class:`~asgiref.sync.ThreadSensitiveContext`: its thread-sensitive calls (the
    ORM, the sessions) share one thread of the request's own, created with the request and joined after it (by yet
    another thread, asgiref's). Here a request gets a thread a finished request left (:meth:`take`); at most
    ``keep`` wait between requests. A thread runs one request's calls at a time, one after another, as before;
    Django closes or hands back the thread's database connection at the end of every request, as before.
    """

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.created = 0
        self._free: list[RequestThread] = []
        self._lock = threading.Lock()

    def take(self) -> RequestThread:
        """A thread for a new request, its configuration version not read yet."""
        with self._lock:
            if self._free:
                thread = self._free.pop()
                thread.version_pin = []
                return thread
            self.created += 1
        return RequestThread()

    def give_back(self, executor: RequestThread) -> None:
        with self._lock:
            if len(self._free) < self.keep:
                self._free.append(executor)
                return
        executor.shutdown(wait=False)


request_threads = RequestThreads(keep=64)
# The thread of the request being handled (its context's), for the handler's own use.
_request_thread: contextvars.ContextVar[RequestThread | None] = contextvars.ContextVar("request_thread", default=None)

# What Django itself connects to request_started and request_finished: these act on the request thread's database
# connections (closing what is obsolete, forgetting logged queries), the context's caches (a no-op for every cache
# backend of ours) and the context's URLconf.
_DJANGOS_RECEIVERS = {
    signals.request_started: frozenset({reset_queries, close_old_connections}),
    signals.request_finished: frozenset({close_old_connections, close_caches, reset_urlconf}),
}


def _only_djangos_receivers(signal: Any) -> bool:
    """Whether ``signal``'s receivers are all Django's own (:data:`_DJANGOS_RECEIVERS`), none added since."""
    receivers = set()
    for entry in signal.receivers:
        receiver = entry[1]
        receivers.add(receiver() if isinstance(receiver, weakref.ReferenceType) else receiver)
    return receivers <= _DJANGOS_RECEIVERS[signal]


def _thread_idle(signal: Any) -> bool:
    """Whether ``signal`` may be sent without a hop to the request's thread: that thread holds nothing of the
    request's (:class:`RequestThread`) and only Django's own receivers listen, which then have nothing to do there."""
    thread = _request_thread.get()
    return thread is not None and not thread.holds_connection and _only_djangos_receivers(signal)


class ASGIHandler(DjangoASGIHandler):
    """Django's ASGI handler, with ``MIDDLEWARE`` loaded as :func:`async_middleware` gives it, each request's
    synchronous work on a thread kept from earlier requests (:class:`RequestThreads`), and no hop to that thread
    for request_started and request_finished when it holds nothing for them to do (:meth:`handle`)."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        context = ThreadSensitiveContext()
        async with context:
            executor = None
            if context.token is not None:  # the request's own context (not one a caller entered around it)
                executor = request_threads.take()
                SyncToAsync.context_to_thread_executor[context] = executor
            token = _request_thread.set(executor)
            try:
                await self.handle(scope, receive, send)
            finally:
                _request_thread.reset(token)
                if executor is not None:
                    # Taken back before asgiref's exit would shut it down. A task that outlives the request (a
                    # shielded step finishing) and calls again gets a thread of its own, as under Django.
                    if SyncToAsync.context_to_thread_executor.get(context) is executor:
                        del SyncToAsync.context_to_thread_executor[context]
                    request_threads.give_back(executor)

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Django's ``ASGIHandler.handle`` (5.2), but for two hops to the request's thread: request_started and
        request_finished, whose only receivers are Django's own, are sent in the event loop when that thread holds
        no database connection (:func:`_thread_idle`) — its connections were handed back at the end of the
        request before (request_finished) or by the view itself (the chat path gives its connection back after
        each step). Otherwise, and for any other receiver, they are sent from the thread, as Django does. Two of
        a message's five crossings (docs/benchmarks.md)."""
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        if _thread_idle(signals.request_started):
            signals.request_started.send(sender=self.__class__, scope=scope)
        else:
            await signals.request_started.asend(sender=self.__class__, scope=scope)
        request, error_response = self.create_request(scope, body_file)
        if request is None:
            assert error_response is not None  # create_request gives one or the other
            body_file.close()
            await self.send_response(error_response, send)
            await sync_to_async(error_response.close)()
            return

        async def process_request(request: Any, send: Any) -> Any:
            response = await self.run_get_response(request)
            with contextlib.suppress(asyncio.CancelledError):  # the client disconnected during send_response
                await self.send_response(response, send)
            return response

        # Django's: a disconnect is listened for while the response is made, and cancels it.
        tasks = [
            asyncio.create_task(self.listen_for_disconnect(receive)),
            asyncio.create_task(process_request(request, send)),
        ]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            if task.done():
                try:
                    task.result()
                except RequestAborted:
                    pass
                except AssertionError:
                    body_file.close()
                    raise
            else:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        try:
            response = tasks[1].result()
        except asyncio.CancelledError:
            await signals.request_finished.asend(sender=self.__class__)
        else:
            if _thread_idle(signals.request_finished):
                response.close()
            else:
                await sync_to_async(response.close)()
        body_file.close()

    def load_middleware(self, is_async: bool = False) -> None:
        listed = settings.MIDDLEWARE
        settings.MIDDLEWARE = async_middleware(listed)  # read by Django's loader alone, once, at start-up
        try:
            super().load_middleware(is_async=is_async)
        finally:
            settings.MIDDLEWARE = listed
