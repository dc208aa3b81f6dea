"""ASGI entry point: HTTP through Django, WebSockets through Channels (chat/routing.py)."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform.settings")
django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application does

# Loaded before the first request, not in it: under load a first turn that also loads the language model (every turn's
# judge reads languages) runs past its steps' time limits.
from common.infra.tracing import tracing_setup  # noqa: E402
from common.language import language_model_warm  # noqa: E402

language_model_warm()
tracing_setup()  # traces exported over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set, else off

# Django's handler with the middleware's async twins (platform/middleware.py): no thread hops for hooks without I/O;
# beside it the A2A face, the official SDK's Starlette application (chat/a2a.py), for every /a2a/ path. Both behind
# the gate (platform/gate.py), which refuses an API request's body by its credentials and size before either reads
# it, and in the trace a caller's W3C traceparent names (common/infra/tracing.py).
from django.core.handlers.asgi import ASGIHandler as DjangoASGIHandler  # noqa: E402

from chat.public import A2A_PREFIX, a2a_application  # noqa: E402
from common.infra import stock_paths  # noqa: E402
from common.infra.tracing import RemoteParentApp  # noqa: E402
from platform.gate import RequestGate  # noqa: E402
from platform.middleware import ASGIHandler  # noqa: E402

# STOCK_PATHS: Django's own handler, MIDDLEWARE loaded as listed (docs/decisions/asgi-handler-and-middleware-twins.md).
Handler = DjangoASGIHandler if stock_paths() else ASGIHandler


class _Faces:
    """Every HTTP request to Django, but the A2A face's."""

    def __init__(self) -> None:
        self.django = Handler()
        self.a2a = a2a_application()

    async def __call__(self, scope, receive, send):
        app = self.a2a if scope["path"].startswith(A2A_PREFIX) else self.django
        await app(scope, receive, send)


django_asgi_app = RemoteParentApp(RequestGate(_Faces()))

# Imported after Django is set up: the consumers import models.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.urls import re_path  # noqa: E402

from chat.public import websocket_urlpatterns  # noqa: E402
from platform.errors import websocket_not_found  # noqa: E402
from platform.websocket_security import BrowserOriginValidator  # noqa: E402

# types-channels types the routes as its stub-only _ExtendedURLPattern, which Django's path() is never typed to return.
# The last route takes every path the others do not match and refuses it at the handshake (no 500, no traceback).
websocket_router = URLRouter(
    [*websocket_urlpatterns, re_path(r"", websocket_not_found)]  # type: ignore[list-item,arg-type]  # as above
)

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        # A socket's handshake may bring a caller's traceparent too: each of its turns joins that trace.
        "websocket": RemoteParentApp(
            BrowserOriginValidator(AuthMiddlewareStack(websocket_router), settings.ALLOWED_HOSTS)
        ),
    }
)
