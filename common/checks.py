"""System checks guarding invariants of the kernel's settings (stable ids, with hints)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register

from common.outbound import allowance_parse
from platform.serve import PUSHES_SPLIT, PUSHES_SPLIT_HINT


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


IN_MEMORY_CHANNEL_LAYER = "channels.layers.InMemoryChannelLayer"


def pushes_split() -> str | None:
    """Why pushes between sockets miss some of them, or ``None``: more than one web worker (``WEB_CONCURRENCY``)
    over a channel layer held in each process's own memory (no ``REDIS_URL``)."""
    if settings.WEB_CONCURRENCY > 1 and settings.CHANNEL_LAYERS["default"]["BACKEND"] == IN_MEMORY_CHANNEL_LAYER:
        return PUSHES_SPLIT.format(workers=settings.WEB_CONCURRENCY)
    return None


@register()
def pushes_reach_every_worker_check(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[CheckMessage]:
    """Every web worker's sockets receive the pushes any worker sends (``common.W002``)."""
    problem = pushes_split()
    return [Warning(f"{problem}.", hint=PUSHES_SPLIT_HINT, id="common.W002")] if problem else []


EMBEDDINGS_PREFIXES = tuple(
    f"{endpoint}_EMBEDDINGS_{role}_PREFIX" for endpoint in ("ROUTER", "KNOWLEDGE") for role in ("QUERY", "DOCUMENT")
)


@register()
def embeddings_prefix_check(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[CheckMessage]:
    """Every embeddings prefix that is set ends with a space (``common.W003``): one that does not runs into the text
    after it (``query:`` reaches the model as ``query:what is…``), most often because a shell, an ``.env`` file or a
    manifest dropped the trailing space of an unquoted value."""
    return [
        Warning(
            f"{name} is {value!r}, which does not end with a space: the model reads it run into the text "
            f"({value + 'what is my balance'!r}).",
            hint=f'Quote the value to keep its trailing space: {name}="{value} " (the model card gives the prefix).',
            id="common.W003",
        )
        for name in EMBEDDINGS_PREFIXES
        if (value := getattr(settings, name)) and not value[-1].isspace()
    ]
