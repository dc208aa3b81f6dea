"""Touches on the OpenAPI schema drf-spectacular cannot make from the views alone."""

from __future__ import annotations

from typing import Any

from chat.intake import KnownFieldsSerializer


def closed_request_bodies(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """``additionalProperties: false`` on the bodies that refuse unknown fields (:class:`KnownFieldsSerializer`),
    so the schema says what the API does. A drf-spectacular postprocessing hook (SPECTACULAR_SETTINGS)."""
    closed = {cls.__name__.removesuffix("Serializer") for cls in KnownFieldsSerializer.__subclasses__()}
    for name, schema in result.get("components", {}).get("schemas", {}).items():
        if name in closed:
            schema["additionalProperties"] = False
    return result
