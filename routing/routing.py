"""WebSocket routes (HTTP routes are in routing/urls.py)."""

from django.urls import path

from routing.consumers import ChatConsumer

websocket_urlpatterns = [
    path("ws/chat/<slug:agent_id>/<str:session_id>/", ChatConsumer.as_asgi(), name="ws-chat"),
]
