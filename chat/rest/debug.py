"""The debug routes: the routing decision or goal plan of a message alone, nothing executed or stored, and the
effective configuration (:mod:`chat.environment`).
"""

from __future__ import annotations

from asgiref.sync import sync_to_async
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.models import UsagePurpose
from agents.public import TurnUsage, model_usage_record, usage_counting
from chat.asyncapi import AsyncAPIView
from chat.drafts import draft_apply
from chat.environment import effective_configuration
from chat.intake import MessageInputSerializer, Route, message_intake
from chat.permissions import IsDebugClient
from chat.rest.messages import GATEWAY_EXAMPLE, MESSAGE_ERRORS, MessageBody
from common.errors import error_responses
from conversations.public import TurnInput, conversation_goal_state, conversation_route_state
from routing.public import goal_decide, route_decide
from tenants.models import TenantRight

VERSIONS = ("live", "draft")


class DebugInputSerializer(MessageInputSerializer):
    """The gateway body, and which version of the profile to try: the live one customers get, or the draft."""

    version = serializers.ChoiceField(
        choices=VERSIONS,
        required=False,
        default="live",
        help_text="live: the released version customers are served; draft: what the profile's editors are changing.",
    )


def debug_intake(request: Request) -> TurnInput:
    """A debug request's engine input, with the profile's draft when the body asks for ``"version": "draft"``."""
    data = request.data
    version = "live"
    if isinstance(data, dict) and "version" in data:
        data = dict(data)
        version = data.pop("version")
        if version not in VERSIONS:
            raise serializers.ValidationError({"version": [f"Must be one of: {', '.join(VERSIONS)}."]})
    turn_input = message_intake(
        principal=request.user, data=data, route=Route.PROFILE, right=TenantRight.DEBUG, counted=False
    )
    if version == "draft":
        turn_input = draft_apply(turn_input)  # 400 naming version when the draft is disabled
    return turn_input


async def _debug_usage_record(usage: TurnUsage, turn_input: TurnInput) -> None:
    """The debug call's model calls, in the asking tenant's usage."""
    if usage.calls:
        await sync_to_async(model_usage_record)(
            usage=usage,
            purpose=UsagePurpose.DEBUG,
            profile_id=turn_input.profile.pk,
            tenant_id=turn_input.tenant_pk,
        )


class DebugRouteApi(MessageBody, AsyncAPIView):
    permission_classes = [IsDebugClient]

    @extend_schema(
        summary="The routing decision alone (nothing executed or stored)",
        request=DebugInputSerializer,
        responses={200: OpenApiResponse(description="The decision with its mode"), **MESSAGE_ERRORS},
        examples=[GATEWAY_EXAMPLE],
    )
    async def post(self, request: Request) -> Response:
        turn_input = await sync_to_async(debug_intake)(request)
        state, active_agent = await sync_to_async(conversation_route_state)(
            conversation_key=turn_input.conversation_key
        )
        profile = turn_input.profile
        usage = TurnUsage()
        with usage_counting(usage):  # a classifier or the supervisor's planner may call a model
            decision = await route_decide(
                profile=profile, text=turn_input.text, state=state or None, active_agent=active_agent
            )
        await _debug_usage_record(usage, turn_input)
        return Response(
            {
                "mode": profile.effective_mode,
                "agent_id": profile.agent_id,
                "version": profile.version if profile.version is not None else "draft",
                "conversation_key": turn_input.conversation_key,
                **decision.as_dict(),
            }
        )


class DebugPlanApi(MessageBody, AsyncAPIView):
    """``POST /api/debug/plan``: what goal mode would do with a message, executing nothing."""

    permission_classes = [IsDebugClient]

    @extend_schema(
        summary="Goal mode's reading and plan for a message (nothing executed or stored)",
        description=(
            "The same body as /api/debug/route. Returns the goal and entities read from the message "
            "(intent_output), the capabilities they resolve to (execution_intents), the execution plan (a DAG of "
            "steps over the domains' MCP capabilities), or the clarification the confidence gate would ask — for "
            "the profile's goals whatever its routing mode, and with the conversation's pending goal when the "
            "session has one."
        ),
        request=DebugInputSerializer,
        responses={200: OpenApiResponse(description="The goal decision and its plan"), **MESSAGE_ERRORS},
        examples=[GATEWAY_EXAMPLE],
    )
    async def post(self, request: Request) -> Response:
        turn_input = await sync_to_async(debug_intake)(request)
        goal_state = await sync_to_async(conversation_goal_state)(conversation_key=turn_input.conversation_key)
        profile = turn_input.profile
        usage = TurnUsage()
        with usage_counting(usage):  # goal mode's reading may call a model
            decision = await goal_decide(profile=profile, text=turn_input.text, goal_state=goal_state)
        await _debug_usage_record(usage, turn_input)
        shown = decision.as_dict()
        return Response(
            {
                "mode": profile.effective_mode,
                "agent_id": profile.agent_id,
                "version": profile.version if profile.version is not None else "draft",
                "conversation_key": turn_input.conversation_key,
                "status": shown["status"],
                "intent_output": shown["intent_output"],
                "reading": shown["reading"],
                "execution_intent": shown["execution_intents"][0] if shown["execution_intents"] else None,
                "execution_intents": shown["execution_intents"],
                "plan": shown["plan"],
                "clarification": shown["clarification"],
                "reason": shown["reason"],
            }
        )


class DebugEnvApi(APIView):
    permission_classes = [IsDebugClient]

    @extend_schema(
        summary="The effective configuration of this process, secrets masked",
        description=(
            "Routing mode override, the model endpoints, models and timeouts, router LLM and embeddings, MCP servers, "
            "database, Redis and broker, supervisor executor, observability and webhook settings, limits and "
            "throttles, the code version, and each profile's model settings (endpoint, model, the name of its key's "
            "variable and whether it is set). Every secret is `***` (or empty when unset); URLs lose their "
            "credentials and query values."
        ),
        responses={200: OpenApiResponse(description="The configuration"), **error_responses(401, 403, 429, 503)},
    )
    def get(self, request):
        return Response(effective_configuration())
