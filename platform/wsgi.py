"""WSGI entry point (the platform is served as ASGI; this exists for tooling)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform.settings")

application = get_wsgi_application()

from common.infra.tracing import tracing_setup  # noqa: E402  (after Django is set up, as in platform/asgi.py)

tracing_setup()
