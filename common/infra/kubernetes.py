"""The platform's one call to the Kubernetes API: values merged into a Secret of the pod's own namespace.

A pod reaches its cluster's API with its service account: the API's address in ``KUBERNETES_SERVICE_HOST`` and
``KUBERNETES_SERVICE_PORT`` (the kubelet sets both in every container), the account's token, the cluster's CA and the
pod's namespace in :data:`SERVICE_ACCOUNT_DIR` (mounted only where the pod asks for it:
``automountServiceAccountToken``). The standard library does it in one request, so no client library is installed for
it. What runs it: ``manage.py first_run --output-secret`` (the admin password and the API key it made, kept out of
its log).
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TIMEOUT_SECONDS = 10.0


class KubernetesError(Exception):
    """The Secret could not be written; the message says why (never a value that was to be written)."""


def kubernetes_secret_merge(*, name: str, values: Mapping[str, str], timeout: float = TIMEOUT_SECONDS) -> None:
    """Merge ``values`` into the Secret ``name`` of the pod's namespace (a JSON merge patch of its ``stringData``):
    the keys given are set, the others kept. The Secret must exist and the pod's service account may ``patch`` it —
    a Role can grant that on the one name, which a ``create`` cannot be limited to. Raises :class:`KubernetesError`
    outside a pod, without a mounted token, or when the API refuses."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST", ""), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise KubernetesError("not in a Kubernetes pod: KUBERNETES_SERVICE_HOST is not set")
    account_dir = SERVICE_ACCOUNT_DIR
    try:
        token = (account_dir / "token").read_text(encoding="utf-8").strip()
        namespace = (account_dir / "namespace").read_text(encoding="utf-8").strip()
        context = ssl.create_default_context(cafile=str(account_dir / "ca.crt"))
    except OSError as exc:
        raise KubernetesError(
            f"no service account in {account_dir} ({exc.strerror}): the pod needs automountServiceAccountToken"
        ) from exc
    address = f"[{host}]" if ":" in host else host
    request = urllib.request.Request(
        f"https://{address}:{port}/api/v1/namespaces/{quote(namespace, safe='')}/secrets/{quote(name, safe='')}",
        data=json.dumps({"stringData": dict(values)}).encode(),
        method="PATCH",
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/merge-patch+json",
            "Accept": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context):  # noqa: S310 — https, built above
            pass
    except urllib.error.HTTPError as exc:
        raise KubernetesError(
            f"the Kubernetes API answered {exc.code} to a patch of Secret {namespace}/{name}: {_status_message(exc)}"
        ) from exc
    except (urllib.error.URLError, OSError) as exc:
        raise KubernetesError(f"the Kubernetes API at {address}:{port} could not be reached: {exc}") from exc


def _status_message(error: urllib.error.HTTPError) -> str:
    """The ``message`` of the API's Status answer (what it refused, and why), or the HTTP reason."""
    try:
        return str(json.loads(error.read(4096) or b"{}").get("message") or error.reason)
    except (ValueError, AttributeError, OSError):
        return str(error.reason)
