"""`first_run --output-secret` (Kubernetes' first-run Job): the admin password and the API key go to a Secret, never
to the Job's log; a run that cannot write the Secret makes nothing. The API is tests/kubernetes_api.py's stand-in."""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from tenants.auth import api_client_for_key
from tenants.models import ApiKey
from tests.kubernetes_api import NAMESPACE, TOKEN, kubernetes_api

pytestmark = pytest.mark.django_db

SECRET = "first-run"


def first_run(*args: str) -> tuple[str, str]:
    """What the command printed: its stdout and its stderr (a Job's log has both)."""
    out, err = io.StringIO(), io.StringIO()
    call_command("first_run", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_the_password_and_the_key_go_to_the_secret_and_not_to_the_log(tmp_path, monkeypatch):
    monkeypatch.delenv("ADMIN_PASSWORD", raising=False)
    with kubernetes_api(tmp_path, monkeypatch, granted={SECRET}) as api:
        out, err = first_run("--tenant", "acme", "--output-secret", SECRET)

    stored = api.secrets[SECRET]
    assert get_user_model().objects.get(username="admin").check_password(stored["admin_password"])
    client = api_client_for_key(stored["api_key"])
    assert client is not None and client.tenant.slug == "acme"
    log = out + err
    assert stored["admin_password"] not in log and stored["api_key"] not in log
    assert out == "admin_user admin\n" and f"kubectl get secret {SECRET}" in err
    [request] = api.requests
    assert request.path == f"/api/v1/namespaces/{NAMESPACE}/secrets/{SECRET}"
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert request.headers["Content-Type"] == "application/merge-patch+json"
    assert json.loads(request.body) == {"stringData": stored}


def test_a_second_run_keeps_what_the_first_stored_and_writes_only_what_is_new(tmp_path, monkeypatch):
    monkeypatch.delenv("ADMIN_PASSWORD", raising=False)
    with kubernetes_api(tmp_path, monkeypatch, granted={SECRET}) as api:
        first_run("--output-secret", SECRET)
        kept = dict(api.secrets[SECRET])
        first_run("--output-secret", SECRET)
        first_run("--output-secret", SECRET, "--new-key")

    assert json.loads(api.requests[1].body) == {"stringData": {"admin_user": "admin"}}  # nothing new: nothing blanked
    assert api.secrets[SECRET]["admin_password"] == kept["admin_password"]
    assert api.secrets[SECRET]["api_key"] != kept["api_key"]
    assert api_client_for_key(api.secrets[SECRET]["api_key"]) is not None
    assert ApiKey.objects.count() == 2


@pytest.mark.parametrize("granted", [set(), {"another-secret"}])
def test_a_secret_the_pod_may_not_write_leaves_nothing_made_and_nothing_printed(tmp_path, monkeypatch, granted):
    monkeypatch.delenv("ADMIN_PASSWORD", raising=False)
    out, err = io.StringIO(), io.StringIO()
    with (
        kubernetes_api(tmp_path, monkeypatch, granted=granted) as api,
        pytest.raises(CommandError, match=r"answered 403 .*forbidden.*nothing was made"),
    ):
        call_command("first_run", "--output-secret", SECRET, stdout=out, stderr=err)

    [request] = api.requests
    tried = json.loads(request.body)["stringData"]
    assert set(tried) == {"admin_user", "admin_password", "api_key"}
    assert not get_user_model().objects.exists() and not ApiKey.objects.exists()
    assert tried["admin_password"] not in out.getvalue() + err.getvalue()
    assert tried["api_key"] not in out.getvalue() + err.getvalue()


def test_outside_a_pod_the_secret_is_refused_and_nothing_is_made(monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("ADMIN_PASSWORD", "chosen-by-the-operator")

    with pytest.raises(CommandError, match="not in a Kubernetes pod"):
        first_run("--output-secret", SECRET)

    assert not get_user_model().objects.exists() and not ApiKey.objects.exists()
