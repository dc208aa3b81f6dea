"""Debug API for MCP tools: list them and call one by hand (docs/agents.md, MCP); and the attachments tool results
link to (images, audio, binary resources)."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.response import Response

from agents.mcp import Endpoint, attachment_read, tool_call
from chat.asyncapi import AsyncAPIView
from chat.permissions import IsDebugClient
from common.endpoints import endpoint_mask
from common.errors import DomainError, NotFound, error_body, error_responses
from routing import snapshot

ERROR_UNKNOWN_TOOL = "Unknown MCP tool {tool!r}."
ERROR_TOOL_DISABLED = "The MCP tool {tool!r} or its server is disabled."


class McpToolsApi(AsyncAPIView):
    permission_classes = [IsDebugClient]

    @extend_schema(
        summary="MCP tools with their servers and argument schemas",
        responses={200: OpenApiResponse(description="The tools"), **error_responses(401, 403, 429, 503)},
    )
    async def get(self, request):
        current = await sync_to_async(snapshot.current)()
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
        current = await sync_to_async(snapshot.current)()
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
        result = await tool_call(
            endpoint=Endpoint(server.name, server.endpoint, server.timeout),
            tool=tool,
            arguments=dict(request.data),
            schema=spec.args_schema,
            called_as=spec.called_as,
        )
        return Response(result.as_dict())


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
        """An attachment a tool result links to, by its unguessable key (the link is what the answer's reader holds, as
        a signed URL), while it is kept (``MCP_ATTACHMENT_TTL_SECONDS``); 404 after. Served so that nothing in it runs:
        ``nosniff``, a sandboxing CSP, and any type but a plain image or audio as a download."""
        kept = attachment_read(key)
        if kept is None:
            raise Http404("No such attachment (or it expired).")
        mime_type, name, data = kept
        inline = mime_type in INLINE_TYPES
        response = HttpResponse(data, content_type=mime_type if inline else "application/octet-stream")
        safe_name = "".join(char if char.isalnum() or char in "._-" else "_" for char in name) or "attachment"
        response["Content-Disposition"] = f'{"inline" if inline else "attachment"}; filename="{safe_name}"'
        response["X-Content-Type-Options"] = "nosniff"
        response["Content-Security-Policy"] = "sandbox; default-src 'none'"
        response["Cache-Control"] = "private, max-age=3600"
        return response
