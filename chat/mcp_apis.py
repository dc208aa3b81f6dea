"""Debug API for MCP tools: list them and call one by hand (docs/agents.md, MCP); and the attachments tool results
link to (images, audio, binary resources), each served to its tenant's clients only."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.response import Response

from agents.public import AttachmentScope, Endpoint, attachment_read, attachments_for, tool_call
from chat.asyncapi import AsyncAPIView
from chat.intake import principal_is_staff, request_origin
from chat.permissions import IsDebugClient
from common.endpoints import endpoint_mask
from common.errors import DomainError, NotFound, error_body, error_responses
from routing.public import snapshot_current
from tenants.models import TenantRight
from tenants.public import ApiClient, ApiKeyAuthentication, tenant_right_held, tenant_right_held_anywhere

ERROR_UNKNOWN_TOOL = "Unknown MCP tool {tool!r}."
ERROR_TOOL_DISABLED = "The MCP tool {tool!r} or its server is disabled."


class McpToolsApi(AsyncAPIView):
    permission_classes = [IsDebugClient]

    @extend_schema(
        summary="MCP tools with their servers and argument schemas",
        responses={200: OpenApiResponse(description="The tools"), **error_responses(401, 403, 429, 503)},
    )
    async def get(self, request):
        current = await sync_to_async(snapshot_current)()
        return Response(
            {
                "tools": [
                    {
                        "name": tool.name,
                        "server": tool.server,
                        "endpoint": endpoint_mask(current.servers[tool.server].endpoint),
                        "description": tool.description,
                        "enabled": tool.enabled,
                        "needs_permission": tool.needs_permission,
                        "args_schema": tool.args_schema,
                    }
                    for tool in sorted(current.tools.values(), key=lambda t: t.name)
                ]
            }
        )


class McpCallApi(AsyncAPIView):
    permission_classes = [IsDebugClient]

    @extend_schema(
        summary="Call one MCP tool with the body as its arguments",
        description=(
            "The body is the tool's arguments, a JSON object checked against its `args_schema` (GET "
            "/api/debug/mcp/tools); a tool's own refusal comes back in the result. 400: the tool or its server is "
            "disabled, or the body is not an object; 404: no such tool."
        ),
        request={"application/json": OpenApiTypes.OBJECT},
        responses={
            200: OpenApiResponse(description="The tool result"),
            **error_responses(400, 401, 403, 404, 413, 415, 429, 503),
        },
    )
    async def post(self, request, tool: str):
        current = await sync_to_async(snapshot_current)()
        spec = current.tools.get(tool)
        if spec is None:
            raise NotFound(
                ERROR_UNKNOWN_TOOL.format(tool=tool), fields={"tool": [ERROR_UNKNOWN_TOOL.format(tool=tool)]}
            )
        if not spec.enabled:
            raise DomainError(
                ERROR_TOOL_DISABLED.format(tool=tool), fields={"tool": [ERROR_TOOL_DISABLED.format(tool=tool)]}
            )
        if not isinstance(request.data, dict):
            raise DomainError("The body must be a JSON object of arguments.", fields={"body": ["Must be an object."]})
        server = current.servers[spec.server]
        # A key's attachments are its tenant's; a staff session's, no tenant's (its debug right opens them).
        tenant = request.user.tenant.pk if isinstance(request.user, ApiClient) else None
        with attachments_for(AttachmentScope(tenant=tenant, origin=request_origin(request))):
            result = await tool_call(
                endpoint=Endpoint(server.name, server.endpoint, server.timeout),
                tool=tool,
                arguments=dict(request.data),
                schema=spec.args_schema,
                called_as=spec.called_as,
            )
        return Response(result.as_dict())


ERROR_ATTACHMENT_READER = "An attachment is served to its tenant's API key or to a staff session that may see it."
ERROR_NO_ATTACHMENT = "No such attachment (or it expired)."


def _reader(request: HttpRequest) -> Any:
    """Who asks: the client of the API key the request carries (``None`` for a key that is not valid), else the
    session's staff user, else ``None``."""
    if request.headers.get("Authorization"):
        try:
            found = ApiKeyAuthentication().authenticate(request)
        except exceptions.APIException:  # not a valid key, or its address locked out for guessing
            return None
        return found[0] if found else None
    user = getattr(request, "user", None)
    return user if principal_is_staff(user) else None


def _may_read(reader: Any, tenant: int | None) -> bool:
    """Whether ``reader`` may have an attachment of ``tenant`` (``None``: a staff session's debug call)."""
    if isinstance(reader, ApiClient):
        return tenant is not None and reader.tenant.pk == tenant
    if tenant is None:
        return tenant_right_held_anywhere(user=reader, right=TenantRight.DEBUG)
    return any(
        tenant_right_held(user=reader, tenant_id=tenant, right=right) for right in (TenantRight.ACT, TenantRight.READ)
    )


# Types a browser shows inline without running anything; any other (SVG, HTML, …) is a download.
INLINE_TYPES = frozenset(
    {"image/png", "image/jpeg", "image/gif", "image/webp", "audio/wav", "audio/x-wav", "audio/mpeg", "audio/ogg"}
)


@method_decorator(csrf_exempt, name="dispatch")  # it only reads: a wrong method is a 405, not a CSRF failure
class AttachmentView(View):
    http_method_names = ["get", "head", "options"]

    def http_method_not_allowed(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        answer = JsonResponse(
            error_body("method_not_allowed", f"Method {request.method} not allowed: an attachment is only read."),
            status=405,
        )
        answer["Allow"] = ", ".join(method.upper() for method in self.http_method_names)
        return answer

    def get(self, request: HttpRequest, key: str) -> HttpResponse:
        """An attachment a tool result links to, by its unguessable key, while it is kept
        (``MCP_ATTACHMENT_TTL_SECONDS``), to a client of the tenant whose turn made it: one of its API keys (the
        ``Authorization: Bearer`` header, as every API route), or a staff session that may chat as it or read its
        conversations — the chat page's browser shows it by its session cookie. 401 without either (or with a key
        that is not valid); 404 for another tenant's, as for an unknown or expired key. Served so that nothing in
        it runs: ``nosniff``, a sandboxing CSP, and any type but a plain image or audio as a download."""
        reader = _reader(request)
        if reader is None:
            answer = JsonResponse(error_body("not_authenticated", ERROR_ATTACHMENT_READER), status=401)
            answer["WWW-Authenticate"] = ApiKeyAuthentication.keyword
            return answer
        kept = attachment_read(key)
        if kept is None or not _may_read(reader, kept.tenant):
            return JsonResponse(error_body("not_found", ERROR_NO_ATTACHMENT), status=404)
        mime_type, name, data = kept.mime_type, kept.name, kept.data
        inline = mime_type in INLINE_TYPES
        response = HttpResponse(data, content_type=mime_type if inline else "application/octet-stream")
        safe_name = "".join(char if char.isalnum() or char in "._-" else "_" for char in name) or "attachment"
        response["Content-Disposition"] = f'{"inline" if inline else "attachment"}; filename="{safe_name}"'
        response["X-Content-Type-Options"] = "nosniff"
        response["Content-Security-Policy"] = "sandbox; default-src 'none'"
        response["Cache-Control"] = "private, max-age=3600"
        return response
