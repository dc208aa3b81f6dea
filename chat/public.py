"""The door of ``chat/`` (docs/architecture.md, "Doors"): what the ASGI entry point (``platform/asgi.py``) mounts of
the faces — the A2A application and the path it answers under, and the WebSocket routes. The faces' HTTP routes are
included by module name (``platform/urls.py``), no import."""

from __future__ import annotations

from chat.a2a import PREFIX as A2A_PREFIX
from chat.a2a import a2a_application
from chat.routing import websocket_urlpatterns

__all__ = [
    "A2A_PREFIX",
    "a2a_application",
    "websocket_urlpatterns",
]
