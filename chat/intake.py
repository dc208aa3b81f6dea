"""The front door of a message: every face turns what a client sent into the engine's :class:`TurnInput` here.

One place decides, for the gateway and chat routes, their SSE streams, a WebSocket frame and an
OpenAI-compatible completion alike:

* what a message must be (:func:`message_read`: text, ids, context, each error naming its field);
* whose it is (:func:`tenant_resolve`: the API key's tenant, or the tenant a staff session names and holds the
  right to act for, :class:`tenants.models.TenantRight`);
* which profile answers, and whether the text fits its size limit (:func:`turn_input_build`);
* whether its end user may send one more (the session's rate, :func:`tenants.throttles.session_throttle`; the
  key's rate is counted before, with the request);
* which graph it takes (:class:`Route`): the profile's own mode, the ``multi_agent`` rollout flag's verdict
  for this user, or the multi-agent preview; ``metadata.flags.multi_agent`` says which and why.

Faces differ only in how they read a request and how they word an error: every error here is a
:class:`~common.errors.DomainError` naming the field as the gateway body spells it (``agent_id``,
``payload.text``, ``tenant_id``), and a face maps those names onto its own when they differ.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from rest_framework import serializers, status

from common.errors import (
    ERROR_PREVIEW_FORBIDDEN,
    ERROR_TEXT_TOO_LONG,
    ERROR_UNKNOWN_AGENT,
    DomainError,
)
from common.text import whole_number
from conversations.public import HOPS_HEADER, TurnInput, identifier_pseudonym, language_asked, new_session_id
from routing.public import (
    COHORT_MULTI_AGENT,
    COHORT_SINGLE_AGENT,
    MULTI_AGENT_FLAG,
    REASON_UNKNOWN_FLAG,
    ProfileSpec,
    Snapshot,
    flag_evaluate,
    snapshot_current,
)
from tenants.models import Tenant, TenantRight
from tenants.public import (
    ApiClient,
    session_throttle,
    tenant_get_active,
    tenant_ids_with_right,
    tenant_right_held_anywhere,
)

ERROR_TENANT_REQUIRED = "Staff sessions must name the tenant to act for ({field})."
ERROR_UNKNOWN_TENANT = "Unknown tenant {slug!r}."
ERROR_NOT_A_CLIENT = "Only an API key or a staff session may send messages."
ERROR_TENANT_FORBIDDEN = "This session lacks the right to {right} (tenants.{codename}) for tenant {slug!r}."
ERROR_UNKNOWN_ROUTE = "Unknown route {route!r}: one of {choices}."
ERROR_LANGUAGE = "Must name a language the platform speaks: pt, en or es (a tag such as es-MX is read as es)."
LANGUAGE_HELP = "The customer's language (pt, en, es): the platform's own words are written in it, whatever theirs."
ERROR_CONTEXT_TOO_LARGE = "context is larger than the limit of {limit} bytes (as JSON)."
ERROR_CONTEXT_SURROGATE = "Surrogate characters are not allowed: U+{code_point:X}."
_SURROGATE = re.compile("[\ud800-\udfff]")


class Route(enum.StrEnum):
    """Which graph a message takes (docs/api.md's table says which face defaults to which)."""

    PROFILE = "profile"  # the profile's configured mode; the rollout flag is not asked (the gateway)
    ROLLOUT = "rollout"  # the multi_agent flag decides per user: multi-agent graph or single-agent path
    PREVIEW = "multi_agent"  # always the multi-agent graph (keys allowed to preview, staff)


def route_parse(value: str | None, *, default: Route, field_name: str = "route") -> Route:
    """A route a client named (``None`` or ``""``: ``default``); raises :class:`DomainError` naming the field."""
    if not value:
        return default
    try:
        return Route(value)
    except ValueError:
        message = ERROR_UNKNOWN_ROUTE.format(route=value, choices=", ".join(route.value for route in Route))
        raise DomainError(message, fields={field_name: [message]}) from None


# -- errors ------------------------------------------------------------------------------------------------


class UnknownProfile(DomainError):
    """No enabled profile has the ``agent_id``."""


class TextTooLong(DomainError):
    """The text is over the profile's size limit (``limit`` characters), reported on ``payload.text``."""

    def __init__(self, limit: int) -> None:
        message = ERROR_TEXT_TOO_LONG.format(limit=limit)
        super().__init__(message, fields={"payload.text": [message]})
        self.limit = limit


class TenantRequired(DomainError):
    """A staff session did not name the tenant it acts for (or the principal is neither a key nor staff)."""


class UnknownTenant(DomainError):
    """A staff session named a tenant that does not exist or is inactive."""


class TenantForbidden(DomainError):
    """A staff session named a tenant it holds no right over (an unknown tenant looks the same to it)."""

    status_code = status.HTTP_403_FORBIDDEN
    code = "permission_denied"


class PreviewForbidden(DomainError):
    status_code = status.HTTP_403_FORBIDDEN
    code = "permission_denied"


# -- reading a message -------------------------------------------------------------------------------------


class StringOnly(serializers.Field):
    """Mixed into a string field: numbers and booleans are refused (``0`` is not read as ``"0"``)."""

    default_error_messages = {"not_a_string": "Must be a string."}

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("not_a_string")
        return super().to_internal_value(data)


class StrictCharField(StringOnly, serializers.CharField):
    """A string field that refuses numbers and booleans instead of converting them."""


class StrictSlugField(StringOnly, serializers.SlugField):
    """A slug that must arrive as a string."""


class ContextField(serializers.DictField):
    """A JSON object of at most ``API_MAX_CONTEXT_BYTES`` bytes (as compact UTF-8 JSON), with no unpaired surrogate
    (``"\\ud800"`` is valid JSON, but no UTF-8 text, nor PostgreSQL's JSON, can hold it)."""

    default_error_messages = {"too_large": ERROR_CONTEXT_TOO_LARGE, "surrogate": ERROR_CONTEXT_SURROGATE}

    def to_internal_value(self, data: Any) -> dict[Any, Any]:
        if isinstance(data, dict):  # first: DictField's own pass costs a call per key, however many there are
            problem, detail = context_problem(data)
            if problem is not None:
                self.fail(problem, **detail)
        return super().to_internal_value(data)


def context_problem(context: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """What :class:`ContextField` refuses in ``context`` (``"surrogate"``, ``"too_large"``) with its message's
    values, or ``(None, {})``."""
    text = json.dumps(context, ensure_ascii=False, separators=(",", ":"), default=str)
    surrogate = _SURROGATE.search(text)
    if surrogate is not None:
        return "surrogate", {"code_point": ord(surrogate.group())}
    limit = settings.API_MAX_CONTEXT_BYTES
    if len(text.encode()) > limit:
        return "too_large", {"limit": limit}
    return None, {}


ERROR_UNKNOWN_FIELD = "Unknown field; see the API schema for the fields this body takes."
ERROR_UNKNOWN_PARAMETER = "Unknown parameter; see the API schema for the parameters this route takes."


class KnownFieldsSerializer(serializers.Serializer):
    """Refuses fields it does not declare (400 naming each), as its schema says (``additionalProperties: false``):
    a misspelt ``session_id`` must not be silently ignored and start a new conversation."""

    unknown_message = ERROR_UNKNOWN_FIELD

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(str(key) for key in data if key not in self.fields)
            if unknown:
                raise serializers.ValidationError({key: [self.unknown_message] for key in unknown})
        return super().to_internal_value(data)


class KnownParametersSerializer(KnownFieldsSerializer):
    """A query string read as fields (``request.query_params.dict()``): a parameter the route does not take is a 400
    naming it, as a misspelt filter must not silently list everything."""

    unknown_message = ERROR_UNKNOWN_PARAMETER


class PayloadSerializer(KnownFieldsSerializer):
    text = StrictCharField(max_length=None, trim_whitespace=True)
    session_id = StrictCharField(max_length=200, required=False, allow_blank=False)
    user_id = StrictCharField(max_length=200, required=False, allow_blank=True, default="")
    channel_id = StrictCharField(max_length=200, required=False, allow_blank=True, default="")
    language = StrictCharField(max_length=35, required=False, allow_blank=True, default="", help_text=LANGUAGE_HELP)
    # DRF's metaclass takes declared fields off the class, so this field does not hide Serializer.context;
    # the stubs cannot know.
    context = ContextField(required=False, default=dict)  # type: ignore[assignment]

    def validate_language(self, value: str) -> str:
        if value and not language_asked(value):
            raise serializers.ValidationError(ERROR_LANGUAGE)
        return language_asked(value)


class MessageInputSerializer(KnownFieldsSerializer):
    """The gateway body, ``{channel, agent_id, tenant_id?, payload: {text, session_id, user_id, context}}``."""

    channel = StrictCharField(max_length=64, required=False, default="api")
    agent_id = StrictSlugField(max_length=64)
    tenant_id = StrictSlugField(
        max_length=64,
        required=False,
        help_text="Ignored for API keys (the key names the tenant); required for staff sessions.",
    )
    payload = PayloadSerializer()


@dataclass(frozen=True)
class MessageIn:
    """A message as every face reads it, before the tenant and the profile are known."""

    agent_id: str
    text: str
    session_id: str = ""  # "" = a new session
    user_id: str = ""
    channel: str = "api"
    context: dict[str, Any] = field(default_factory=dict)
    tenant_slug: str = ""  # what a staff session names; ignored for an API key
    language: str = ""  # the conversation's language the client names (conversations.language): wins


def message_read(data: Any) -> MessageIn:
    """A gateway-shaped body read and checked; raises DRF's ``ValidationError`` naming every bad field.

    :class:`MessageInputSerializer` is what a message must be; a body that plainly is one is read without it
    (:func:`message_read_plain`), since building the serializer (a deep copy of its fields) and running its fields cost
    a tenth of a turn's CPU. Anything else, every error with it, is the serializer's to read.
    """
    plain = message_read_plain(data)
    if plain is not None:
        return plain
    serializer = MessageInputSerializer(data=data)
    serializer.is_valid(raise_exception=True)
    return message_validated(serializer.validated_data)


def message_validated(valid: Mapping[str, Any]) -> MessageIn:
    """The message the serializer's validated data describe."""
    payload = valid["payload"]
    return MessageIn(
        agent_id=valid["agent_id"],
        text=payload["text"],
        session_id=payload.get("session_id") or "",
        user_id=payload.get("user_id", ""),
        channel=valid.get("channel") or "api",
        context=payload.get("context") or {},
        tenant_slug=valid.get("tenant_id", ""),
        language=payload.get("language", ""),
    )


# What the serializer's string fields refuse besides types and lengths: null characters and surrogates (DRF's
# CharField validators), and for a slug anything but ASCII letters, digits, hyphens and underscores.
_REFUSED_CHARACTERS = re.compile("[\x00\ud800-\udfff]")
_SLUG = re.compile(r"[-a-zA-Z0-9_]+\Z")
# The serializer's fields, built once: their limits are what the plain reading checks. Copied out of DRF's
# ``BindingDict`` into plain dicts, whose name checks and lookups run in C.
_MESSAGE_FIELDS = dict(MessageInputSerializer().fields)
_PAYLOAD_FIELDS = dict(PayloadSerializer().fields)
# The optional strings of each level: (name, blank allowed).
_OPTIONAL_MESSAGE = (("channel", False), ("tenant_id", False))
_OPTIONAL_PAYLOAD = (("session_id", False), ("user_id", True), ("channel_id", True), ("language", True))


def _plain_string(value: Any, field: Any, *, blank: bool = False) -> str | None:
    """``value`` as the serializer's strict string ``field`` reads it (stripped), or ``None`` when the field might
    refuse it or read it otherwise."""
    if type(value) is not str:
        return None
    value = value.strip()
    if not value:
        return value if blank else None
    too_long = field.max_length is not None and len(value) > field.max_length
    if too_long or _REFUSED_CHARACTERS.search(value):
        return None
    if isinstance(field, serializers.SlugField) and _SLUG.match(value) is None:
        return None
    return value


def _plain_strings(
    data: dict[str, Any], fields: Any, optional: tuple[tuple[str, bool], ...], read: dict[str, str]
) -> bool:
    """Read ``data``'s optional strings that are present into ``read``; ``False`` when one is not plain."""
    for name, blank in optional:
        if name in data:
            value = _plain_string(data[name], fields[name], blank=blank)
            if value is None:
                return False
            read[name] = value
    return True


def message_read_plain(data: Any) -> MessageIn | None:
    """The :class:`MessageIn` that :class:`MessageInputSerializer` reads from ``data``, when ``data`` plainly
    satisfies it: JSON objects with only its fields, each a string within its limits or the context an object
    within its size. ``None`` for anything else, valid or not: the serializer then reads it. Tested against the
    serializer on generated bodies (chat/tests/test_message_read.py)."""
    if type(data) is not dict or not data.keys() <= _MESSAGE_FIELDS.keys():
        return None
    payload = data.get("payload")
    if type(payload) is not dict or not payload.keys() <= _PAYLOAD_FIELDS.keys():
        return None
    agent_id = _plain_string(data.get("agent_id"), _MESSAGE_FIELDS["agent_id"])
    text = _plain_string(payload.get("text"), _PAYLOAD_FIELDS["text"])
    read: dict[str, str] = {}
    if agent_id is None or text is None:
        return None
    if not _plain_strings(data, _MESSAGE_FIELDS, _OPTIONAL_MESSAGE, read):
        return None
    if not _plain_strings(payload, _PAYLOAD_FIELDS, _OPTIONAL_PAYLOAD, read):
        return None
    context = payload.get("context", {})
    if type(context) is not dict or (context and context_problem(context)[0] is not None):
        return None
    language = language_asked(read.get("language"))
    if read.get("language") and not language:
        return None
    return MessageIn(
        agent_id=agent_id,
        text=text,
        session_id=read.get("session_id", ""),
        user_id=read.get("user_id", ""),
        channel=read.get("channel", "api"),
        context=dict(context),
        tenant_slug=read.get("tenant_id", ""),
        language=language,
    )


# JSON's widest writing of what a message's limits count: any character as a \uXXXX escape (6 bytes for one byte of
# the context's compact UTF-8), a text character outside the Basic Multilingual Plane as two (12); the room holds
# the ids (200 characters each), the names, the other fields of a route's body and some whitespace.
ESCAPED_CONTEXT_BYTE = 6
ESCAPED_TEXT_CHARACTER = 12
MESSAGE_BODY_ROOM = 16_384


def message_body_limit(current: Snapshot | None = None) -> int:
    """The longest body a message can have: its text within the largest limit of a profile, its context within
    ``API_MAX_CONTEXT_BYTES``, every character written with JSON's widest escape. A longer body is refused by its
    length, before it is parsed (the message routes' ``body_limit``)."""
    current = current or snapshot_current()
    text = max((profile.max_input_chars for profile in current.profiles.values()), default=0)
    text = max(text, settings.MAX_INPUT_CHARS)
    return ESCAPED_CONTEXT_BYTE * settings.API_MAX_CONTEXT_BYTES + ESCAPED_TEXT_CHARACTER * text + MESSAGE_BODY_ROOM


# -- who, which profile, which graph -----------------------------------------------------------------------


def principal_is_staff(principal: Any) -> bool:
    """A logged-in staff user (a session), as opposed to an API key's client."""
    return (
        principal is not None
        and not isinstance(principal, ApiClient)
        and bool(getattr(principal, "is_authenticated", False) and getattr(principal, "is_staff", False))
    )


def tenant_resolve(
    *, principal: Any, tenant_slug: str, field_name: str = "tenant_id", right: TenantRight = TenantRight.ACT
) -> Tenant:
    """The tenant a request acts for: an API key's own (``tenant_slug`` ignored), or the active tenant a staff
    session names in ``field_name`` and holds ``right`` over.

    Raises :class:`TenantRequired` (not a key nor staff, or no tenant named), :class:`TenantForbidden` (403: no
    ``right`` over that tenant; an unknown tenant looks the same to a session that holds the right tenant by
    tenant), or :class:`UnknownTenant` (a session holding ``right`` over every tenant names an unknown one).
    """
    if isinstance(principal, ApiClient):
        return principal.tenant
    if not principal_is_staff(principal):
        raise TenantRequired(ERROR_NOT_A_CLIENT)
    if not tenant_slug:
        message = ERROR_TENANT_REQUIRED.format(field=field_name)
        raise TenantRequired(message, fields={field_name: [message]})
    allowed = tenant_ids_with_right(user=principal, right=right)  # None: every tenant
    tenant = tenant_get_active(slug=tenant_slug) if allowed != set() else None
    if allowed is None and tenant is None:
        message = ERROR_UNKNOWN_TENANT.format(slug=tenant_slug)
        raise UnknownTenant(message, fields={field_name: [message]})
    if tenant is None or (allowed is not None and tenant.pk not in allowed):
        message = ERROR_TENANT_FORBIDDEN.format(right=right.label, codename=right.value, slug=tenant_slug)
        raise TenantForbidden(message, fields={field_name: [message]})
    return tenant


def profile_get(agent_id: str, current: Snapshot | None = None) -> ProfileSpec:
    """The enabled profile ``agent_id`` from the compiled snapshot; raises :class:`UnknownProfile`."""
    profile = (current or snapshot_current()).profiles.get(agent_id)
    if profile is None:
        message = ERROR_UNKNOWN_AGENT.format(agent_id=agent_id)
        raise UnknownProfile(message, fields={"agent_id": [message]})
    return profile


def preview_allowed(principal: Any) -> bool:
    """A key allowed to preview the multi-agent graph (``can_preview``), or a staff session that may act for some
    tenant (:func:`tenant_resolve` then checks the tenant it names)."""
    if isinstance(principal, ApiClient):
        return principal.can_preview
    return principal_is_staff(principal) and tenant_right_held_anywhere(user=principal, right=TenantRight.ACT)


def route_check(*, principal: Any, route: Route) -> None:
    """The preview needs a key allowed to preview or a staff session; raises :class:`PreviewForbidden`."""
    if route is Route.PREVIEW and not preview_allowed(principal):
        raise PreviewForbidden(ERROR_PREVIEW_FORBIDDEN, fields={"route": [ERROR_PREVIEW_FORBIDDEN]})


def gateway_hops(headers: Mapping[str, str]) -> int:
    """How many deployments a message crossed before reaching this one: the ``X-Gateway-Hops`` header another
    deployment's gateway sends (conversations/gateway.py); 0 when absent or not a whole number."""
    raw = headers.get(HOPS_HEADER)
    return (whole_number(raw.strip()) or 0) if raw else 0


def turn_input_build(
    *,
    tenant: Tenant,
    message: MessageIn,
    route: Route,
    current: Snapshot | None = None,
    hops: int = 0,
    counted: bool = True,
    accept_language: str | None = None,
    bucket: str = "",
    origin: str = "",
) -> TurnInput:
    """The engine's input for ``message``: its profile (raises :class:`UnknownProfile`), its size checked against
    the profile's limit (raises :class:`TextTooLong`, naming ``payload.text``), the message ``counted`` against
    its end user's rate (raises DRF's ``Throttled``, :func:`tenants.throttles.session_throttle`), a new session id
    when it has none, the route's graph and the gateway ``hops`` it crossed, the language the message names (and the
    ``Accept-Language`` the client sent, a guess for when the customer's words do not tell), and ``bucket``: what
    the rollout flag places a message that names no user by (the A2A face's ``a2a_anonymous_bucket``), and the
    ``origin`` the client reached (:func:`request_origin`: the answer's links point there). Nothing is stored.
    Call :func:`route_check` first for a client's route."""
    current = current or snapshot_current()
    profile = profile_get(message.agent_id, current)
    limit = profile.max_input_chars
    if len(message.text) > limit:
        raise TextTooLong(limit)
    if counted:
        session_throttle(tenant_pk=tenant.pk, session_id=message.session_id, user_id=message.user_id)
    session_id = message.session_id or new_session_id()
    rollout = rollout_fields(
        current, route, user_id=message.user_id or bucket, session_id=session_id, tenant_slug=tenant.slug
    )
    return TurnInput(
        tenant_pk=tenant.pk,
        tenant_slug=tenant.slug,
        profile=profile,
        text=message.text,
        session_id=session_id,
        session_new=not message.session_id,
        user_id=message.user_id,
        channel=message.channel,
        context=dict(message.context),
        snapshot=current,
        hops=hops,
        language=message.language,
        language_hint=language_asked(accept_language),
        origin=origin,
        **rollout,
    )


def request_origin(request: Any) -> str:
    """The ``scheme://host`` a Django or DRF request reached, as Django builds absolute URLs (its host checked
    against ``ALLOWED_HOSTS``, ``SECURE_PROXY_SSL_HEADER`` honoured)."""
    return str(request.build_absolute_uri("/")).rstrip("/")


def identifier_stored(identifier: str) -> str:
    """A user or session id as it may be shown and stored: its keyed pseudonym when it holds personal data (an
    e-mail, phone or CPF), else itself, as the conversation's ``user_id`` keeps it."""
    return identifier_pseudonym(identifier, key=settings.SECRET_KEY)


def rollout_fields(
    current: Snapshot, route: Route, *, user_id: str, session_id: str, tenant_slug: str
) -> dict[str, Any]:
    """The ``multi_agent`` rollout flag, on every face: the engine input's ``flags``, and on the rollout route its
    ``single_agent`` and ``cohort`` (the input is built once, with them).

    The rollout route: the ``multi_agent`` cohort gets the multi-agent graph, everyone else the single-agent
    path; with no ``multi_agent`` flag at all (nothing is being rolled out) the profile's own mode runs, in no
    cohort (reason ``unknown_flag``). The preview always gets the multi-agent graph, the profile route the
    profile's own mode; both say what the flag would have given (``flag_result``) and put the message in no
    cohort.

    The flag comes from the compiled snapshot: no query beyond the version check every message makes. Its
    evidence shows the user or session id as the store keeps it (:func:`identifier_stored`), never as sent.
    """
    evaluation = flag_evaluate(
        current.flags.get(MULTI_AGENT_FLAG),
        key=MULTI_AGENT_FLAG,
        user_id=user_id,
        session_id=session_id,
        tenant=tenant_slug,
        pseudonym=identifier_stored,
    ).as_dict()
    if route is Route.ROLLOUT and evaluation["reason"] == REASON_UNKNOWN_FLAG:
        # No multi_agent flag: nothing is being rolled out, so the profile's own mode runs, in no cohort.
        return {"flags": {MULTI_AGENT_FLAG: {**evaluation, "enabled": True, "route": route.value}}}
    if route is Route.ROLLOUT:
        enabled = evaluation["enabled"]
        return {
            "single_agent": not enabled,
            "flags": {MULTI_AGENT_FLAG: {**evaluation, "route": route.value}},
            "cohort": COHORT_MULTI_AGENT if enabled else COHORT_SINGLE_AGENT,
        }
    reason = "preview" if route is Route.PREVIEW else "profile_route"
    forced = {
        **evaluation,
        "enabled": True,
        "reason": reason,
        "flag_result": evaluation["enabled"],
        "route": route.value,
    }
    return {"flags": {MULTI_AGENT_FLAG: forced}}


def message_intake(
    *,
    principal: Any,
    data: Mapping[str, Any] | Any,
    route: Route,
    right: TenantRight = TenantRight.ACT,
    headers: Mapping[str, str] | None = None,
    counted: bool = True,
    origin: str = "",
) -> TurnInput:
    """A gateway-shaped request in, the engine's input out: read, route checked, tenant, profile, size, the end
    user's rate unless not ``counted`` (a debug request runs no turn), rollout, and the gateway hops from the
    request's ``headers`` (:func:`gateway_hops`).

    A staff session needs ``right`` over the tenant it names (the routing debug asks for ``DEBUG``).
    Raises DRF's ``ValidationError``, its ``Throttled``, or a :class:`DomainError` naming the field; nothing is
    stored before.
    """
    message = message_read(data)
    route_check(principal=principal, route=route)
    tenant = tenant_resolve(principal=principal, tenant_slug=message.tenant_slug, right=right)
    hops = gateway_hops(headers) if headers else 0
    accept_language = headers.get("Accept-Language") if headers else None
    return turn_input_build(
        tenant=tenant,
        message=message,
        route=route,
        hops=hops,
        counted=counted,
        accept_language=accept_language,
        origin=origin,
    )
