"""The agent profiles with their specialists and intents, as served."""

from __future__ import annotations

from django.utils.cache import patch_vary_headers
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from common.errors import error_responses
from conversations.public import language_asked
from routing.public import snapshot_current


class AgentsApi(APIView):
    @extend_schema(
        summary="Agent profiles with their specialists and intents",
        responses={
            200: OpenApiResponse(description="Profiles, specialists and intents"),
            **error_responses(401, 429, 503),
        },
    )
    def get(self, request):
        current = snapshot_current()
        # Display names and descriptions in the client's language (Accept-Language), else each profile's own.
        asked = language_asked(request.headers.get("Accept-Language"))
        response = Response(
            {
                "agents": [
                    {
                        "agent_id": profile.agent_id,
                        "name": profile.name_in(asked),
                        "language": asked or profile.language,
                        "domain": profile.domain,
                        "routing_mode": profile.effective_mode,
                        "fallback_agent": profile.fallback_agent,
                        "llm_router_enabled": profile.llm_router_enabled,
                        "specialists": [
                            {
                                "name": spec.name,
                                "display_name": profile.display_name_in(spec, asked),
                                "description": profile.description_in(spec, asked),
                                "prompt_version": spec.prompt_version,
                                "tools": sorted(spec.allowed_tools),
                                "handoff_targets": list(spec.handoff_targets),
                            }
                            for spec in profile.specialists.values()
                        ],
                        "intents": [
                            {
                                "name": intent.name,
                                "agent": intent.agent,
                                "domain": intent.domain,
                                "priority": intent.priority,
                                "keywords": list(intent.keywords),
                                "mcp_tools": list(intent.mcp_tools),
                                "next_state": intent.next_state,
                            }
                            for intent in profile.intents
                        ],
                    }
                    for profile in current.profiles.values()
                ]
            }
        )
        patch_vary_headers(response, ["Accept-Language"])
        return response
