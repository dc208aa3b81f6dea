"""The chat API's HTTP routes, mounted at ``/api/`` (the OpenAI-compatible ones are in chat/openai/urls.py)."""

from django.urls import path

from chat import conversation_test_apis, customer_apis, health, mcp_apis, usage_apis
from chat.desk import apis as desk_apis
from chat.rest import agents, debug, feedback, messages, sessions

urlpatterns = [
    path("gateway/message", messages.MessageApi.as_view(face=messages.GATEWAY), name="gateway-message"),
    path(
        "gateway/message/stream",
        messages.MessageApi.as_view(face=messages.GATEWAY_STREAM),
        name="gateway-message-stream",
    ),
    path("chat/message", messages.MessageApi.as_view(face=messages.CHAT), name="chat-message"),
    path("chat/message/stream", messages.MessageApi.as_view(face=messages.CHAT_STREAM), name="chat-message-stream"),
    path(
        "chat/multi-agent/message", messages.MessageApi.as_view(face=messages.PREVIEW), name="chat-multi-agent-message"
    ),
    path(
        "chat/multi-agent/message/stream",
        messages.MessageApi.as_view(face=messages.PREVIEW_STREAM),
        name="chat-multi-agent-message-stream",
    ),
    path("debug/route", debug.DebugRouteApi.as_view(), name="debug-route"),
    path("debug/plan", debug.DebugPlanApi.as_view(), name="debug-plan"),
    path("debug/env", debug.DebugEnvApi.as_view(), name="debug-env"),
    path("debug/usage", usage_apis.DebugUsageApi.as_view(), name="debug-usage"),
    path("debug/mcp/tools", mcp_apis.McpToolsApi.as_view(), name="debug-mcp-tools"),
    path("debug/mcp/call/<str:tool>", mcp_apis.McpCallApi.as_view(), name="debug-mcp-call"),
    path("mcp/attachments/<str:key>", mcp_apis.AttachmentView.as_view(), name="mcp-attachment"),
    path("health", health.HealthApi.as_view(), name="health"),
    path("health/live", health.HealthLiveApi.as_view(), name="health-live"),
    path("health/ready", health.HealthReadyApi.as_view(), name="health-ready"),
    path("agents", agents.AgentsApi.as_view(), name="agents"),
    path(
        "profiles/<slug:agent_id>/conversation-tests/runs",
        conversation_test_apis.ConversationTestRunsApi.as_view(),
        name="conversation-test-runs",
    ),
    path(
        "profiles/<slug:agent_id>/conversation-tests/runs/<int:run_id>",
        conversation_test_apis.ConversationTestRunApi.as_view(),
        name="conversation-test-run",
    ),
    path("sessions", sessions.SessionsApi.as_view(), name="sessions"),
    path("sessions/<str:conversation_key>", sessions.SessionApi.as_view(), name="session"),
    path("sessions/<str:conversation_key>/clear", sessions.SessionClearApi.as_view(), name="session-clear"),
    path("sessions/<str:conversation_key>/messages", sessions.SessionMessagesApi.as_view(), name="session-messages"),
    path("sessions/<str:conversation_key>/events", sessions.SessionEventsApi.as_view(), name="session-events"),
    path(
        "sessions/<str:conversation_key>/checkpoint", sessions.SessionCheckpointApi.as_view(), name="session-checkpoint"
    ),
    path("sessions/<str:conversation_key>/feedback", feedback.SessionFeedbackApi.as_view(), name="session-feedback"),
    path("customers/<str:user_id>/data", customer_apis.CustomerDataApi.as_view(), name="customer-data"),
    path("escalations", desk_apis.EscalationsApi.as_view(), name="escalations"),
    path("escalations/<str:escalation_id>", desk_apis.EscalationApi.as_view(), name="escalation"),
    path("escalations/<str:escalation_id>/take", desk_apis.EscalationTakeApi.as_view(), name="escalation-take"),
    path(
        "escalations/<str:escalation_id>/messages",
        desk_apis.EscalationMessagesApi.as_view(),
        name="escalation-messages",
    ),
    path("escalations/<str:escalation_id>/notes", desk_apis.EscalationNotesApi.as_view(), name="escalation-notes"),
    path(
        "escalations/<str:escalation_id>/transfer",
        desk_apis.EscalationTransferApi.as_view(),
        name="escalation-transfer",
    ),
    path(
        "escalations/<str:escalation_id>/hand-back",
        desk_apis.EscalationHandBackApi.as_view(),
        name="escalation-hand-back",
    ),
]
