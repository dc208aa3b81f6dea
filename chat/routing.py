"""WebSocket routes (HTTP routes are in chat/urls.py)."""

from django.urls import path

from chat.consumers import ChatConsumer

websocket_urlpatterns = [
    path("ws/chat/<slug:agent_id>/<str:session_id>/", ChatConsumer.as_asgi(), name="ws-chat"),
]
