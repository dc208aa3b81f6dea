"""Bearer API keys: the tenant comes from the key, never from the request body."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from rest_framework import authentication, exceptions

from common.errors import ERROR_INVALID_KEY
from tenants.models import ApiKey, Tenant
from tenants.throttles import (
    ERROR_AUTH_LOCKED,
    auth_failure_record,
    auth_lockout_wait,
    request_address,
    retry_after,
)

KEY_PREFIX = "ark"


def key_hash(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode()).hexdigest()


def key_generate() -> tuple[str, str]:
    """A new raw key and its display prefix. The raw key is never stored."""
    prefix = secrets.token_hex(4)
    return f"{KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}", prefix


@dataclass(frozen=True)
class ApiClient:
    """The authenticated principal of an API-key request (``request.user``)."""

    tenant: Tenant
    key: ApiKey

    is_authenticated = True
    is_staff = False

    @property
    def can_debug(self) -> bool:
        return self.key.is_debug

    @property
    def can_preview(self) -> bool:
        return self.key.can_preview


# Keys looked up in this process, by hash, with the configuration version they were read at.
# Every save or delete of a key or tenant bumps that version (tenants/apps.py), so a revoked
# key is refused on the next request, in every process; meanwhile a message costs no key query.
_KEY_CACHE: dict[str, tuple[tuple[int, int], ApiClient | None]] = {}
_KEY_CACHE_MAX = 10_000


def api_client_for_key(raw_key: str) -> ApiClient | None:
    """The principal of an active key of an active tenant, or ``None``; costs no query while nothing changed."""
    return _client_for(key_hash(raw_key))


def api_key_verified(raw_key: str) -> bool:
    """Whether this process has found ``raw_key`` to be an active key's, at any configuration version: it may have
    been revoked since, which the request's own authentication then finds. No query and no I/O: what a server may
    ask in its event loop, before it reads a request's body (platform/gate.py)."""
    cached = _KEY_CACHE.get(key_hash(raw_key))
    return cached is not None and cached[1] is not None


def api_client_authenticate(*, raw_key: str, address: str) -> ApiClient | None:
    """:func:`api_client_for_key` for a client at ``address``, which a wrong key counts against.

    Raises DRF's ``Throttled`` (429, with the wait) while the address is locked out (:mod:`tenants.throttles`),
    before any database lookup; a key this process already knows to be valid passes without that check.
    """

    def unless_locked_out() -> None:
        wait = auth_lockout_wait(address)
        if wait is not None:
            raise exceptions.Throttled(wait=retry_after(wait), detail=ERROR_AUTH_LOCKED)

    client = _client_for(key_hash(raw_key), guard=unless_locked_out)
    if client is None:
        auth_failure_record(address)
    return client


def _client_for(digest: str, *, guard: Callable[[], None] | None = None) -> ApiClient | None:
    """The key's principal; ``guard`` runs first unless the key is one this process knows to be valid."""
    from common.config_version import config_version, local_generation

    cached = _KEY_CACHE.get(digest)
    if guard is not None and (cached is None or cached[1] is None):
        guard()  # before the version read, which may query the database on a cache miss
        guard = None
    version = (config_version(), local_generation())
    if cached is not None and cached[0] == version:
        return cached[1]
    if guard is not None:
        guard()  # a valid key of an older version: looked up again, so checked like any other
    key = ApiKey.objects.select_related("tenant").filter(key_hash=digest).first()
    client = ApiClient(tenant=key.tenant, key=key) if key and key.is_active and key.tenant.is_active else None
    if len(_KEY_CACHE) >= _KEY_CACHE_MAX:
        _KEY_CACHE.clear()  # bounded: a flood of wrong keys cannot grow it without limit
    _KEY_CACHE[digest] = (version, client)
    return client


class ApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != self.keyword.lower() or not raw.strip():
            raise exceptions.AuthenticationFailed(ERROR_INVALID_KEY)
        client = api_client_authenticate(raw_key=raw.strip(), address=request_address(request))
        if client is None:
            raise exceptions.AuthenticationFailed(ERROR_INVALID_KEY)
        return client, client.key

    def authenticate_header(self, request) -> str:
        return self.keyword
