"""Model fields the kernel adds to Django's."""

from __future__ import annotations

import json
from typing import Any

from django.db import models


class OrderedJSONField(models.JSONField):
    """A JSON value read back exactly as it was written, keys in their order, on every engine.

    Django's ``JSONField`` is a ``jsonb`` column on PostgreSQL, which keeps one key of each name sorted by length:
    fine for a value queried by key, wrong for one whose order means something (a tool's answer, whose fields the
    offline model lists in the tool's order). Here PostgreSQL stores ``json`` — the text as sent — and the value is
    sent as JSON text rather than as ``jsonb``. SQLite stores text either way. Lookups into the value (``field__key``)
    are not for this field."""

    def db_type(self, connection: Any) -> str | None:
        if connection.vendor == "postgresql":
            return "json"
        return super().db_type(connection)

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if connection.vendor != "postgresql" or value is None:
            return super().get_db_prep_value(value, connection, prepared)
        return json.dumps(value, cls=self.encoder, ensure_ascii=False)

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if connection.vendor == "postgresql":  # the driver parsed ``json`` itself, keys in order
            return value
        return super().from_db_value(value, expression, connection)
