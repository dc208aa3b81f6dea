"""The HTTP clients made in a test's process with the default verification share one TLS context
(``tls_context_shared_by_the_http_clients`` in tests/fixtures.py); a client given its own keeps it."""

from __future__ import annotations

import ssl

import httpx
import httpx2


def context_of(client: httpx.Client | httpx.AsyncClient | httpx2.Client) -> ssl.SSLContext:
    return client._transport._pool._ssl_context  # type: ignore[union-attr]


def test_clients_made_with_the_default_verification_share_one_context_and_one_given_its_own_keeps_it():
    own = ssl.create_default_context()
    with httpx.Client() as first, httpx.Client(verify=own) as given:
        second = httpx.AsyncClient()
        assert context_of(first) is context_of(second)
        assert context_of(given) is own
        assert context_of(first).verify_mode == ssl.CERT_REQUIRED and context_of(first).check_hostname
    with httpx2.Client() as first, httpx2.Client() as second:
        assert context_of(first) is context_of(second)


def test_a_client_made_under_another_certificate_file_gets_a_context_of_its_own(monkeypatch, tmp_path):
    shared = context_of(httpx.Client())
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(ssl.DER_cert_to_PEM_cert(shared.get_ca_certs(binary_form=True)[0]).encode())
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))

    assert len(context_of(httpx.Client()).get_ca_certs()) == 1
    assert context_of(httpx.Client()) is not shared
