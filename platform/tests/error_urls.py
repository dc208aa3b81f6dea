"""The project's URLs plus views that fail on purpose, for the error tests (platform/tests/test_errors.py)."""

import socket

from django.db.backends.postgresql.base import DatabaseWrapper
from django.http import HttpResponse
from django.urls import path
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.throttling import AnonRateThrottle
from rest_framework.views import APIView

from platform.urls import handler400, handler403, handler404, handler500, urlpatterns  # noqa: F401


def closed_port() -> int:
    """A local TCP port nobody listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def unreachable_database() -> DatabaseWrapper:
    """A real PostgreSQL connection to a port nobody listens on: what a database outage raises."""
    settings = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "nothing",
        "USER": "nobody",
        "PASSWORD": "",
        "HOST": "127.0.0.1",
        "PORT": str(closed_port()),
        "OPTIONS": {"connect_timeout": 2},
        "CONN_MAX_AGE": 0,
        "CONN_HEALTH_CHECKS": False,
        "AUTOCOMMIT": True,
        "ATOMIC_REQUESTS": False,
        "TIME_ZONE": None,
        "TEST": {},
    }
    return DatabaseWrapper(settings, alias="unreachable")


def database_down_view(request):
    unreachable_database().ensure_connection()
    return HttpResponse("unreachable")


class DatabaseDownApi(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    def get(self, request):
        unreachable_database().ensure_connection()
        return Response({})


def broken_view(request):
    raise RuntimeError("a bug")


def form_view(request):
    return HttpResponse(f"{len(request.POST)} fields")


class OnePerMinute(AnonRateThrottle):
    scope = "test_one_per_minute"
    rate = "1/min"


class OneRequestApi(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes = [OnePerMinute]

    def get(self, request):
        return Response({})


urlpatterns = [
    path("api/test/database-down", database_down_view),
    path("api/test/database-down-drf", DatabaseDownApi.as_view()),
    path("api/test/broken", broken_view),
    path("api/test/form", form_view),
    path("api/test/throttled", OneRequestApi.as_view()),
    path("analytics/test/broken", broken_view),
    *urlpatterns,
]
