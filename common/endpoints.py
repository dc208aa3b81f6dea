"""Addresses that may carry credentials — ``https://user:password@host/path?token=…`` — shown without them.

An MCP server's endpoint, a remote backend's or a model's base URL and a webhook URL are written by operators and may
hold credentials before the host and in query values. Whatever shows one — an API answer, an admin page, a history
entry, a log line — shows :func:`endpoint_mask`'s form, which still says which server and path it is. A form that
gets the masked form back keeps the stored credentials (:func:`endpoint_unmask`): they are write-only.

Plain functions over strings, importing nothing of Django: the logging filter (``platform/logs.py``) uses them
before the settings are read.
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, urlsplit

MASK = "***"

ERROR_MASK_ELSEWHERE = (
    "The masked credentials (***) belong to the stored address's host: type them again for another host."
)
ERROR_MASK_NOTHING_STORED = "Nothing is stored for the masked part (***): type the credentials themselves."

# An absolute URL inside free text (a log line, an exception's message): a scheme, "://", then up to a space, a
# quote or an angle bracket.
_URL_IN_TEXT = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>`]+")


def _origin(parts: SplitResult) -> str:
    """``host[:port]``, an IPv6 host in its brackets again; raises ``ValueError`` for a malformed port."""
    host = parts.hostname or ""
    port = parts.port
    if ":" in host:
        host = f"[{host}]"
    return host + (f":{port}" if port else "")


def _query_masked(query: str) -> str:
    # A bare word (``?sk-123``) may be the secret itself: only a name before "=" is shown.
    return "&".join(f"{part.partition('=')[0]}={MASK}" if "=" in part else MASK for part in query.split("&") if part)


def endpoint_mask(value: str) -> str:
    """A URL without its secrets: credentials before the host and every query value are replaced by ``***``, the
    fragment is dropped (``https://bot:pw@crm.example/mcp?token=x`` → ``https://***@crm.example/mcp?token=***``).
    A value that is no URL ("", "None") is returned as it is; one that cannot be parsed as ``***``. Masking a
    masked address changes nothing."""
    try:
        parts = urlsplit(value)
        origin = _origin(parts)
    except ValueError:
        return MASK
    if not parts.scheme or not parts.netloc:
        return value  # "None" (the old value of a create) and other non-URLs carry no secret
    netloc = (f"{MASK}@" if "@" in parts.netloc else "") + origin
    return parts._replace(netloc=netloc, query=_query_masked(parts.query), fragment="").geturl()


def endpoints_masked_in(text: str) -> str:
    """``text`` with every absolute URL in it (``scheme://…``) as :func:`endpoint_mask` shows it: for free text
    that may quote an address, such as an HTTP client's exception or log line."""
    if "://" not in text:
        return text
    return _URL_IN_TEXT.sub(_url_masked, text)


def _url_masked(match: re.Match[str]) -> str:
    url = match.group(0)
    if "@" not in url and "?" not in url and "#" not in url:
        return url  # nothing to hide: spared the parse (every request line of an HTTP client comes here)
    return endpoint_mask(url)


def endpoint_unmask(submitted: str, stored: str) -> str:
    """The address to keep when a form that showed ``stored`` masked sends ``submitted`` back.

    Without ``***`` it is a new address and replaces the stored one. With it, each ``***`` stands for the stored
    secret it masked: ``***@`` for the credentials before the host, ``name=***`` for the stored value of that
    query parameter (the n-th of that name for the n-th), a bare ``***`` for a bare stored word; the path and the
    other parameters are the submitted ones. Raises ``ValueError`` (:data:`ERROR_MASK_ELSEWHERE`,
    :data:`ERROR_MASK_NOTHING_STORED`) when the address moved to another scheme, host or port — a stored secret
    never follows an address elsewhere — or when a ``***`` stands where nothing was stored.
    """
    if MASK not in submitted:
        return submitted
    if stored and submitted == endpoint_mask(stored):
        return stored
    try:
        new, old = urlsplit(submitted), urlsplit(stored)
        same_origin = new.scheme.lower() == old.scheme.lower() and _origin(new) == _origin(old)
    except ValueError:
        raise ValueError(ERROR_MASK_ELSEWHERE) from None
    if not stored or not same_origin:
        raise ValueError(ERROR_MASK_ELSEWHERE if stored else ERROR_MASK_NOTHING_STORED)
    netloc = new.netloc
    userinfo, at, host = netloc.rpartition("@")
    if at and userinfo == MASK:
        stored_userinfo, stored_at, _ = old.netloc.rpartition("@")
        if not stored_at:
            raise ValueError(ERROR_MASK_NOTHING_STORED)
        netloc = f"{stored_userinfo}@{host}"
    stored_values: dict[str, list[str]] = {}
    for part in filter(None, old.query.split("&")):
        name, equals, value = part.partition("=")
        stored_values.setdefault(name if equals else "", []).append(value if equals else part)
    query = []
    for part in filter(None, new.query.split("&")):
        name, equals, value = part.partition("=")
        if (value if equals else part) == MASK:
            kept = stored_values.get(name if equals else "")
            if not kept:
                raise ValueError(ERROR_MASK_NOTHING_STORED)
            part = f"{name}={kept.pop(0)}" if equals else kept.pop(0)
        query.append(part)
    kept_address = new._replace(netloc=netloc, query="&".join(query)).geturl()
    if MASK in kept_address:  # a "***" inside a password or a value: not one this form showed
        raise ValueError(ERROR_MASK_NOTHING_STORED)
    return kept_address


# -- templates: an address written with environment variables, as a configuration file may ---------------------

# ``${NAME}`` or ``${NAME:-default}`` (agents.schemas.expand_env reads them from the environment).
ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def env_template(text: str) -> str:
    """``text`` when it refers to environment variables (``${NAME}``, ``${NAME:-default}``), else ``""``: what an
    endpoint keeps as its template (``McpServer.endpoint_template``), so that an export writes it as it was read."""
    return text if ENV_REFERENCE.search(text) else ""


def template_shareable(template: str) -> bool:
    """Whether an endpoint template may leave the platform as it is written (an export, a downloaded draft).

    Its references leave as names, never as the environment's values. What is written in it — the literal text
    and the defaults — must hold nothing :func:`endpoint_mask` would hide: no credentials before
    the host, no query value, no fragment. So ``http://${USER}:${PASSWORD}@crm/mcp?token=${TOKEN}`` is
    shareable, ``http://bot:pw@${HOST}/mcp`` and ``${URL:-https://bot:pw@crm/mcp}`` are not (they are exported
    masked, as a typed endpoint is)."""
    if not template:
        return False
    written = ENV_REFERENCE.sub(lambda match: match.group(2) or "", template)
    try:
        parts = urlsplit(written)
    except ValueError:
        return False
    userinfo, at, _host = parts.netloc.rpartition("@")
    if at and userinfo.replace(":", ""):
        return False
    values = [part.partition("=")[2] if "=" in part else part for part in parts.query.split("&") if part]
    return not any(values) and not parts.fragment
