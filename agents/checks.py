"""System checks guarding invariants of the settings and of the configuration stored (stable ids, with hints)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.db import DatabaseError

from agents.desks import SecretUnavailable, signing_secret
from agents.llm import key_held
from agents.models import AgentProfile, ExternalDesk, McpTool
from agents.schemas import (
    ERROR_ARGS_SCHEMA_STORED,
    HINT_KEY_VARIABLE,
    model_key_variable_refusal,
    tool_args_schema_problem,
)


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


PUBLIC_URL_HINT = (
    "Set PUBLIC_URL to the platform's public address, scheme://host[:port][/prefix] with an http or https scheme "
    "(https://agents.example.com), or leave it blank for the address each client reached."
)


def public_url_problem(value: str) -> str | None:
    """Why the links of answers cannot be built on ``value`` as ``PUBLIC_URL`` (they are ``value`` + a path), or
    ``None``: it is blank, or an http(s) origin with at most a path prefix."""
    if not value:
        return None
    if any(char.isspace() or not char.isprintable() for char in value):
        return "holds a space or a control character"
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - read for its ValueError: a port that is not a number from 0 to 65535
    except ValueError:
        return "is not a URL (its host or port cannot be read)"
    if parts.username is not None or parts.password is not None:
        return "carries credentials, which every answer's links would show"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "needs an http or https scheme and a host"
    if "?" in value or "#" in value:
        return "has a query or a fragment, after which the links' paths would land"
    return None


@register()
def public_url_check(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[CheckMessage]:
    """``PUBLIC_URL`` is blank or an http(s) origin with at most a path prefix (:func:`public_url_problem`)."""
    value = settings.PUBLIC_URL
    problem = public_url_problem(value)
    if problem is None:
        return []
    shown = "" if "@" in value else f" {value!r}"  # credentials stay out of the check's output
    return [Error(f"PUBLIC_URL{shown} {problem}.", hint=PUBLIC_URL_HINT, id="agents.E003")]


@register(Tags.database)
def model_key_variables_check(
    app_configs: Sequence[AppConfig] | None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """Each enabled profile's key variable is one the operator allows (``agents.W003``; else it is never read) and
    holds a value here (``agents.W002``). Run with the database: ``migrate``, or ``manage.py check --database
    default``. Names the variable, never a value."""
    if not databases:
        return []
    problems: list[CheckMessage] = []
    try:
        profiles = list(
            AgentProfile.objects.filter(enabled=True)
            .exclude(llm_api_key_env="")
            .order_by("agent_id")
            .only("agent_id", "llm_api_key_env")
        )
    except DatabaseError:  # migrate runs the checks before it creates or alters the tables
        return []
    for profile in profiles:
        refusal = model_key_variable_refusal(profile.llm_api_key_env)
        if refusal is not None:
            problems.append(
                Warning(
                    f"Profile {profile.agent_id}'s model key variable is never read, so its answers will be the "
                    f"error answer: {refusal}",
                    hint=HINT_KEY_VARIABLE,
                    obj=profile,
                    id="agents.W003",
                )
            )
        elif not key_held(profile):
            problems.append(
                Warning(
                    f"Profile {profile.agent_id} reads its model key from {profile.llm_api_key_env}, which is not set; "
                    "its answers will be the error answer.",
                    hint=f"Set {profile.llm_api_key_env} in this process's environment, or clear the profile's "
                    "key variable to use OPENAI_API_KEY.",
                    obj=profile,
                    id="agents.W002",
                )
            )
    return problems


@register(Tags.database)
def external_desk_secrets_check(
    app_configs: Sequence[AppConfig] | None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """Each enabled external desk can sign its posts here (``agents.W004``): its secret variable is one the operator
    allows and is set in this process; otherwise nothing is posted to it. Names the variable, never a value."""
    if not databases:
        return []
    try:
        desks = list(ExternalDesk.objects.filter(enabled=True).order_by("name"))
    except DatabaseError:  # migrate runs the checks before it creates the table
        return []
    problems: list[CheckMessage] = []
    for desk in desks:
        try:
            signing_secret(secret=desk.secret, secret_env=desk.secret_env)
        except SecretUnavailable as exc:
            problems.append(
                Warning(
                    f"External desk {desk.name} cannot sign its posts, so none is sent: {exc}.",
                    hint="Set the variable in this process's environment (web and Celery workers), or type the "
                    "desk's secret in the admin.",
                    obj=desk,
                    id="agents.W004",
                )
            )
    return problems


@register(Tags.database)
def tool_schemas_check(
    app_configs: Sequence[AppConfig] | None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """Each enabled MCP tool's stored argument schema is one the platform checks arguments against (``agents.W005``):
    one stored before the bounds of :mod:`agents.structured` (a lookaround, a reference outside the schema, a keyword
    whose work is not counted) makes every call of the tool ``invalid_arguments``, until it is rewritten on the
    tool's page or its server lists one within them and is synced again."""
    if not databases:
        return []
    try:
        tools = list(McpTool.objects.filter(enabled=True).order_by("name").only("name", "args_schema"))
    except DatabaseError:  # migrate runs the checks before it creates or alters the tables
        return []
    problems: list[CheckMessage] = []
    for tool in tools:
        problem = tool_args_schema_problem(tool.args_schema)
        if problem is not None:
            problems.append(
                Warning(
                    ERROR_ARGS_SCHEMA_STORED.format(tool=f"MCP tool {tool.name}", problem=problem),
                    hint="Rewrite the argument schema on the tool's admin page, or have its server list one within "
                    "the bounds and sync it again; docs/agents.md lists them.",
                    obj=tool,
                    id="agents.W005",
                )
            )
    return problems
