"""Where the platform may send a request to an address someone configured: the outbound policy, in one place.

A rollout plan's webhook (set by routing editors), an external desk, a remote backend, an MCP server and a model
endpoint (set by operators) are addresses the server sends requests to from inside its own network. Aimed at
loopback, a private network or the cloud's metadata service, such a request reaches what only the platform reaches,
and what answered tells whoever set it which ports are open there. So each of these addresses must be public, unless
the operator allows it:

* **internal** is every address :mod:`ipaddress` does not call global — loopback, private (RFC 1918, ULA
  ``fc00::/7``), link-local (``169.254.0.0/16`` with the metadata service, ``fe80::/10``), unspecified (``0.0.0.0``,
  ``::``), shared (CGNAT ``100.64.0.0/10``), documentation and benchmarking ranges — and every multicast and reserved
  one; an IPv6 address that carries an IPv4 one (mapped ``::ffff:a.b.c.d``, 6to4 ``2002::/16``, NAT64
  ``64:ff9b::/96``) is what its IPv4 address is (:func:`address_kind`);
* **the operator's allow-list**, ``OUTBOUND_ALLOWED`` (:func:`allowance_parse`): a host name (``mcp-telecom``) or a
  name and port (``mcp-telecom:8100``), trusted whatever it resolves to; an address (``10.0.0.5``, ``::1``), with a
  port (``127.0.0.1:8100``, ``[::1]:8100``), or a network (``10.0.0.0/8``, ``fd00::/8``), for what it covers. A
  client may be given entries of its own: the address of an endpoint set in the environment is allowed for the
  client that calls it (whoever sets the environment sets the allow-list too).

Checked twice: when an address is saved (:func:`validate_outbound_url`, the models' validator, so that the admin's
forms, the YAML import and the commands refuse it on its field — a host name is resolved and each of its addresses
checked; a name that does not resolve now passes), and on every request (:class:`GuardedTransport` and its twins:
an address stored before this policy, a name that resolves elsewhere now, a redirect).

**Why a transport that connects to the address it checked.** A check of the name before the request leaves a gap:
the HTTP client resolves the name again when it connects, and a name may answer a public address to the check and an
internal one to the connection (DNS rebinding). So the transport resolves the name once, checks every address it
got, and sends the request to the address itself: the URL's host replaced by it, the ``Host`` header still the name
(the client wrote it when it built the request) and TLS still verifying the name (httpcore's ``sni_hostname``
request extension). All of it is public API: httpx and httpx2 take a caller's transport, and their own transport does
the rest. httpcore's network-backend interface would see the connection itself, but httpx's transport takes no
backend: plugging one in means rebuilding that transport over httpcore's pool — its request, response and exception
mapping, which httpx keeps private — and twice, since the MCP SDK and the openai client use httpx2. Each host name
gets a connection pool of its own, so a TLS connection verified for one name never carries another name's request.
A redirect is a new request through the same transport, checked as the first was. A client with a transport of its
own does not use the environment's proxies (``HTTP_PROXY``, ``HTTPS_PROXY``): these requests go direct.

Kernel module: imports no app.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import httpx
import httpx2
from django.conf import settings
from django.core.exceptions import ValidationError

logger = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

ERROR_INTERNAL = (
    "The platform does not send requests to this address: it is internal (loopback, private, link-local or another "
    "non-public network). The operator may allow it (OUTBOUND_ALLOWED)."
)
ERROR_ENTRY = "OUTBOUND_ALLOWED: {entry!r} is none of host, host:port, address, address:port or network."
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_DEFAULT_PORTS = {"http": 80, "https": 443}


class OutboundRefused(Exception):
    """A request the policy refuses: its message names the host and why, never the URL (which may carry
    credentials)."""


class HttpxOutboundRefused(OutboundRefused, httpx.ConnectError):
    """:class:`OutboundRefused` as httpx's connection error: a caller that handles failed connections handles it."""


class Httpx2OutboundRefused(OutboundRefused, httpx2.ConnectError):
    """The same for httpx2 (the MCP SDK's and the openai client's HTTP library)."""


# -- which addresses ---------------------------------------------------------------------------------------------


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_kind(address: IPAddress) -> str | None:
    """What makes ``address`` internal, in a word or two (``"loopback"``, ``"link-local"`` …), or ``None`` for a
    public address (module docstring)."""
    embedded = _embedded_ipv4(address)
    if embedded is not None:
        return address_kind(embedded)
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_unspecified:
        return "unspecified"
    if address.is_private:
        return "private"
    if address.is_multicast:
        return "multicast"
    if address.is_reserved or not address.is_global:
        return "not public"
    return None


@dataclass(frozen=True)
class Allowance:
    """The operator's allow-list, parsed (:func:`allowance_parse`). A port of ``None`` is any port."""

    names: frozenset[tuple[str, int | None]] = frozenset()
    networks: tuple[tuple[IPNetwork, int | None], ...] = ()

    def allows_name(self, host: str, port: int) -> bool:
        name = host.rstrip(".").lower()
        return (name, None) in self.names or (name, port) in self.names

    def allows_address(self, address: IPAddress, port: int) -> bool:
        candidates = [address, _embedded_ipv4(address)]
        return any(
            candidate is not None and candidate in network and allowed in (None, port)
            for network, allowed in self.networks
            for candidate in candidates
        )


def _entry(text: str) -> tuple[str, IPNetwork | None, int | None]:
    """``(name, network, port)`` of one allow-list entry, one of name and network set; raises ``ValueError``."""
    host, port_text = text, ""
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError(text)
        port_text = rest[1:]
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    port = None
    if port_text or text.endswith(":"):
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(text)
        port = int(port_text)
    try:
        return "", ipaddress.ip_network(host, strict=False), port
    except ValueError:
        pass
    name = host.rstrip(".").lower()
    if not name or "/" in name or ":" in name or any(character.isspace() for character in name):
        raise ValueError(text)
    return name, None, port


def allowance_parse(entries: Iterable[str]) -> Allowance:
    """The allow-list of ``entries`` (module docstring); raises ``ValueError`` (:data:`ERROR_ENTRY`) for the first
    that is none of them."""
    names: set[tuple[str, int | None]] = set()
    networks: list[tuple[IPNetwork, int | None]] = []
    for entry in entries:
        try:
            name, network, port = _entry(entry.strip())
        except ValueError:
            raise ValueError(ERROR_ENTRY.format(entry=entry)) from None
        if network is not None:
            networks.append((network, port))
        else:
            names.add((name, port))
    return Allowance(frozenset(names), tuple(networks))


@lru_cache(maxsize=32)
def _allowance(entries: tuple[str, ...]) -> Allowance:
    usable = []
    for entry in entries:
        try:
            allowance_parse([entry])
        except ValueError:
            continue  # allows nothing (the system check common.E001 names it)
        usable.append(entry)
    return allowance_parse(usable)


def allowance(extra: Sequence[str] = ()) -> Allowance:
    """``OUTBOUND_ALLOWED`` as it is now, with ``extra`` entries (a client's own); an entry that does not parse
    allows nothing."""
    return _allowance((*settings.OUTBOUND_ALLOWED, *extra))


def origin_entry(url: str) -> list[str]:
    """The allow-list entry of ``url``'s host and port (``[]`` for an empty or unreadable URL): an endpoint set in
    the environment is allowed for the client that calls it."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return []
    host = parsed.raw_host.decode("ascii")
    if not host:
        return []
    port = parsed.port or _DEFAULT_PORTS.get(parsed.scheme, 80)
    return [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]


def resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to, in the resolver's order (the seam the tests may replace: nothing else
    resolves a name this module checks). Raises ``OSError``."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(sockaddr[0]) for *_, sockaddr in found))


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def addresses_refusal(host: str, port: int, addresses: Iterable[str], allowed: Allowance) -> str | None:
    """Why ``host`` may not be sent to at these addresses (the first internal one the operator does not allow), or
    ``None``: in words for the server's log."""
    for text in addresses:
        address = ipaddress.ip_address(text)
        kind = address_kind(address)
        if kind is not None and not allowed.allows_address(address, port):
            shown = host if host == text else f"{host} ({text})"
            return f"{shown} port {port} is {kind}: not in OUTBOUND_ALLOWED"
    return None


def url_refusal(url: str, *, extra: Sequence[str] = ()) -> str | None:
    """Why the platform may not send to ``url`` now (the server's words), or ``None``: a name the operator allows,
    or one whose every address is public or allowed. A name that does not resolve now passes: it is checked again
    on every request."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return None  # not a URL: the field's own validators say so
    host = parsed.raw_host.decode("ascii")
    if not host:
        return None
    port = parsed.port or _DEFAULT_PORTS.get(parsed.scheme, 80)
    allowed = allowance(extra)
    if allowed.allows_name(host, port):
        return None
    if _literal(host) is not None:
        return addresses_refusal(host, port, [host], allowed)
    try:
        addresses = resolve(host, port)
    except (OSError, UnicodeError):
        return None
    return addresses_refusal(host, port, addresses, allowed)


def validate_outbound_url(value: str) -> None:
    """The models' validator of an address the platform sends requests to: raises ``ValidationError``
    (:data:`ERROR_INTERNAL`) when it is internal and not allowed. Blank values are the field's to allow or not."""
    if value and url_refusal(value) is not None:
        raise ValidationError(ERROR_INTERNAL, code="outbound_internal")


# -- the transports ------------------------------------------------------------------------------------------------


# A client's own allow-list entries (:func:`origin_entry`), or what gives them when a request is sent (a setting
# that may change).
Allowed = Sequence[str] | Callable[[], Sequence[str]]


class _Guard:
    """What the transports share: the check of one request's host, and a connection pool per host name."""

    def __init__(self, make: Callable[[], Any], allowed: Allowed) -> None:
        self._make = make
        self._allowed = allowed
        self._pools: dict[str, Any] = {}
        self._lock = threading.Lock()

    def pool(self, host: str) -> Any:
        with self._lock:
            if host not in self._pools:
                self._pools[host] = self._make()
            return self._pools[host]

    def pools(self) -> list[Any]:
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
            return pools

    def allowance(self) -> Allowance:
        return allowance(self._allowed() if callable(self._allowed) else self._allowed)

    def where(self, request: Any) -> tuple[str, int, bool]:
        """``(host, port, by_name)``: ``by_name`` when the operator allows the name itself (sent as it is)."""
        host = request.url.raw_host.decode("ascii")
        port = request.url.port or _DEFAULT_PORTS.get(request.url.scheme, 80)
        return host, port, self.allowance().allows_name(host, port)

    def checked(self, request: Any, host: str, port: int, addresses: list[str], refused: Any) -> list[str]:
        """``addresses`` when every one is public or allowed; raises ``refused`` otherwise."""
        refusal = addresses_refusal(host, port, addresses, self.allowance())
        if refusal is not None:
            logger.warning("outbound request refused: %s", refusal)
            raise refused(f"refused by the outbound policy: {refusal}", request=request)
        return addresses


def _pinned(request: Any, address: str, host: str) -> Any:
    """``request`` sent to ``address``: the URL's host replaced, the ``Host`` header and TLS's name kept."""
    headers = request.headers.copy()
    if "host" not in headers:
        headers["Host"] = request.url.netloc.decode("ascii")
    return type(request)(
        request.method,
        request.url.copy_with(host=address),
        headers=headers,
        stream=request.stream,
        extensions={**request.extensions, "sni_hostname": host},
    )


def _connect_seconds(request: Any) -> float | None:
    timeout = request.extensions.get("timeout")
    return timeout.get("connect") if isinstance(timeout, dict) else None


class _SyncGuarded:
    """A synchronous transport sending each request to its host's checked addresses, in order, the next one after a
    failed connection."""

    _guard: _Guard
    _connect_error: Any
    _refused: Any

    def handle_request(self, request: Any) -> Any:
        host, port, by_name = self._guard.where(request)
        pool = self._guard.pool(host)
        if by_name:
            return pool.handle_request(request)
        literal = _literal(host)
        try:
            addresses = [str(literal)] if literal is not None else resolve(host, port)
        except (OSError, UnicodeError) as exc:
            raise self._connect_error(f"{host}: {exc}", request=request) from exc
        addresses = self._guard.checked(request, host, port, addresses, self._refused)
        if literal is not None:
            return pool.handle_request(request)  # the URL names the address it checked
        for index, address in enumerate(addresses):
            try:
                return pool.handle_request(_pinned(request, address, host))
            except self._connect_error:
                if index == len(addresses) - 1:
                    raise
        raise self._connect_error(f"{host}: no address", request=request)

    def close(self) -> None:
        for pool in self._guard.pools():
            pool.close()


class _AsyncGuarded:
    """The asynchronous twin of :class:`_SyncGuarded`; the name is resolved off the event loop, within the
    request's connect timeout."""

    _guard: _Guard
    _connect_error: Any
    _connect_timeout: Any
    _refused: Any

    async def handle_async_request(self, request: Any) -> Any:
        host, port, by_name = self._guard.where(request)
        pool = self._guard.pool(host)
        if by_name:
            return await pool.handle_async_request(request)
        literal = _literal(host)
        try:
            if literal is not None:
                addresses = [str(literal)]
            else:
                lookup = asyncio.get_running_loop().run_in_executor(None, resolve, host, port)
                addresses = await asyncio.wait_for(lookup, _connect_seconds(request))
        except TimeoutError as exc:
            raise self._connect_timeout(f"{host}: no address within the connect timeout", request=request) from exc
        except (OSError, UnicodeError) as exc:
            raise self._connect_error(f"{host}: {exc}", request=request) from exc
        addresses = self._guard.checked(request, host, port, addresses, self._refused)
        if literal is not None:
            return await pool.handle_async_request(request)  # the URL names the address it checked
        for index, address in enumerate(addresses):
            try:
                return await pool.handle_async_request(_pinned(request, address, host))
            except self._connect_error:
                if index == len(addresses) - 1:
                    raise
        raise self._connect_error(f"{host}: no address", request=request)

    async def aclose(self) -> None:
        for pool in self._guard.pools():
            await pool.aclose()


class GuardedTransport(_SyncGuarded, httpx.BaseTransport):
    """httpx's synchronous transport under the outbound policy (module docstring). ``allowed``: allow-list entries
    of this client's own (:data:`Allowed`); ``options`` go to each host name's ``httpx.HTTPTransport``. Raises
    :class:`HttpxOutboundRefused` for a refused request, before anything is sent."""

    _connect_error = httpx.ConnectError
    _refused = HttpxOutboundRefused

    def __init__(self, *, allowed: Allowed = (), **options: Any) -> None:
        self._guard = _Guard(lambda: httpx.HTTPTransport(**options), allowed)


class AsyncGuardedTransport(_AsyncGuarded, httpx.AsyncBaseTransport):
    """httpx's asynchronous transport under the outbound policy."""

    _connect_error = httpx.ConnectError
    _connect_timeout = httpx.ConnectTimeout
    _refused = HttpxOutboundRefused

    def __init__(self, *, allowed: Allowed = (), **options: Any) -> None:
        self._guard = _Guard(lambda: httpx.AsyncHTTPTransport(**options), allowed)


class Httpx2GuardedTransport(_SyncGuarded, httpx2.BaseTransport):
    """httpx2's synchronous transport under the outbound policy (the openai client's, outside an event loop)."""

    _connect_error = httpx2.ConnectError
    _refused = Httpx2OutboundRefused

    def __init__(self, *, allowed: Allowed = (), **options: Any) -> None:
        self._guard = _Guard(lambda: httpx2.HTTPTransport(**options), allowed)


class AsyncHttpx2GuardedTransport(_AsyncGuarded, httpx2.AsyncBaseTransport):
    """httpx2's asynchronous transport under the outbound policy (the MCP SDK's and the openai client's)."""

    _connect_error = httpx2.ConnectError
    _connect_timeout = httpx2.ConnectTimeout
    _refused = Httpx2OutboundRefused

    def __init__(self, *, allowed: Allowed = (), **options: Any) -> None:
        self._guard = _Guard(lambda: httpx2.AsyncHTTPTransport(**options), allowed)


def outbound_client(*, allowed: Allowed = (), **options: Any) -> httpx.Client:
    """An httpx client whose every request passes the outbound policy; ``options`` are the client's."""
    return httpx.Client(transport=GuardedTransport(allowed=allowed), **options)


def outbound_async_client(*, allowed: Allowed = (), **options: Any) -> httpx.AsyncClient:
    """The asynchronous twin of :func:`outbound_client`."""
    return httpx.AsyncClient(transport=AsyncGuardedTransport(allowed=allowed), **options)
