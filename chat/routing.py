"""WebSocket routes (HTTP routes are in chat/urls.py)."""

from django.urls import path

from chat.consumers import ChatConsumer

websocket_urlpatterns = [
    # An ASGI application where Django's stubs expect a view: Channels' URLRouter takes path() patterns so.
    path("ws/chat/<slug:agent_id>/<str:session_id>/", ChatConsumer.as_asgi(), name="ws-chat"),  # type: ignore[arg-type]
]
