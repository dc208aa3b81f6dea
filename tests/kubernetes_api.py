"""A stand-in for the Kubernetes API's Secrets, for the tests of what a pod writes there (common/infra/kubernetes.py).

No cluster runs here, so this is the one seam: what a pod is given — the API's address (``KUBERNETES_SERVICE_HOST``
and ``_PORT``) and its service account's directory (token, CA, namespace) — points at a TLS server on 127.0.0.1 with a
CA of its own. The server answers ``PATCH /api/v1/namespaces/<namespace>/secrets/<name>`` as the API answers a JSON
merge patch of ``stringData``: the keys given are set, the others kept. It knows one bearer token, and answers 403
(as RBAC does) for a Secret it was not told to grant, 404 for one granted but missing. Every request is recorded.

    with kubernetes_api(tmp_path, monkeypatch, granted={"first-run"}) as api:
        ...; api.secrets["first-run"], api.requests
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import json
import re
import ssl
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from common.infra import kubernetes
from tests.served import serve_in_thread

NAMESPACE = "agent-platform"
TOKEN = "service-account-token-of-the-test"
SECRET_PATH = re.compile(r"/api/v1/namespaces/(?P<namespace>[^/]+)/secrets/(?P<name>[^/]+)")


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class KubernetesApi:
    granted: set[str]
    secrets: dict[str, dict[str, str]] = field(default_factory=dict)  # the Secrets that exist: name → values
    requests: list[Recorded] = field(default_factory=list)


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed CA certificate for 127.0.0.1 and its key, as PEM files in ``folder``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(key, hashes.SHA256())
    )
    certificate_path, key_path = folder / "server.crt", folder / "server.key"
    certificate_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return certificate_path, key_path


@contextlib.contextmanager
def kubernetes_api(tmp_path: Path, monkeypatch: Any, *, granted: set[str]) -> Iterator[KubernetesApi]:
    """The API's stand-in, running, with the pod's environment pointed at it (module docstring); ``granted`` Secrets
    exist (empty) and may be patched."""
    api = KubernetesApi(granted=set(granted), secrets={name: {} for name in granted})
    folder = tmp_path / "kubernetes"
    account = folder / "serviceaccount"
    account.mkdir(parents=True)
    certificate, key = _certificate(folder)
    (account / "ca.crt").write_bytes(certificate.read_bytes())
    (account / "token").write_text(TOKEN + "\n")
    (account / "namespace").write_text(NAMESPACE)

    class Handler(BaseHTTPRequestHandler):
        def do_PATCH(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            api.requests.append(Recorded("PATCH", self.path, dict(self.headers.items()), body))
            found = SECRET_PATH.fullmatch(self.path)
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self._answer(401, "Unauthorized")
            if found is None or found["namespace"] != NAMESPACE or found["name"] not in api.granted:
                return self._answer(403, f'secrets "{found and found["name"]}" is forbidden: no rule allows patch')
            if found["name"] not in api.secrets:
                return self._answer(404, f'secrets "{found["name"]}" not found')
            if self.headers.get("Content-Type") != "application/merge-patch+json":
                return self._answer(415, "the patch is not a JSON merge patch")
            api.secrets[found["name"]].update(json.loads(body)["stringData"])
            return self._answer(200, "", kind="Secret")

        def _answer(self, status: int, message: str, kind: str = "Status") -> None:
            answer = json.dumps({"kind": kind, "apiVersion": "v1", "message": message, "code": status}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *_args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = serve_in_thread(server, name="kubernetes-api")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.server_address[1]))
    monkeypatch.setattr(kubernetes, "SERVICE_ACCOUNT_DIR", account)
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
