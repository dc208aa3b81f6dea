"""The door of ``tenants/`` (docs/architecture.md, "Doors"): who a request is (the API key's authentication and the
client it names), the rights a user holds over tenants and the scope they give a query, the throttles, and the
admin's tenant scoping. Its models are imported from ``tenants.models``."""

from __future__ import annotations

from tenants.admin_scope import ReadableTenantFilter, TenantScopedAdminMixin, tenant_ids_readable
from tenants.auth import ApiClient, ApiKeyAuthentication, api_client_authenticate, api_key_verified
from tenants.selectors import (
    TenantRights,
    TenantScope,
    request_tenant_rights,
    tenant_choices,
    tenant_get_active,
    tenant_ids_with_right,
    tenant_right_held,
    tenant_right_held_anywhere,
    tenant_scope_where,
)
from tenants.throttles import (
    API_SCOPE,
    MESSAGES_SCOPE,
    client_address,
    principal_ident,
    request_throttle,
    session_throttle,
)

__all__ = [
    "API_SCOPE",
    "MESSAGES_SCOPE",
    "ApiClient",
    "ApiKeyAuthentication",
    "ReadableTenantFilter",
    "TenantRights",
    "TenantScope",
    "TenantScopedAdminMixin",
    "api_client_authenticate",
    "api_key_verified",
    "client_address",
    "principal_ident",
    "request_tenant_rights",
    "request_throttle",
    "session_throttle",
    "tenant_choices",
    "tenant_get_active",
    "tenant_ids_readable",
    "tenant_ids_with_right",
    "tenant_right_held",
    "tenant_right_held_anywhere",
    "tenant_scope_where",
]
