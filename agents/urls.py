from django.urls import path

from agents import apis

urlpatterns = [
    path("tools", apis.McpToolsApi.as_view(), name="debug-mcp-tools"),
    path("call/<str:tool>", apis.McpCallApi.as_view(), name="debug-mcp-call"),
]
