"""ASGI entry point: HTTP through Django, WebSockets through Channels (chat/routing.py)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform.settings")

django_asgi_app = get_asgi_application()

# Imported after Django is set up: the consumers import models.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from chat.routing import websocket_urlpatterns  # noqa: E402
from platform.websocket_security import BrowserOriginValidator  # noqa: E402

# types-channels types the routes as its stub-only _ExtendedURLPattern, which Django's path() is never typed to return.
websocket_router = URLRouter(websocket_urlpatterns)  # type: ignore[arg-type]  # channels' stubs reject path() patterns

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": BrowserOriginValidator(AuthMiddlewareStack(websocket_router), settings.ALLOWED_HOSTS),
    }
)
