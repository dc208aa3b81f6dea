"""External desks' rules that need no database: where a desk's signing secret may come from (docs/external-desk.md).

An external desk is a business's own contact-center tool: the platform posts its profiles' escalations to it, signed
with a secret the operator shares with that tool (:class:`agents.models.ExternalDesk`). The secret is typed once in
the admin (stored, never shown again) or named: an environment variable the operator's ``EXTERNAL_DESK_ENV_ALLOWED``
patterns allow (default ``*_DESK_SECRET``) and never one of the platform's own secrets
(:data:`agents.schemas.PLATFORM_SECRET_VARIABLES`), whatever the allow-list says. Messages name variables, never a
value.
"""

from __future__ import annotations

import os
from fnmatch import fnmatchcase

from django.conf import settings
from django.core.exceptions import ValidationError

from agents.schemas import platform_secret_variable

SECRET_MIN_CHARS = 16
ERROR_VARIABLE_PLATFORM = (
    "{name} is one of the platform's own secrets and never signs a desk's webhook; name the variable that holds this "
    "desk's secret."
)
ERROR_VARIABLE_NOT_ALLOWED = (
    "{name} is not a variable the operator allows for desk secrets (EXTERNAL_DESK_ENV_ALLOWED: {allowed})."
)
ERROR_SIGNING_SHORT = f"A signing secret has at least {SECRET_MIN_CHARS} characters."
# The field history tells a secret from an address by its "://" (common.history.registry.secret_or_endpoint_mask).
ERROR_SIGNING_ADDRESS = "A signing secret is not an address: it may not contain ://."
ERROR_SIGNING_MISSING = "A desk needs a signing secret: type one, or name the environment variable that holds it."
ERROR_SIGNING_BOTH = (
    "Give the secret one way: type it, or name its variable (a named variable replaces a typed secret)."
)


def secret_variable_refusal(name: str) -> str | None:
    """Why ``name`` may not hold a desk's signing secret, or ``None`` when it may: it matches one of the operator's
    ``EXTERNAL_DESK_ENV_ALLOWED`` patterns and is none of the platform's own secrets."""
    if platform_secret_variable(name):
        return ERROR_VARIABLE_PLATFORM.format(name=name)
    allowed = settings.EXTERNAL_DESK_ENV_ALLOWED
    if not any(fnmatchcase(name, pattern) for pattern in allowed):
        return ERROR_VARIABLE_NOT_ALLOWED.format(name=name, allowed=", ".join(allowed) or "none")
    return None


def validate_secret_variable(value: str) -> None:
    """A desk's secret variable: blank (the typed secret signs) or one :func:`secret_variable_refusal` lets by."""
    refusal = secret_variable_refusal(value) if value else None
    if refusal is not None:
        raise ValidationError(refusal)


def validate_secret(value: str) -> None:
    """A typed signing secret: long enough to resist guessing, and never taken for an address (which the field history
    would record masked, not hidden)."""
    if value and len(value) < SECRET_MIN_CHARS:
        raise ValidationError(ERROR_SIGNING_SHORT)
    if "://" in value:
        raise ValidationError(ERROR_SIGNING_ADDRESS)


class SecretUnavailable(Exception):
    """The desk's secret cannot be read here (its variable is unset or refused): nothing is posted unsigned. The
    message names the variable, never a value."""


def signing_secret(*, secret: str, secret_env: str) -> str:
    """The secret a desk's webhook is signed with: its variable's value in this process when it names one, else the
    typed secret. Raises :class:`SecretUnavailable`; checked again at each use, since a row may predate the
    allow-list it is read under."""
    if secret_env:
        refusal = secret_variable_refusal(secret_env)
        if refusal is not None:
            raise SecretUnavailable(refusal)
        value = os.environ.get(secret_env, "")
        if not value:
            raise SecretUnavailable(f"the desk's secret variable {secret_env} is not set in this process")
        return value
    if not secret:
        raise SecretUnavailable("the desk has no signing secret")
    return secret
