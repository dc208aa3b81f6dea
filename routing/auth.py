"""Bearer API keys: the tenant comes from the key, never from the request body."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from rest_framework import authentication, exceptions

from routing.errors import ERROR_INVALID_KEY
from routing.models import ApiKey, Tenant

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


class ApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != self.keyword.lower() or not raw.strip():
            raise exceptions.AuthenticationFailed(ERROR_INVALID_KEY)
        try:
            key = ApiKey.objects.select_related("tenant").get(key_hash=key_hash(raw.strip()))
        except ApiKey.DoesNotExist:
            raise exceptions.AuthenticationFailed(ERROR_INVALID_KEY) from None
        if not key.is_active or not key.tenant.is_active:
            raise exceptions.AuthenticationFailed(ERROR_INVALID_KEY)
        return ApiClient(tenant=key.tenant, key=key), key

    def authenticate_header(self, request) -> str:
        return self.keyword
