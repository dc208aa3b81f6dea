"""The outbound policy (common/outbound.py): which addresses are internal, the operator's allow-list, the check of an
address when it is saved, and the transports that send a request only to an address they checked.

Real servers on loopback (tests/webhook_receiver.py; ``receiver`` and ``nothing_allowed``:
tests/outbound_fixtures.py). The suite allows loopback (tests/suite_environment.py): each test here says what the
operator allows. Where a test needs a name to resolve somewhere this machine's resolver does not send it, it
replaces the module's one resolver (``common.outbound.resolve``)."""

from __future__ import annotations

import asyncio
import ipaddress
import shutil
import ssl
import subprocess

import httpx
import httpx2
import pytest
from django.core.checks import run_checks
from django.core.exceptions import ValidationError

from common import outbound
from common.outbound import (
    ERROR_INTERNAL,
    AsyncGuardedTransport,
    AsyncHttpx2GuardedTransport,
    GuardedTransport,
    Httpx2GuardedTransport,
    OutboundRefused,
    address_kind,
    allowance_parse,
    validate_outbound_url,
)
from tests.webhook_receiver import Receiver

STACKS = ("httpx", "httpx-async", "httpx2", "httpx2-async")


@pytest.fixture
def resolver(monkeypatch):
    """Names this test resolves itself: ``resolver[name] = [address, …]``; any other name as the system does."""
    names: dict[str, list[str]] = {}
    system = outbound.resolve

    def resolve(host: str, port: int) -> list[str]:
        return list(names[host]) if host in names else system(host, port)

    monkeypatch.setattr(outbound, "resolve", resolve)
    return names


def post(stack: str, url: str, transport: dict | None = None, **options) -> int:
    """POST ``url`` through the guarded transport of ``stack`` (``transport``: its options); the answer's status."""
    transport = transport or {}
    if stack == "httpx":
        with httpx.Client(transport=GuardedTransport(**transport), **options) as client:
            return client.post(url, content=b"{}").status_code
    if stack == "httpx2":
        with httpx2.Client(transport=Httpx2GuardedTransport(**transport), **options) as client:
            return client.post(url, content=b"{}").status_code

    async def posted() -> int:
        if stack == "httpx-async":
            async with httpx.AsyncClient(transport=AsyncGuardedTransport(**transport), **options) as client:
                return (await client.post(url, content=b"{}")).status_code
        async with httpx2.AsyncClient(transport=AsyncHttpx2GuardedTransport(**transport), **options) as client:
            return (await client.post(url, content=b"{}")).status_code

    return asyncio.run(posted())


INTERNAL = [
    "127.0.0.1",
    "127.8.9.10",
    "::1",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "fc00::1",
    "fd12:3456::1",
    "169.254.169.254",  # the cloud's metadata service
    "fe80::1",
    "0.0.0.0",  # noqa: S104 — an address refused, not bound
    "::",
    "100.64.0.1",  # shared address space (carrier-grade NAT)
    "198.18.0.1",
    "192.0.2.1",
    "2001:db8::1",
    "224.0.0.1",
    "240.0.0.1",
    "255.255.255.255",
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::ffff:169.254.169.254",
    "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
    "2002:c0a8:101::",  # 6to4 of 192.168.1.1
    "::7f00:1",  # IPv4-compatible
]
PUBLIC = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"]


@pytest.mark.parametrize("address", INTERNAL)
def test_every_internal_range_is_internal(address):
    assert address_kind(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_not(address):
    assert address_kind(ipaddress.ip_address(address)) is None


def test_the_allow_list_reads_names_ports_addresses_and_networks():
    allowed = allowance_parse(
        ["mcp-telecom:8100", "Desk.Internal.", "127.0.0.1:8200", "[::1]:8300", "10.0.0.0/8", "fd00::/8", "192.0.2.7"]
    )

    assert allowed.allows_name("mcp-telecom", 8100) and not allowed.allows_name("mcp-telecom", 8200)
    assert allowed.allows_name("desk.internal", 443) and allowed.allows_name("DESK.internal.", 80)
    assert allowed.allows_address(ipaddress.ip_address("127.0.0.1"), 8200)
    assert not allowed.allows_address(ipaddress.ip_address("127.0.0.1"), 8201)
    assert allowed.allows_address(ipaddress.ip_address("::1"), 8300)
    assert allowed.allows_address(ipaddress.ip_address("10.200.3.4"), 5432)
    assert allowed.allows_address(ipaddress.ip_address("::ffff:10.200.3.4"), 5432)  # mapped: what it carries
    assert allowed.allows_address(ipaddress.ip_address("fd00::5"), 80)
    assert allowed.allows_address(ipaddress.ip_address("192.0.2.7"), 80)
    assert not allowed.allows_address(ipaddress.ip_address("169.254.169.254"), 80)


@pytest.mark.parametrize("entry", ["", "host name", "http://mcp:8100", "mcp:port", "10.0.0.0/8:99999", "[::1", "a/b"])
def test_an_allow_list_entry_that_is_none_of_them_is_refused_naming_it(entry, settings):
    with pytest.raises(ValueError, match="OUTBOUND_ALLOWED"):
        allowance_parse([entry])
    settings.OUTBOUND_ALLOWED = ["127.0.0.1:8100", entry]
    errors = [message for message in run_checks() if message.id == "common.E001"]
    assert len(errors) == 1 and repr(entry) in errors[0].msg
    # the rest of the list still holds, and the wrong entry allows nothing
    assert outbound.allowance().allows_address(ipaddress.ip_address("127.0.0.1"), 8100)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:18511/mcp",
        "http://169.254.169.254/latest/meta-data/",
        "http://localhost:18521/",  # a name that resolves to loopback
        "http://[::1]:18510/",
        "http://[::ffff:127.0.0.1]:18510/",
        "http://2130706433/",  # 127.0.0.1 as one number
        "http://127.1/",
        "http://0.0.0.0:8000/",
        "https://10.0.0.7/hooks",
        "http://100.64.0.1/",
    ],
)
def test_an_internal_address_is_refused_when_it_is_saved(url, nothing_allowed):
    with pytest.raises(ValidationError) as refused:
        validate_outbound_url(url)
    assert refused.value.messages == [ERROR_INTERNAL]


def test_a_public_address_a_name_that_does_not_resolve_now_and_an_allowed_one_are_saved(nothing_allowed, resolver):
    resolver["hooks.example.com"] = ["93.184.216.34"]
    validate_outbound_url("https://hooks.example.com/rollouts")
    validate_outbound_url("https://8.8.8.8/")
    validate_outbound_url("http://nowhere.invalid/")  # checked again when something is sent there
    nothing_allowed.OUTBOUND_ALLOWED = ["localhost:8100", "10.0.0.0/8"]
    validate_outbound_url("http://localhost:8100/mcp")
    validate_outbound_url("http://10.1.2.3:9000/mcp")
    with pytest.raises(ValidationError):
        validate_outbound_url("http://localhost:8101/mcp")


def test_a_name_with_a_public_and_an_internal_address_is_refused(nothing_allowed, resolver):
    resolver["split.example.com"] = ["93.184.216.34", "10.0.0.9"]
    with pytest.raises(ValidationError):
        validate_outbound_url("https://split.example.com/")


@pytest.mark.parametrize("stack", STACKS)
def test_the_transport_refuses_an_internal_address_before_it_connects(stack, receiver, nothing_allowed):
    for url in (
        f"http://127.0.0.1:{receiver.port}/hook",
        f"http://localhost:{receiver.port}/hook",
        f"http://2130706433:{receiver.port}/hook",
    ):
        with pytest.raises(OutboundRefused) as refused:
            post(stack, url)
        assert isinstance(refused.value, httpx2.ConnectError if stack.startswith("httpx2") else httpx.ConnectError)
    assert receiver.requests == []


@pytest.mark.parametrize("stack", STACKS)
def test_the_transport_sends_to_the_address_it_checked_and_keeps_the_name(stack, receiver, nothing_allowed, resolver):
    """``receiver.test`` resolves nowhere on this machine: only a request sent to the address the transport checked
    reaches the receiver."""
    resolver["receiver.test"] = ["127.0.0.1"]
    nothing_allowed.OUTBOUND_ALLOWED = [f"127.0.0.1:{receiver.port}"]

    assert post(stack, f"http://receiver.test:{receiver.port}/hook?x=1") == 204

    [(method, path, headers)] = receiver.requests
    assert (method, path) == ("POST", "/hook?x=1")
    assert headers["Host"] == f"receiver.test:{receiver.port}"


@pytest.fixture
def certificate(tmp_path):
    """A self-signed certificate for ``receiver.test`` (and no address): ``(certificate file, key file)``."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.fail("openssl is needed to make the test's certificate")
    cert, key = tmp_path / "receiver.pem", tmp_path / "receiver.key"
    request = (
        "req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=receiver.test -addext subjectAltName=DNS:receiver.test"
    )
    made = [openssl, *request.split(), "-keyout", str(key), "-out", str(cert)]
    subprocess.run(made, check=True, capture_output=True, timeout=60)
    return cert, key


@pytest.mark.parametrize("stack", STACKS)
def test_tls_verifies_the_name_while_the_connection_goes_to_the_checked_address(
    stack, certificate, nothing_allowed, resolver
):
    cert, key = certificate
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    secure = Receiver(status=204, tls=served)
    trusted = {"verify": ssl.create_default_context(cafile=str(cert))}
    resolver["receiver.test"] = resolver["impostor.test"] = ["127.0.0.1"]
    nothing_allowed.OUTBOUND_ALLOWED = [f"127.0.0.1:{secure.port}"]
    try:
        assert post(stack, f"https://receiver.test:{secure.port}/hook", trusted) == 204
        # The certificate is for receiver.test: another name at the same address is not taken for it.
        connect_error = httpx2.ConnectError if stack.startswith("httpx2") else httpx.ConnectError
        with pytest.raises(connect_error, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
            post(stack, f"https://impostor.test:{secure.port}/hook", trusted)
    finally:
        secure.stop()
    [(_, _, headers)] = secure.requests
    assert headers["Host"] == f"receiver.test:{secure.port}"


@pytest.mark.parametrize("stack", STACKS)
def test_a_name_that_resolved_to_a_public_address_at_save_is_refused_when_it_resolves_to_loopback(
    stack, receiver, nothing_allowed, resolver
):
    url = f"http://rebound.test:{receiver.port}/hook"
    resolver["rebound.test"] = ["93.184.216.34"]
    validate_outbound_url(url)  # saved
    resolver["rebound.test"] = ["127.0.0.1"]  # and the name answers otherwise when the post goes

    with pytest.raises(OutboundRefused):
        post(stack, url)
    assert receiver.requests == []


@pytest.mark.parametrize("stack", STACKS)
def test_a_redirect_to_an_internal_address_is_not_followed(stack, receiver, nothing_allowed):
    inside = Receiver(status=204)
    receiver.status, receiver.location = 307, f"http://127.0.0.1:{inside.port}/admin"
    nothing_allowed.OUTBOUND_ALLOWED = [f"127.0.0.1:{receiver.port}"]  # the operator's receiver, and only it
    try:
        with pytest.raises(OutboundRefused):
            post(stack, f"http://127.0.0.1:{receiver.port}/hook", follow_redirects=True)
        assert len(receiver.requests) == 1 and inside.requests == []
    finally:
        inside.stop()


@pytest.mark.parametrize("stack", STACKS)
def test_a_name_the_operator_allows_is_sent_to_whatever_it_resolves_to(stack, receiver, nothing_allowed):
    nothing_allowed.OUTBOUND_ALLOWED = [f"localhost:{receiver.port}"]
    assert post(stack, f"http://localhost:{receiver.port}/hook") == 204
    with pytest.raises(OutboundRefused):
        post(stack, f"http://127.0.0.1:{receiver.port}/hook")  # the name is allowed, not the address
    assert len(receiver.requests) == 1


def test_a_clients_own_entries_allow_its_endpoint_and_nothing_else(receiver, nothing_allowed):
    own = outbound.origin_entry(f"http://127.0.0.1:{receiver.port}/v1")
    with outbound.outbound_client(allowed=own) as client:
        assert client.post(f"http://127.0.0.1:{receiver.port}/v1/embeddings").status_code == 204
        with pytest.raises(OutboundRefused):
            client.post(f"http://127.0.0.1:{receiver.port + 1}/")
    with outbound.outbound_client() as client, pytest.raises(OutboundRefused):
        client.post(f"http://127.0.0.1:{receiver.port}/v1/embeddings")
