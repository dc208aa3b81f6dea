"""What ``GET /api/debug/env`` answers: the configuration this process runs with, every secret masked.

Troubleshooting starts there (docs/operations.md) ("ROUTING_MODE does not change: check /debug/env"). Secrets are masked
by one rule, :func:`config_masked`: a value under a key that names a secret
(:func:`conversations.guardrails.is_secret_key`: ``password``, ``api_key``, ``secret``, ``token``…, and any
``…headers``) becomes ``***`` when set (``""`` when not), a URL loses its credentials and query values
(:func:`common.history.registry.endpoint_mask`, as the configuration history logs endpoints), and a bearer token inside
any other text is hidden (:func:`conversations.guardrails.mask_secrets`). A model key is never read back at all: a
profile shows the name of the variable that holds it and whether it is set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings

from agents.models import McpServer
from agents.public import key_held, key_variable, llm_configured, router_llm_separate
from common.embeddings import KNOWLEDGE, ROUTER
from common.endpoints import endpoint_mask
from common.infra.tracing import tracing_settings
from conversations.public import SECRET_MASK, is_secret_key, mask_secrets
from platform import env
from routing.public import snapshot_current

# Settings shown by their prefix, so that what observability adds (OTLP, metrics, webhooks) shows without a change
# here; masked like the rest.
OBSERVABILITY_PREFIXES = ("OTEL_", "METRICS_", "EVENTS_", "ROLLOUT_", "TRACING_", "USAGE_")
LIMITS = (
    "MAX_INPUT_CHARS",
    "CONVERSATION_HISTORY_LIMIT",
    "CONVERSATION_TURN_LEASE_SECONDS",
    "SUPERVISOR_SPECIALIST_TIMEOUT_SECONDS",
    "DATA_UPLOAD_MAX_MEMORY_SIZE",
    "API_JSON_MAX_DEPTH",
    "API_MAX_CONTEXT_BYTES",
    "IDEMPOTENCY_KEY_TTL_SECONDS",
)
# Shown under names of their own: "auth" in a key would read as a secret to the masking rule.
THROTTLES = {
    "API_MESSAGE_RATE_PER_KEY": "message_rate_per_key",
    "API_MESSAGE_RATE_PER_SESSION": "message_rate_per_session",
    "API_RATE_PER_KEY": "request_rate_per_key",
    "AUTH_FAILURE_LIMIT": "wrong_keys_before_lockout",
    "AUTH_FAILURE_WINDOW_SECONDS": "wrong_keys_window_seconds",
    "AUTH_LOCKOUT_SECONDS": "lockout_seconds",
    "TRUSTED_PROXY_COUNT": "trusted_proxy_count",
}


def _secret(key: Any) -> bool:
    # Header settings (OTEL_EXPORTER_OTLP_HEADERS="Authorization=Basic …") hold credentials under any name.
    return is_secret_key(key) or (isinstance(key, str) and key.lower().endswith("headers"))


def config_masked(value: Any) -> Any:
    """``value`` with every secret hidden by the module's one rule."""
    if isinstance(value, Mapping):
        return {
            key: (SECRET_MASK if item else "") if _secret(key) else config_masked(item) for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [config_masked(item) for item in value]
    if isinstance(value, str):
        return endpoint_mask(value) if "://" in value else mask_secrets(value)
    return value


def _named(names: Mapping[str, str]) -> dict[str, Any]:
    return {shown: getattr(settings, name, None) for name, shown in names.items()}


def _database() -> dict[str, Any]:
    database = settings.DATABASES["default"]
    return {
        "engine": database.get("ENGINE", ""),
        "host": database.get("HOST", ""),
        "port": database.get("PORT", ""),
        "name": str(database.get("NAME", "")),
        "user": database.get("USER", ""),
        "password": database.get("PASSWORD", ""),
        "pool": bool((database.get("OPTIONS") or {}).get("pool")),
    }


def _profiles() -> list[dict[str, Any]]:
    return [
        {
            "agent_id": profile.agent_id,
            "routing_mode": profile.effective_mode,
            "version": profile.version,
            "llm": "openai" if llm_configured(profile) else "offline",
            "base_url": profile.llm_base_url or settings.OPENAI_BASE_URL,
            "own_endpoint": bool(profile.llm_base_url),
            "model": profile.llm_model or settings.LLM_MODEL,
            "temperature": profile.llm_temperature,
            "key_variable": key_variable(profile),
            "key_set": key_held(profile),
        }
        for profile in snapshot_current().profiles.values()
    ]


def _embeddings(endpoint: str) -> dict[str, Any]:
    """An embeddings endpoint's settings (``endpoint``: the prefix of their names, :data:`common.embeddings.ROUTER` or
    :data:`~common.embeddings.KNOWLEDGE`), with the prefixes put before what it embeds."""
    return {
        "base_url": getattr(settings, f"{endpoint}_BASE_URL"),
        "model": getattr(settings, f"{endpoint}_MODEL"),
        "api_key": getattr(settings, f"{endpoint}_API_KEY"),
        "timeout_seconds": getattr(settings, f"{endpoint}_TIMEOUT"),
        "query_prefix": getattr(settings, f"{endpoint}_QUERY_PREFIX"),
        "document_prefix": getattr(settings, f"{endpoint}_DOCUMENT_PREFIX"),
    }


def effective_configuration() -> dict[str, Any]:
    """The configuration of this process, secrets masked (reads the MCP servers and the compiled snapshot)."""
    configuration = {
        "code_version": getattr(settings, "CODE_VERSION", "") or env.string("CODE_VERSION") or None,
        "debug": settings.DEBUG,
        "routing": {"mode_override": settings.ROUTING_MODE or None},
        "llm": {
            "provider": "openai" if llm_configured() else "offline",
            "base_url": settings.OPENAI_BASE_URL,
            "model": settings.LLM_MODEL,
            "api_key": settings.OPENAI_API_KEY,
            "timeout_seconds": settings.LLM_TIMEOUT_SECONDS,
            "max_retries": settings.LLM_MAX_RETRIES,
            "offline_latency_ms": settings.OFFLINE_LLM_LATENCY_MS,
        },
        "router_llm": {
            "separate": router_llm_separate(),
            "base_url": settings.ROUTER_LLM_BASE_URL,
            "model": settings.ROUTER_LLM_MODEL,
            "api_key": settings.ROUTER_LLM_API_KEY,
        },
        "embeddings": _embeddings(ROUTER),
        "knowledge_embeddings": _embeddings(KNOWLEDGE),
        "mcp_servers": list(
            McpServer.objects.order_by("name").values("name", "transport", "endpoint", "enabled", "timeout")
        ),
        "database": _database(),
        "redis": {"url": settings.REDIS_URL, "broker_url": settings.CELERY_BROKER_URL},
        "supervisor": {
            "executor": settings.SUPERVISOR_EXECUTOR,
            "specialist_timeout_seconds": settings.SUPERVISOR_SPECIALIST_TIMEOUT_SECONDS,
        },
        "tracing": {**tracing_settings(), "node_min_ms": settings.TRACING_NODE_MIN_MS},
        "observability": {
            name.lower(): getattr(settings, name)
            for name in sorted(dir(settings))
            if name.startswith(OBSERVABILITY_PREFIXES)
        },
        "limits": _named({name: name.lower() for name in LIMITS}),
        "throttles": _named(THROTTLES),
        "profiles": _profiles(),
    }
    return config_masked(configuration)
