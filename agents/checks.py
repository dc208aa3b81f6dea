"""System checks guarding invariants of the settings (stable ids, with hints)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register


@register()
def llm_settings_check(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[CheckMessage]:
    problems: list[CheckMessage] = []
    configured = [bool(settings.OPENAI_BASE_URL), bool(settings.LLM_MODEL)]
    if any(configured) and not all(configured):
        problems.append(
            Warning(
                "The LLM endpoint is half-configured; the offline model will answer.",
                hint="Set OPENAI_BASE_URL and LLM_MODEL together (and OPENAI_API_KEY when the endpoint needs one).",
                id="agents.W001",
            )
        )
    if settings.OFFLINE_LLM_LATENCY_MS < 0:
        problems.append(Error("OFFLINE_LLM_LATENCY_MS must not be negative.", id="agents.E001"))
    if settings.MAX_INPUT_CHARS < 1:
        problems.append(Error("MAX_INPUT_CHARS must be at least 1.", id="agents.E002"))
    return problems
