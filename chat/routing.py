"""WebSocket routes (HTTP routes are in chat/urls.py)."""

from django.urls import re_path

from chat.consumers import ChatConsumer, EventsConsumer
from chat.desk.socket import DeskConsumer

websocket_urlpatterns = [
    # /ws/chat/<agent_id>/<session_id>/, the trailing slash optional (clients drop it).
    # An ASGI application where Django's stubs expect a view: Channels' URLRouter takes re_path() patterns so.
    re_path(
        r"^ws/chat/(?P<agent_id>[-a-zA-Z0-9_]+)/(?P<session_id>[^/]+)/?$",
        ChatConsumer.as_asgi(),  # type: ignore[arg-type]
        name="ws-chat",
    ),
    # /ws/events: a tenant's operational events, for its debug clients (docs/events.md).
    re_path(r"^ws/events/?$", EventsConsumer.as_asgi(), name="ws-events"),  # type: ignore[arg-type]
    # /ws/desk/: a person's desk, for staff who may answer as a person (docs/desk.md).
    re_path(r"^ws/desk/?$", DeskConsumer.as_asgi(), name="ws-desk"),  # type: ignore[arg-type]
]
