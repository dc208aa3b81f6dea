"""``GET`` and ``DELETE /api/customers/{user_id}/data``: everything stored about one end user, exported or erased
(conversations/customer_data).

The tenant is the API key's own, never one named in the URL or the body; a staff session names it in ``?tenant=``
and needs a right over it: reading conversations to export, ending and clearing them to erase.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chat.intake import TenantForbidden, principal_is_staff, tenant_resolve
from common.errors import error_responses
from conversations.public import Customer, customer_erase, customer_export, customer_for
from tenants.models import Tenant, TenantRight
from tenants.public import ApiClient

ERROR_KEY_NAMES_ITS_TENANT = "An API key acts for its own tenant's customers only: leave tenant out, or name its own."
ERROR_NOT_A_CLIENT = "Only an API key or a staff session may read or erase a customer's data."
PIECES_PER_TRIP = 64  # pieces of the document written per trip to the database thread (an ASGI server)

TENANT_PARAMETER = OpenApiParameter(
    "tenant",
    OpenApiTypes.STR,
    OpenApiParameter.QUERY,
    required=False,
    description="A staff session's tenant (its slug); an API key acts for its own and must leave it out.",
)
ERASED_RESPONSE = inline_serializer(
    "CustomerErased",
    {
        "user_id": serializers.CharField(),
        "erased": serializers.DictField(
            child=serializers.IntegerField(),
            help_text="Rows deleted or anonymised per model (app.Model); empty when nothing was stored.",
        ),
    },
)


def _customer(request: Request, user_id: str, right: TenantRight) -> tuple[Tenant, Customer]:
    principal = request.user
    slug = request.query_params.get("tenant", "")
    if isinstance(principal, ApiClient) and slug and slug != principal.tenant.slug:
        raise TenantForbidden(ERROR_KEY_NAMES_ITS_TENANT, fields={"tenant": [ERROR_KEY_NAMES_ITS_TENANT]})
    if not isinstance(principal, ApiClient) and not principal_is_staff(principal):
        raise exceptions.PermissionDenied(ERROR_NOT_A_CLIENT)
    tenant = tenant_resolve(principal=principal, tenant_slug=slug, field_name="tenant", right=right)
    return tenant, customer_for(tenant_id=tenant.pk, user_id=user_id)


def _actor(request: Request) -> tuple[str, Any]:
    principal = request.user
    if isinstance(principal, ApiClient):
        return f"api key: {principal.key.prefix}… ({principal.key.name})", None
    return f"staff: {principal.get_username()}", principal


async def _in_trips(pieces: Iterator[str]) -> AsyncIterator[bytes]:
    # Django's ASGI handler would read a plain iterator whole before sending a byte: hand it over a few pieces at a
    # time instead, each read on the database thread.
    def some() -> list[str]:
        return [piece for _, piece in zip(range(PIECES_PER_TRIP), pieces, strict=False)]

    while batch := await sync_to_async(some)():
        yield "".join(batch).encode()


class CustomerDataApi(APIView):
    @extend_schema(
        summary="Everything stored about one end user, as one JSON document (streamed)",
        description=(
            "The customer's conversations (by the `user_id` the chat API received, or its keyed pseudonym when it is "
            "personal data), each with its messages, route decisions, tool calls (arguments and results as stored: "
            "masked values stay masked), handoffs, ratings, escalations, outcome, goal runs, backend calls, A2A "
            "tasks and stored retries, and the routing tests made from its messages. Streamed as it is read: "
            "a customer with many messages costs the server one batch of rows at a time. A customer with nothing "
            "stored gets an empty `conversations` list."
        ),
        parameters=[TENANT_PARAMETER],
        responses={
            200: OpenApiResponse(OpenApiTypes.OBJECT, description="The customer's document"),
            **error_responses(400, 401, 403, 404, 429, 503),
        },
    )
    def get(self, request: Request, user_id: str) -> StreamingHttpResponse:
        tenant, customer = _customer(request, user_id, TenantRight.READ)
        pieces = customer_export(customer=customer, tenant_slug=tenant.slug, user_id=user_id)
        content = _in_trips(pieces) if isinstance(request._request, ASGIRequest) else (p.encode() for p in pieces)
        response = StreamingHttpResponse(content, content_type="application/json")
        response["Content-Disposition"] = 'attachment; filename="customer-data.json"'
        response["Cache-Control"] = "no-store"
        return response

    @extend_schema(
        summary="Erase everything stored about one end user",
        description=(
            "Every table that holds the customer's data, one conversation per transaction: their words, ids, tool "
            "arguments and results, ratings' comments and escalations' summaries are deleted or blanked; the rows "
            "the analytics count stay, anonymised, so totals do not change. The live state goes too (a person "
            "holding a conversation lets it go). The erasure is recorded with the user id's keyed pseudonym, never "
            "the id. A second erasure finds nothing and changes nothing (`erased` empty)."
        ),
        parameters=[TENANT_PARAMETER],
        request=None,
        responses={200: ERASED_RESPONSE, **error_responses(400, 401, 403, 404, 429, 503)},
    )
    def delete(self, request: Request, user_id: str) -> Response:
        _, customer = _customer(request, user_id, TenantRight.MANAGE)
        actor, requested_by = _actor(request)
        erased = customer_erase(customer=customer, user_id=user_id, actor=actor, requested_by=requested_by)
        return Response({"user_id": user_id, "erased": erased})
