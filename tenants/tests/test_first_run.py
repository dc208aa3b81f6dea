"""`manage.py first_run`: the admin user, demo data when asked, a tenant with an API key — and safe to repeat."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from agents.models import AgentProfile
from routing.models import RolloutFlag
from tenants.auth import api_client_for_key
from tenants.models import ApiKey

pytestmark = pytest.mark.django_db


def first_run(*args: str) -> dict[str, str]:
    out = io.StringIO()
    call_command("first_run", *args, stdout=out, stderr=io.StringIO())
    return dict(line.split(" ", 1) if " " in line else (line, "") for line in out.getvalue().splitlines())


def test_the_first_run_makes_a_superuser_a_tenant_and_a_working_key(tmp_path, monkeypatch):
    monkeypatch.delenv("ADMIN_PASSWORD", raising=False)
    password_file = tmp_path / "admin-password"
    made = first_run("--tenant", "acme", "--password-file", str(password_file))
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and admin.check_password(made["admin_password"])
    assert password_file.read_text().strip() == made["admin_password"]
    assert oct(password_file.stat().st_mode & 0o777) == "0o600"
    client = api_client_for_key(made["api_key"])
    assert client is not None and client.tenant.slug == "acme"
    assert not AgentProfile.objects.exists()  # demo data only when asked


def test_running_it_again_changes_nothing_and_tells_the_known_password(tmp_path, monkeypatch):
    monkeypatch.delenv("ADMIN_PASSWORD", raising=False)
    password_file = tmp_path / "admin-password"
    first = first_run("--password-file", str(password_file))
    again = first_run("--password-file", str(password_file))
    assert again == {"admin_user": "admin", "admin_password": first["admin_password"], "api_key": ""}
    assert ApiKey.objects.count() == 1
    assert get_user_model().objects.get(username="admin").check_password(first["admin_password"])


def test_admin_password_from_the_environment_wins_and_new_key_makes_another(monkeypatch):
    monkeypatch.setenv("ADMIN_PASSWORD", "chosen-by-the-operator")
    first_run()
    made = first_run("--new-key", "--debug")
    assert made["admin_password"] == "chosen-by-the-operator"
    assert get_user_model().objects.get(username="admin").check_password("chosen-by-the-operator")
    assert ApiKey.objects.filter(tenant__slug="tenant_a").count() == 2
    assert api_client_for_key(made["api_key"]).can_debug


def test_demo_data_is_loaded_when_asked_with_every_customer_on_the_multi_agent_graph(monkeypatch, migrated_flag):
    monkeypatch.delenv("ADMIN_PASSWORD", raising=False)
    first_run("--demo")
    assert AgentProfile.objects.filter(agent_id="telecom_contas").exists()
    flag = RolloutFlag.objects.get(key="multi_agent")
    assert flag.percentage == 100
    assert flag.changes.values_list("what", "old_value", "new_value", "actor").first() == (
        "percentage",
        "0",
        "100",
        "manage.py seed_demo (the demo: every customer on the multi-agent graph)",
    )

    call_command("set_rollout", "multi_agent", "--percentage", "30", stdout=io.StringIO())
    first_run("--demo")  # a restart of scripts/start: the operator's choice stays
    assert RolloutFlag.objects.get(key="multi_agent").percentage == 30


def test_without_the_demo_the_multi_agent_flag_stays_at_0(migrated_flag):
    first_run()
    assert RolloutFlag.objects.get(key="multi_agent").percentage == 0


def test_a_tenant_that_is_not_a_slug_is_refused():
    with pytest.raises(CommandError, match="--tenant must be a slug"):
        first_run("--tenant", "not a slug")
