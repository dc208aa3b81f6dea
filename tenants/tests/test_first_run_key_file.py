"""`first_run --key-file`: scripts/start reuses the key it made instead of minting a new valid one on every start."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from tenants.auth import api_client_for_key
from tenants.models import ApiKey

pytestmark = pytest.mark.django_db


def first_run(*args: str) -> dict[str, str]:
    out = io.StringIO()
    call_command("first_run", *args, stdout=out, stderr=io.StringIO())
    return dict(line.split(" ", 1) if " " in line else (line, "") for line in out.getvalue().splitlines())


def test_a_stored_key_is_printed_again_and_no_other_is_made(tmp_path, monkeypatch):
    monkeypatch.setenv("ADMIN_PASSWORD", "chosen")
    key_file = tmp_path / "api-key"
    first = first_run("--key-file", str(key_file), "--debug", "--preview")
    again = first_run("--key-file", str(key_file), "--debug", "--preview")
    assert first["api_key"] and again["api_key"] == first["api_key"]
    assert key_file.read_text().strip() == first["api_key"]
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    assert ApiKey.objects.count() == 1
    client = api_client_for_key(first["api_key"])
    assert client.tenant.slug == "tenant_a" and client.can_debug


def test_a_revoked_key_is_replaced_by_a_new_one_kept_in_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("ADMIN_PASSWORD", "chosen")
    key_file = tmp_path / "api-key"
    first = first_run("--key-file", str(key_file))
    ApiKey.objects.update(is_active=False)  # revoked in the admin

    again = first_run("--key-file", str(key_file))

    assert again["api_key"] and again["api_key"] != first["api_key"]
    assert key_file.read_text().strip() == again["api_key"]
    assert api_client_for_key(again["api_key"]) is not None
    assert ApiKey.objects.filter(is_active=True).count() == 1


def test_a_key_of_another_tenant_or_without_a_right_asked_for_is_not_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("ADMIN_PASSWORD", "chosen")
    key_file = tmp_path / "api-key"
    plain = first_run("--key-file", str(key_file))["api_key"]
    debug = first_run("--key-file", str(key_file), "--debug")["api_key"]
    other = first_run("--key-file", str(key_file), "--debug", "--tenant", "acme")["api_key"]
    assert len({plain, debug, other}) == 3
    assert api_client_for_key(other).tenant.slug == "acme"


def test_new_key_and_key_file_together_and_sync_without_demo_are_refused(tmp_path):
    with pytest.raises(CommandError, match="--new-key and --key-file"):
        first_run("--new-key", "--key-file", str(tmp_path / "api-key"))
    with pytest.raises(CommandError, match="--sync"):
        first_run("--sync")
