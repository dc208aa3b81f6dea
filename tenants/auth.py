"""Bearer API keys: the tenant comes from the key, never from the request body."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from rest_framework import authentication, exceptions

from common.config_version import config_version, local_generation
from common.errors import ERROR_INVALID_KEY
from tenants import schema as _schema  # noqa: F401  (the OpenAPI description of this scheme registers itself)
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

    @property
    def can_answer(self) -> bool:
        return self.key.can_answer


# Keys looked up in this process, by hash, with the configuration version they were read at.
# Every save or delete of a key or tenant bumps that version (tenants/apps.py), so a revoked
# key is refused on the next request, in every process; meanwhile a message costs no key query.
_KEY_CACHE: dict[str, tuple[tuple[int, int], ApiClient | None]] = {}
_KEY_CACHE_MAX = 10_000

# The digests of every active key of an active tenant, with the configuration version they were read at: what
# lets a locked-out address's valid keys through without a lookup per request. Read only while an address is
# locked out, at most once per version in a process.
_active_digests: tuple[tuple[int, int] | None, frozenset[str]] = (None, frozenset())


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

    While the address is locked out (:mod:`tenants.throttles`) a key that is not valid is refused with DRF's
    ``Throttled`` (429, with the wait) before any database lookup, and a valid one goes through: the lockout
    targets whoever sends wrong keys, not the customers who share the address (a NAT, or a proxy whose count is
    not declared), nor a key after a restart. Whether a key is valid comes from the digests of the active keys,
    read at most once per configuration version (:func:`_key_active`), so a locked-out flood costs no query.

    Why valid keys pass rather than being refused too: a key holds 256 random bits, so no rate of guessing, from
    any number of addresses, finds one; a lockout per address is not what stops guessing, and cannot be. What it
    bounds is the cost and noise of a flood of wrong keys, which refusing them alone does. Refusing valid keys as
    well would let anyone lock out every customer behind the same address with ``AUTH_FAILURE_LIMIT`` requests.
    Counting failures per presented key prefix instead would bound nothing (each guess can bring a new prefix)
    and would still lock out the owner of the prefix under attack.
    """
    digest = key_hash(raw_key)

    def unless_locked_out() -> None:
        wait = auth_lockout_wait(address)
        if wait is not None and not _key_active(digest):
            raise exceptions.Throttled(wait=retry_after(wait), detail=ERROR_AUTH_LOCKED)

    client = _client_for(digest, guard=unless_locked_out)
    if client is None:
        auth_failure_record(address)
    return client


def _key_active(digest: str) -> bool:
    """Whether ``digest`` is an active key's of an active tenant, from the digests read once per version."""
    global _active_digests
    version = (config_version(), local_generation())
    if _active_digests[0] != version:
        active = ApiKey.objects.filter(is_active=True, tenant__is_active=True).values_list("key_hash", flat=True)
        _active_digests = (version, frozenset(active))
    return digest in _active_digests[1]


def _client_for(digest: str, *, guard: Callable[[], None] | None = None) -> ApiClient | None:
    """The key's principal; ``guard`` runs first unless the key is one this process knows to be valid."""
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
