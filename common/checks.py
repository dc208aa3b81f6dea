"""System checks guarding invariants of the kernel's settings (stable ids, with hints)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, register

from common.outbound import allowance_parse


@register()
def outbound_allowed_check(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[CheckMessage]:
    """Every ``OUTBOUND_ALLOWED`` entry parses (one that does not allows nothing)."""
    problems: list[CheckMessage] = []
    for entry in settings.OUTBOUND_ALLOWED:
        try:
            allowance_parse([entry])
        except ValueError as exc:
            problems.append(
                Error(
                    str(exc),
                    hint="Write a host (mcp-telecom), host:port (mcp-telecom:8100), an address (10.0.0.5), "
                    "address:port (127.0.0.1:8100, [::1]:8100) or a network (10.0.0.0/8), comma-separated.",
                    id="common.E001",
                )
            )
    return problems
