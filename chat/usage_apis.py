"""``GET /api/debug/usage``: a tenant's tokens and their cost per profile, day and model (docs/usage.md)."""

from __future__ import annotations

import datetime as dt

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.public import ERROR_UNKNOWN_PROFILE, profile_pk
from chat.intake import tenant_resolve
from chat.permissions import IsDebugClient
from common.errors import DomainError, NotFound, error_responses
from common.text import whole_number
from conversations.public import USAGE_DESCRIPTION, USAGE_FIELDS, usage_report
from tenants.models import TenantRight

DEFAULT_DAYS = 30
MAX_DAYS = 366
ERROR_DAYS = f"days must be a whole number from 1 to {MAX_DAYS}."

USAGE_RESPONSE = inline_serializer(
    "DebugUsage",
    {
        "tenant": serializers.CharField(),
        "days": serializers.IntegerField(),
        "profile": serializers.CharField(allow_null=True),
        **USAGE_FIELDS,
    },
)


def usage_days(raw: str | None) -> int:
    """``days``: 1..366, default 30 when absent (an empty value is no number: the schema fuzzer); raises
    :class:`DomainError` naming it."""
    if raw is None:
        return DEFAULT_DAYS
    days = whole_number(raw)
    if days is None or not 1 <= days <= MAX_DAYS:
        raise DomainError(ERROR_DAYS, fields={"days": [ERROR_DAYS]})
    return days


class DebugUsageApi(APIView):
    permission_classes = [IsDebugClient]

    @extend_schema(
        summary="Token usage and cost of the tenant's answers per profile, day and model",
        description=(
            f"{USAGE_DESCRIPTION} A debug key reads its own tenant; a staff session names one it holds the debug "
            "right over in `tenant`."
        ),
        parameters=[
            OpenApiParameter(
                "days",
                {"type": "integer", "minimum": 1, "maximum": MAX_DAYS},
                description=f"The last N UTC days, today included (default {DEFAULT_DAYS}).",
            ),
            OpenApiParameter("profile", OpenApiTypes.STR, description="Only this profile's answers (its agent_id)."),
            OpenApiParameter("tenant", OpenApiTypes.STR, description="Staff sessions: the tenant's slug."),
        ],
        responses={200: USAGE_RESPONSE, **error_responses(400, 401, 403, 404, 429, 503)},
    )
    def get(self, request):
        params = request.query_params
        tenant = tenant_resolve(
            principal=request.user, tenant_slug=params.get("tenant", ""), field_name="tenant", right=TenantRight.DEBUG
        )
        days = usage_days(params.get("days"))
        profile_id = None
        if agent_id := params.get("profile", ""):
            profile_id = profile_pk(agent_id)
            if profile_id is None:
                message = ERROR_UNKNOWN_PROFILE.format(profile=agent_id)
                raise NotFound(message, fields={"profile": [message]})
        today = dt.datetime.now(dt.UTC).date()
        start = dt.datetime.combine(today - dt.timedelta(days=days - 1), dt.time.min, tzinfo=dt.UTC)
        end = dt.datetime.combine(today + dt.timedelta(days=1), dt.time.min, tzinfo=dt.UTC)
        report = usage_report(start=start, end=end, tenant_id=tenant.pk, profile_id=profile_id)
        return Response({"tenant": tenant.slug, "days": days, "profile": agent_id or None, **report})
