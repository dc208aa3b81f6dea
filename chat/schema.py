"""Touches on the OpenAPI schema drf-spectacular cannot make from the views alone: closed request bodies, and the
schema view's own errors (the areas operations are grouped by: chat/schema_areas.py)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.views import SpectacularAPIView
from rest_framework.response import Response

from chat.intake import KnownFieldsSerializer
from common.infra.renderers import JSONRenderer


def closed_request_bodies(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """``additionalProperties: false`` on the bodies that refuse unknown fields (:class:`KnownFieldsSerializer`),
    so the schema says what the API does. A drf-spectacular postprocessing hook (SPECTACULAR_SETTINGS)."""
    closed = {cls.__name__.removesuffix("Serializer") for cls in KnownFieldsSerializer.__subclasses__()}
    for name, schema in result.get("components", {}).get("schemas", {}).items():
        if name in closed:
            schema["additionalProperties"] = False
    return result


class SchemaApi(SpectacularAPIView):
    """``GET /api/schema/``: the OpenAPI document (YAML; JSON with ``?format=json``). Its errors (a wrong method, a
    throttled client) are JSON in the API's error shape, as every route's, not a YAML document."""

    def handle_exception(self, exc: Exception) -> Response:
        response = super().handle_exception(exc)
        self.request.accepted_renderer, self.request.accepted_media_type = JSONRenderer(), "application/json"
        return response
