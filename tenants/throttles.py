"""Throttling: messages and requests per API key (or staff user), messages per end user, and a lockout of client
addresses that send wrong keys.

* :class:`ApiRateThrottle` (DRF's ``DEFAULT_THROTTLE_CLASSES``) counts every API request of a key, or of a staff
  user's session, in fixed windows: views with ``throttle_scope = "messages"`` (every face that runs a turn) at
  the key's message rate, every other API route at ``API_RATE_PER_KEY``. Anonymous requests are not counted
  (they reach nothing but health and the schema). The WebSocket counts its openings and frames the same way
  (:func:`request_throttle`).
* One key usually carries all of a tenant's customers, so a message also counts against its end user
  (:func:`session_throttle`, called by the front door, ``chat.intake``): the session it names — its conversation;
  the OpenAI face's ``user`` names one, a WebSocket's is in its URL — or, for a message that names none (each
  starts a conversation), its user id. One customer's flood is refused; the tenant's other customers are not.
* The message rates are ``API_MESSAGE_RATE_PER_KEY`` and ``API_MESSAGE_RATE_PER_SESSION``, unless the tenant sets
  its own on its admin page (``Tenant.message_rate_per_key``, ``message_rate_per_session``; blank keeps the
  setting's). They are read once per configuration version in each process, so a change applies to the next
  message everywhere, open WebSockets included, at no query per message (:func:`tenant_rates`).
* Every refusal is DRF's ``Throttled``: 429 with ``Retry-After``, its message naming the limit that bit.
* A wrong key costs a database lookup, so failures are counted per client address (:func:`auth_failure_record`);
  ``AUTH_FAILURE_LIMIT`` failures within ``AUTH_FAILURE_WINDOW_SECONDS`` lock the address out for
  ``AUTH_LOCKOUT_SECONDS`` (:func:`auth_lockout_wait`): keys it sends that are not valid are refused with 429
  before any lookup, valid ones go through (``tenants.auth.api_client_authenticate`` says why). The lockout lives
  in the shared cache for its own time, restarts included, and is not prolonged by failures counted meanwhile.
* The client address is ``REMOTE_ADDR``; behind ``TRUSTED_PROXY_COUNT`` proxies, the address the outermost of
  them saw, read from ``X-Forwarded-For`` (never trusted by default). Behind a proxy that is not declared, every
  client has the proxy's address: a process warns once when ``X-Forwarded-For`` arrives while none is trusted,
  and ``check --deploy`` warns when ``SECURE_PROXY_SSL_HEADER`` says a proxy is there (``tenants.W001``).

The counters live in Django's shared cache: one round trip a request (Redis: ``SET NX EX`` and ``INCR`` in one
pipeline). Throttling must never turn a cache outage into errors: when the cache fails, requests go through
uncounted (fail open), and the failure is logged once until the cache answers again.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core import checks
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from django.core.exceptions import ImproperlyConfigured
from rest_framework import exceptions, throttling

from common.config_version import config_version, local_generation
from common.infra.cache import REDIS_DOWN
from common.infra.circuit import Circuit
from tenants.models import Tenant
from tenants.rates import rate_parse, rate_text

logger = logging.getLogger(__name__)

MESSAGES_SCOPE = "messages"
API_SCOPE = "api"
SESSION_SCOPE = "session"
KEY_PREFIX = "throttle"

ERROR_AUTH_LOCKED = "Too many failed authentications from this address."
# What a 429 says (DRF adds "Expected available in N seconds."): the limit that bit, and its rate.
ERROR_RATE_KEY = "Too many requests for this API key: its limit is {rate}."
ERROR_RATE_USER = "Too many requests for this user: its limit is {rate}."
ERROR_RATE_KEY_MESSAGES = "Too many messages for this API key: its limit is {rate}."
ERROR_RATE_USER_MESSAGES = "Too many messages for this user: its limit is {rate}."
ERROR_RATE_SESSION = "Too many messages in this session: its limit is {rate}."
ERROR_RATE_END_USER = "Too many messages from this end user: its limit is {rate}."
WARNING_PROXY_UNDECLARED = (
    "Requests arrive with X-Forwarded-For while TRUSTED_PROXY_COUNT is 0: if a proxy is in front of the app, every "
    "client has its address, and one client's wrong keys lock the address out for all; set TRUSTED_PROXY_COUNT "
    "to the number of proxies"
)

_proxy_warned = False  # WARNING_PROXY_UNDECLARED was logged by this process

# The rates tenants set for themselves, by tenant id, with the configuration version they were read at (a
# tenant's save bumps it: tenants/apps.py).
_tenant_rates: tuple[tuple[int, int] | None, dict[int, tuple[str, str]]] = (None, {})


def tenant_rates(tenant_pk: int | None) -> tuple[str, str]:
    """The tenant's own ``(per key, per session)`` message rates as written on its page, ``""`` where it keeps
    the setting's. One query per configuration version in a process (the tenants that set any), none meanwhile."""
    global _tenant_rates
    if tenant_pk is None:
        return "", ""
    version = (config_version(), local_generation())
    if _tenant_rates[0] != version:
        rows = Tenant.objects.exclude(message_rate_per_key="", message_rate_per_session="").values_list(
            "pk", "message_rate_per_key", "message_rate_per_session"
        )
        _tenant_rates = (version, {pk: (per_key, per_session) for pk, per_key, per_session in rows})
    return _tenant_rates[1].get(tenant_pk, ("", ""))


def scope_rate(scope: str, tenant_pk: int | None = None) -> tuple[int, int] | None:
    """The rate of a throttle scope for a key of ``tenant_pk`` (``None``: a staff user): the tenant's own message
    rate, else the settings' (read at each call, so tests and reloads see changes)."""
    if scope == MESSAGES_SCOPE:
        return rate_parse(tenant_rates(tenant_pk)[0] or settings.API_MESSAGE_RATE_PER_KEY)
    if scope == SESSION_SCOPE:
        return rate_parse(tenant_rates(tenant_pk)[1] or settings.API_MESSAGE_RATE_PER_SESSION)
    return rate_parse(settings.API_RATE_PER_KEY)


def client_address(remote_addr: str | None, forwarded_for: str | None) -> str:
    """The client's address: ``remote_addr``, or behind ``TRUSTED_PROXY_COUNT`` proxies the hop of
    ``X-Forwarded-For`` that the outermost trusted proxy appended (each proxy appends the address it saw)."""
    global _proxy_warned
    proxies = settings.TRUSTED_PROXY_COUNT
    if proxies > 0 and forwarded_for:
        hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
        if hops:
            return hops[-min(proxies, len(hops))]
    elif forwarded_for and not _proxy_warned:
        _proxy_warned = True
        logger.warning(WARNING_PROXY_UNDECLARED)
    return remote_addr or "unknown"


def request_address(request: Any) -> str:
    """:func:`client_address` of a Django or DRF request."""
    meta = request.META
    return client_address(meta.get("REMOTE_ADDR"), meta.get("HTTP_X_FORWARDED_FOR"))


# Any failure of the cache lets the request through uncounted. The resilient cache's own circuit watches its Redis
# (one circuit per outage): it skips Redis for its pause and logs the outage itself. This circuit takes every other
# failure (a cache without a circuit, Django's RedisCache or a file cache; an error that is not an outage), logged
# once when first met and once when the cache answers again. Pause 0: such a cache is tried on every request, as
# Django would try it.
cache_circuit = Circuit(
    "Throttling's cache", pause=0.0, refusal="throttling skipped, requests go through uncounted", logger=logger
)


def _incr(key: str, ttl: int) -> int | None:
    """Add one to the counter ``key`` (created with ``ttl`` seconds to live); its new value, or None if the cache
    failed or its circuit is open. One round trip on Redis."""
    cache = caches["default"]

    def count() -> int:
        if isinstance(cache, RedisCache):
            return _redis_incr(cache, key, ttl)
        cache.add(key, 0, ttl)
        return cache.incr(key)

    own: Circuit | None = getattr(cache, "circuit", None)  # the resilient cache's (common/infra/cache.py)
    work: Callable[[], int | None] = count if own is None else lambda: own.call(count, None, down=REDIS_DOWN)
    return cache_circuit.call(work, None, down=(Exception,))


def _redis_incr(backend: Any, key: str, ttl: int) -> int:
    full_key = backend.make_and_validate_key(key)
    pipe = backend._cache.get_client(full_key, write=True).pipeline(transaction=False)
    pipe.set(full_key, 0, ex=ttl, nx=True)
    pipe.incr(full_key)
    return pipe.execute()[1]


def _window_hit(counter: str, rate: tuple[int, int]) -> float | None:
    """Count one hit of ``counter`` at ``rate``: None while within it, else the seconds until its window ends."""
    limit, period = rate
    now = time.time()
    window = int(now // period)
    count = _incr(f"{KEY_PREFIX}:{counter}:{period}:{window}", period + 1)
    if count is None or count <= limit:
        return None
    return (window + 1) * period - now


def rate_hit(*, scope: str, ident: str, tenant_pk: int | None = None) -> float | None:
    """Count one request of ``ident`` (``key:<pk>`` or ``user:<pk>``) in ``scope``: None if it is within the rate
    (:func:`scope_rate`), else the seconds until the window ends (the ``Retry-After``)."""
    rate = scope_rate(scope, tenant_pk)
    return None if rate is None else _window_hit(f"{scope}:{ident}", rate)


def request_throttle(*, scope: str, ident: str, tenant_pk: int | None = None) -> None:
    """:func:`rate_hit`, refused: raises DRF's ``Throttled`` (429, ``Retry-After``) naming the limit that bit."""
    rate = scope_rate(scope, tenant_pk)
    if rate is None or (wait := _window_hit(f"{scope}:{ident}", rate)) is None:
        return
    key = ident.startswith("key:")
    if scope == MESSAGES_SCOPE:
        error = ERROR_RATE_KEY_MESSAGES if key else ERROR_RATE_USER_MESSAGES
    else:
        error = ERROR_RATE_KEY if key else ERROR_RATE_USER
    raise exceptions.Throttled(wait=retry_after(wait), detail=error.format(rate=rate_text(rate)))


def session_throttle(*, tenant_pk: int, session_id: str, user_id: str) -> None:
    """Count one message of an end user of the tenant: its ``session_id``, else (a message starting a conversation)
    its ``user_id``; neither: not counted. Raises DRF's ``Throttled`` over the tenant's per-session rate.

    The counter's name holds a digest of the id, not the id: a session or user id may be personal data."""
    subject, kind, error = (session_id, "s", ERROR_RATE_SESSION) if session_id else (user_id, "u", ERROR_RATE_END_USER)
    rate = scope_rate(SESSION_SCOPE, tenant_pk)
    if not subject or rate is None:
        return
    digest = hashlib.sha256(subject.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    wait = _window_hit(f"{SESSION_SCOPE}:{tenant_pk}:{kind}:{digest}", rate)
    if wait is not None:
        raise exceptions.Throttled(wait=retry_after(wait), detail=error.format(rate=rate_text(rate)))


def principal_ident(principal: Any) -> str | None:
    """Whom a request counts against: its API key, or its logged-in user; None for anonymous requests."""
    key = getattr(principal, "key", None)
    if key is not None and getattr(principal, "tenant", None) is not None:  # tenants.auth.ApiClient
        return f"key:{key.pk}"
    if getattr(principal, "is_authenticated", False) and getattr(principal, "pk", None) is not None:
        return f"user:{principal.pk}"
    return None


def principal_tenant_pk(principal: Any) -> int | None:
    """The tenant whose rates a request counts at: an API key's; None for a staff user (the settings' rates)."""
    return getattr(getattr(principal, "tenant", None), "pk", None)


def auth_lockout_wait(address: str) -> float | None:
    """Seconds left of ``address``'s lockout, or None (not locked out, or the cache failed). One cache read."""
    until = cache_circuit.call(
        lambda: caches["default"].get(f"{KEY_PREFIX}:authlock:{address}"), None, down=(Exception,)
    )
    if until is None:
        return None
    left = float(until) - time.time()
    return left if left > 0 else None


def auth_failure_record(address: str) -> None:
    """Count a failed authentication of ``address``; the ``AUTH_FAILURE_LIMIT``-th within the window locks the
    address out for ``AUTH_LOCKOUT_SECONDS``. A failure counted while the lockout runs (a request that was
    already past the check) does not prolong it: the lockout ends when its time is up, whatever the restarts."""
    limit, window = settings.AUTH_FAILURE_LIMIT, settings.AUTH_FAILURE_WINDOW_SECONDS
    if limit <= 0:
        return
    index = int(time.time() // window)
    count = _incr(f"{KEY_PREFIX}:authfail:{address}:{window}:{index}", window + 1)
    if count is not None and count >= limit:
        lockout = settings.AUTH_LOCKOUT_SECONDS
        key = f"{KEY_PREFIX}:authlock:{address}"
        cache_circuit.call(lambda: caches["default"].add(key, time.time() + lockout, lockout), None, down=(Exception,))
        if count == limit:
            logger.warning("Authentication locked out for %ss: %s failed %s times", lockout, address, count)


def retry_after(wait: float) -> int:
    """Whole seconds for a ``Retry-After`` header (at least 1)."""
    return max(1, math.ceil(wait))


class ApiRateThrottle(throttling.BaseThrottle):
    """Requests per API key or staff user: the view's ``throttle_scope`` (``"messages"`` or the default ``"api"``)
    names the rate (:func:`scope_rate`). Refused requests answer 429 with ``Retry-After`` and a message naming
    the limit: DRF's ``Throttled``, raised here rather than DRF's own, which cannot say which limit bit."""

    def allow_request(self, request: Any, view: Any) -> bool:
        ident = principal_ident(request.user)
        if ident is not None:
            scope = getattr(view, "throttle_scope", None) or API_SCOPE
            request_throttle(scope=scope, ident=ident, tenant_pk=principal_tenant_pk(request.user))
        return True


def throttle_settings_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The rates read as rates, and the lockout numbers are positive (system check ``tenants.E001``/``E002``)."""
    errors: list[checks.CheckMessage] = []
    for name in ("API_MESSAGE_RATE_PER_KEY", "API_MESSAGE_RATE_PER_SESSION", "API_RATE_PER_KEY"):
        try:
            rate_parse(getattr(settings, name))
        except ImproperlyConfigured as exc:
            errors.append(checks.Error(f"{name}: {exc}", hint='For example "300/minute", or "off".', id="tenants.E001"))
    for name in ("AUTH_FAILURE_WINDOW_SECONDS", "AUTH_LOCKOUT_SECONDS"):
        if getattr(settings, name) < 1:
            errors.append(checks.Error(f"{name} must be at least 1 second.", id="tenants.E002"))
    return errors


def proxy_settings_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``check --deploy``: a proxy is declared for HTTPS (``SECURE_PROXY_SSL_HEADER``) but none for client addresses
    (``TRUSTED_PROXY_COUNT``), so every client would share the proxy's address (``tenants.W001``)."""
    if getattr(settings, "SECURE_PROXY_SSL_HEADER", None) and settings.TRUSTED_PROXY_COUNT <= 0:
        return [
            checks.Warning(
                "SECURE_PROXY_SSL_HEADER says a proxy is in front of the app, but TRUSTED_PROXY_COUNT is 0: every "
                "client has the proxy's address, and one client's wrong keys lock the address out for all.",
                hint="Set TRUSTED_PROXY_COUNT to the number of proxies that append to X-Forwarded-For.",
                id="tenants.W001",
            )
        ]
    return []
