"""Typed validation of JSON fields that hold configuration.

Each validator raises :class:`django.core.exceptions.ValidationError` with a
message naming the offending key, so the admin, the YAML importer and the API
all report the same thing.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from agents.mcp_stdio import declared as stdio_declared
from agents.mcp_stdio import stdio_name
from agents.structured import schema_problem
from common.endpoints import ENV_REFERENCE, endpoint_mask, endpoint_unmask, template_shareable
from common.outbound import validate_outbound_url
from platform import env

# Shorthand types accepted in tools.yaml (``msisdn: string``), as in docs/configuration.md (tools.yaml).
SHORTHAND_TYPES = {"string", "integer", "number", "boolean", "object", "array"}


def expand_args_schema(value: Any) -> dict[str, Any]:
    """Turn the seeds' shorthand ``{arg: type}`` into a JSON Schema object.

    A mapping that already looks like a JSON Schema (has ``type`` or
    ``properties``) is returned unchanged; ``{}``/``None`` means "no arguments".
    """
    if value in (None, {}):
        return {"type": "object", "properties": {}}
    if not isinstance(value, dict):
        raise ValidationError("args_schema must be a mapping.")
    if "type" in value or "properties" in value or "$schema" in value:
        return value
    properties: dict[str, Any] = {}
    for arg, arg_type in value.items():
        if arg_type not in SHORTHAND_TYPES:
            raise ValidationError(
                f"args_schema.{arg}: unknown type {arg_type!r}; use one of {', '.join(sorted(SHORTHAND_TYPES))}."
            )
        properties[arg] = {"type": arg_type}
    return {"type": "object", "properties": properties}


def validate_tool_args_schema(value: Any) -> None:
    """A tool's arguments must be described by a valid JSON Schema of an object."""
    if value in (None, {}):
        return
    if not isinstance(value, dict):
        raise ValidationError("The argument schema must be a JSON object.")
    try:
        Draft202012Validator.check_schema(value)
    except SchemaError as exc:
        where = ".".join(str(p) for p in exc.absolute_path) or "schema"
        raise ValidationError(f"Invalid JSON Schema at {where}: {exc.message}") from exc
    if value.get("type", "object") != "object":
        raise ValidationError("The argument schema must describe an object (type: object).")
    problem = schema_problem(value)  # what the calls will check arguments within (agents.structured)
    if problem is not None:
        raise ValidationError(f"The argument schema is not one the platform checks arguments against: {problem}")
    properties = value.get("properties", {})
    missing = [name for name in value.get("required", []) if name not in properties]
    if missing:
        raise ValidationError(f"required names arguments that are not in properties: {', '.join(missing)}.")


def tool_args_schema_problem(value: Any) -> str | None:
    """Why :func:`validate_tool_args_schema` refuses ``value`` (a stored schema may predate a check); ``None`` when it
    takes it."""
    try:
        validate_tool_args_schema(value)
    except ValidationError as exc:
        return " ".join(exc.messages)
    return None


# A stored argument schema the platform does not take: every call is refused before it is sent (agents.mcp).
ERROR_ARGS_SCHEMA_STORED = (
    "{tool}'s argument schema is not one the platform checks arguments against, so every call of it is refused as "
    "invalid_arguments: {problem}"
)


def validate_tool_output_schema(value: Any) -> None:
    """A tool's output schema, as its server lists it (``None``: it lists none) must be one the platform checks the
    tool's results against (:mod:`agents.structured`); a call's result is checked against it
    (:func:`agents.mcp.result_problem`)."""
    if value is None:
        return
    problem = schema_problem(value) if isinstance(value, dict) else "The output schema must be a JSON object."
    if problem is not None:
        raise ValidationError(f"The output schema is not one the platform checks results against: {problem}")


def validate_endpoint_url(value: str) -> None:
    """An http(s) URL with a host, on an address the platform may send requests to
    (:func:`common.outbound.validate_outbound_url`). Unlike ``URLField`` it accepts single-label
    host names such as ``mcp-telecom`` (Docker service names)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        raise ValidationError(f"Not a valid URL: {exc}.") from exc
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ValidationError("Enter an http:// or https:// URL with a host, e.g. http://localhost:8100/mcp.")
    if port == 0 or any(ch.isspace() for ch in value):
        raise ValidationError("Enter a valid URL (no spaces, a port between 1 and 65535).")
    validate_outbound_url(value)


def validate_mcp_endpoint(value: str) -> None:
    """An MCP server's endpoint: an http(s) URL (:func:`validate_endpoint_url`), or ``stdio:<name>`` of a stdio server
    the operator declared (:mod:`agents.mcp_stdio`: its command line is declared there, never typed here)."""
    name = stdio_name(value)
    if name is None:
        validate_endpoint_url(value)
    elif name not in stdio_declared():
        raise ValidationError(
            f"No stdio server {name!r} is declared in MCP_STDIO_SERVERS: the operator declares a command line there."
        )


# The platform's own secrets: what platform/settings.py (and Django's createsuperuser, the first run's admin, the
# OpenTelemetry exporter) read as one. A profile's model key is sent to the profile's endpoint, so none of these may
# ever be it, whatever LLM_API_KEY_ENV_ALLOWED says. Shell-style patterns; agents/tests/test_model_key_variables.py
# holds the list to every secret-looking variable the settings read.
PLATFORM_SECRET_VARIABLES = (
    "DJANGO_SECRET_KEY",
    "DJANGO_SUPERUSER_PASSWORD",
    "ADMIN_PASSWORD",
    "DATABASE_URL",
    "REDIS_URL",
    "METRICS_TOKEN",
    "EVENTS_WEBHOOK_SECRET",
    "EVENTS_WEBHOOK_URL",
    "ROLLOUT_WEBHOOK_SECRET",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ROUTER_LLM_API_KEY",
    "ROUTER_LLM_BASE_URL",
    "ROUTER_EMBEDDINGS_API_KEY",
    "ROUTER_EMBEDDINGS_BASE_URL",
    "KNOWLEDGE_EMBEDDINGS_API_KEY",
    "KNOWLEDGE_EMBEDDINGS_BASE_URL",
    "PUBLIC_URL",
    "OTEL_*",
)
ERROR_KEY_VARIABLE_PLATFORM = (
    "{name} is one of the platform's own secrets and is never sent as a model key; name the variable that holds "
    "this endpoint's key (blank: OPENAI_API_KEY)."
)
ERROR_KEY_VARIABLE_NOT_ALLOWED = (
    "{name} is not a variable the operator allows for model keys (LLM_API_KEY_ENV_ALLOWED: {allowed})."
)


HINT_KEY_VARIABLE = (
    "Name a variable LLM_API_KEY_ENV_ALLOWED allows (by default one ending in _API_KEY, never one of the platform's "
    "own secrets), or clear it to use OPENAI_API_KEY."
)


def platform_secret_variable(name: str) -> bool:
    """Whether ``name`` is one of the platform's own secrets (:data:`PLATFORM_SECRET_VARIABLES`): never read on behalf
    of a configuration, be it a model key or a ``${NAME}`` in an imported endpoint."""
    return any(fnmatchcase(name, pattern) for pattern in PLATFORM_SECRET_VARIABLES)


def expand_env(text: str) -> tuple[str, list[str], list[str]]:
    """Replace ``${NAME}`` and ``${NAME:-default}`` with the environment's values.

    Returns the expanded text, the names that were neither set nor given a
    default, and the names refused because they are the platform's own secrets
    (:func:`platform_secret_variable`: never read into an address
    that leaves the platform); the caller reports both. Used for MCP server
    endpoints, so one file serves a laptop (``127.0.0.1``) and a compose network
    (``mcp-telecom``).
    """
    missing: list[str] = []
    refused: list[str] = []

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if platform_secret_variable(name):
            refused.append(name)
            return match.group(0)
        value = env.string(name)
        if value:
            return value
        if default is not None:
            return default
        missing.append(name)
        return match.group(0)

    return ENV_REFERENCE.sub(replace, text), missing, refused


def endpoint_exported(endpoint: str, template: str) -> str:
    """What a configuration export writes for an MCP server's ``endpoint``, imported as ``template``: the template,
    while it still expands to the stored endpoint here (an address changed since — typed in the admin, set from a
    shell — is not what it says any more) and what is written in it holds no secret
    (:func:`common.endpoints.template_shareable`); else the endpoint masked (:func:`common.endpoints.endpoint_mask`)."""
    if template_shareable(template):
        expanded, missing, refused = expand_env(template)
        if not missing and not refused and expanded == endpoint:
            return template
    return endpoint_mask(endpoint)


def model_key_variable_refusal(name: str) -> str | None:
    """Why ``name`` may not be a profile's model key variable, or ``None`` when it may: it matches one of the
    operator's ``LLM_API_KEY_ENV_ALLOWED`` patterns and none of :data:`PLATFORM_SECRET_VARIABLES`. The reason names
    the variable, never a value."""
    if platform_secret_variable(name):
        return ERROR_KEY_VARIABLE_PLATFORM.format(name=name)
    allowed = settings.LLM_API_KEY_ENV_ALLOWED
    if not any(fnmatchcase(name, pattern) for pattern in allowed):
        return ERROR_KEY_VARIABLE_NOT_ALLOWED.format(name=name, allowed=", ".join(allowed) or "none")
    return None


def validate_model_key_variable(value: str) -> None:
    """A profile's model key variable: blank (the platform's key) or one :func:`model_key_variable_refusal` lets by."""
    refusal = model_key_variable_refusal(value) if value else None
    if refusal is not None:
        raise ValidationError(refusal)


ERROR_ENDPOINT_MASKED = (
    "this endpoint is masked (***): write it in full, or leave the masked form of the stored one to keep it"
)
MASK = "***"


def endpoint_kept(value: str, stored: str) -> str:
    """An endpoint as entered where endpoints are shown masked (:func:`common.endpoints.endpoint_mask`), made whole
    against the ``stored`` one (:func:`common.endpoints.endpoint_unmask`: write-only, kept unless replaced); a
    masked value that cannot be made whole is refused, since storing it would lose the credentials."""
    try:
        return endpoint_unmask(value, stored)
    except ValueError as exc:
        raise ValidationError(f"{ERROR_ENDPOINT_MASKED} ({exc})") from None


GUARDRAIL_KEYS: dict[str, type | tuple[type, ...]] = {
    "blocked_terms": list,
    "max_input_chars": int,
    "mask_personal_data": bool,
    "store_original_input": bool,
}

JUDGE_KEYS: dict[str, type | tuple[type, ...]] = {
    "min_score": (int, float),
    "llm_judge": bool,
    "replace_failed_answers": bool,
}


def _validate_settings(value: Any, allowed: dict[str, type | tuple[type, ...]], label: str) -> None:
    if value in (None, {}):
        return
    if not isinstance(value, dict):
        raise ValidationError(f"{label} must be a JSON object.")
    for key, item in value.items():
        if key not in allowed:
            raise ValidationError(f"{label}.{key} is not a known setting; known: {', '.join(sorted(allowed))}.")
        expected = allowed[key]
        if isinstance(item, bool) and expected in (int, (int, float)):
            raise ValidationError(f"{label}.{key} must be a number.")
        if not isinstance(item, expected):
            raise ValidationError(f"{label}.{key} has the wrong type.")
    if "blocked_terms" in value and not all(isinstance(t, str) and t.strip() for t in value["blocked_terms"]):
        raise ValidationError(f"{label}.blocked_terms must be a list of non-empty strings.")
    if "max_input_chars" in value and value["max_input_chars"] < 1:
        raise ValidationError(f"{label}.max_input_chars must be positive.")
    if "min_score" in value and not 0 <= value["min_score"] <= 1:
        raise ValidationError(f"{label}.min_score must be between 0 and 1.")


def validate_guardrail_settings(value: Any) -> None:
    _validate_settings(value, GUARDRAIL_KEYS, "guardrails")


def validate_judge_settings(value: Any) -> None:
    _validate_settings(value, JUDGE_KEYS, "judges")


def validate_word_list(value: Any) -> None:
    """A list of non-empty words or phrases (confirmation and closing words of a profile)."""
    if not isinstance(value, list):
        raise ValidationError('Give a list of words or phrases, e.g. ["sim", "pode", "go ahead"].')
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            raise ValidationError(f"[{index}]: each entry must be a non-empty word or phrase.")
