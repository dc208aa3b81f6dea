"""A template filter the routing-tests page needs: a mapping's value by a key held in a variable."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import template

register = template.Library()


@register.filter
def get(mapping: Any, key: Any) -> Any:
    """``{{ row|get:column }}``: ``row[column]``, or "" when ``row`` is not a mapping or lacks the key."""
    return mapping.get(key, "") if isinstance(mapping, Mapping) else ""
