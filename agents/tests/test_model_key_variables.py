"""A profile's model key variable is one the operator allows (``LLM_API_KEY_ENV_ALLOWED``, by default names ending in
``_API_KEY``), never one of the platform's own secrets: refused on every write (the model, the admin's form), never
read nor sent at serve time — a version published before the rule included — and named by a system check. A profile's
model endpoint, model and key variable need the operator's permission in the admin too, and its endpoint's
credentials are never shown."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError

from agents.checks import model_key_variables_check
from agents.llm import ERROR_ANSWER
from agents.models import AgentProfile
from agents.schemas import model_key_variable_refusal, validate_model_key_variable
from common.i18n import say as say_in
from releases.versions import version_release
from routing.checks import served_model_key_variables_check
from routing.documents import profile_documents
from routing.models import RoutingVersion
from tests.adminkit import change_url, error_messages, form_data

pytestmark = pytest.mark.django_db

CANARY = "platform-secret-canary-91c3"
CREDENTIALED = "https://llmuser:llm-pw-6d0f@llm.example/v1"


def say(api, text: str = "Oi") -> dict:
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "retail_loja", "payload": {"text": text, "session_id": "s-key"}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


# -- the rule ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["BILLING_API_KEY", "RETAIL_LLM_API_KEY"])
def test_names_ending_in_api_key_are_allowed_by_default(name):
    assert model_key_variable_refusal(name) is None
    validate_model_key_variable(name)


@pytest.mark.parametrize(
    "name", ["DJANGO_SECRET_KEY", "DATABASE_URL", "REDIS_URL", "METRICS_TOKEN", "EVENTS_WEBHOOK_SECRET", "PATH"]
)
def test_other_names_are_refused_with_a_reason_naming_them(name):
    with pytest.raises(ValidationError, match=name):
        validate_model_key_variable(name)


def test_the_operator_chooses_the_allowed_names_but_never_the_platforms_secrets(settings):
    settings.LLM_API_KEY_ENV_ALLOWED = ["ACME_*", "DJANGO_SECRET_KEY", "*"]

    assert model_key_variable_refusal("ACME_LLM_TOKEN") is None
    for name in ("DJANGO_SECRET_KEY", "OTEL_EXPORTER_OTLP_HEADERS", "OPENAI_API_KEY", "ROUTER_LLM_API_KEY"):
        assert model_key_variable_refusal(name) is not None, name


def test_every_secret_the_platforms_settings_read_is_refused_whatever_the_allow_list_says(settings):
    settings.LLM_API_KEY_ENV_ALLOWED = ["*"]
    source = (Path(django_settings.BASE_DIR) / "platform" / "settings.py").read_text(encoding="utf-8")
    read = set(re.findall(r"env\.\w+\(\s*\"([A-Z][A-Z0-9_]*)\"", source))
    secrets = {name for name in read if re.search(r"SECRET|TOKEN|PASSWORD|(?<!_PER)_KEY$|_URL$", name)}

    assert {"DJANGO_SECRET_KEY", "DATABASE_URL", "METRICS_TOKEN", "OPENAI_API_KEY"} <= secrets  # the scan still works
    assert [name for name in sorted(secrets) if model_key_variable_refusal(name) is None] == []


# -- every write path ------------------------------------------------------------------------------------------


def test_the_model_refuses_a_key_variable_outside_the_allow_list(retail):
    retail.llm_api_key_env = "DJANGO_SECRET_KEY"

    with pytest.raises(ValidationError) as refused:
        retail.full_clean()

    assert "DJANGO_SECRET_KEY" in str(refused.value.message_dict["llm_api_key_env"])


def test_the_admin_form_refuses_it_and_takes_an_allowed_one(admin_client, retail, settings):
    data = form_data(admin_client.get(change_url(retail)))

    refused = admin_client.post(change_url(retail), {**data, "llm_api_key_env": "DJANGO_SECRET_KEY"})
    assert refused.status_code == 200 and any("DJANGO_SECRET_KEY" in e for e in error_messages(refused))
    settings.LLM_API_KEY_ENV_ALLOWED = ["ACME_*"]
    saved = admin_client.post(change_url(retail), {**data, "llm_api_key_env": "ACME_LLM_TOKEN"})

    assert saved.status_code == 302, error_messages(saved)
    retail.refresh_from_db()
    assert retail.llm_api_key_env == "ACME_LLM_TOKEN"


# -- serve time --------------------------------------------------------------------------------------------------


def test_a_version_published_before_the_rule_never_reads_or_sends_a_platform_secret(
    api, retail, own_server, monkeypatch, settings, caplog
):
    settings.OPENAI_BASE_URL = ""
    monkeypatch.setenv("DJANGO_SECRET_KEY", CANARY)
    document = profile_documents(["retail_loja"])["retail_loja"]
    document["profile"].update(llm_base_url=own_server.base_url, llm_model="evil", llm_api_key_env="DJANGO_SECRET_KEY")
    version_release(profile=retail, version=RoutingVersion.objects.create(profile=retail, number=1, document=document))

    with caplog.at_level(logging.WARNING, logger="agents.llm"):
        body = say(api)

    assert body["answer"] == say_in(body["metadata"]["language"], ERROR_ANSWER)
    assert own_server.requests == [] and own_server.authorizations == []
    lines = [record.getMessage() for record in caplog.records if record.name == "agents.llm"]
    assert any("DJANGO_SECRET_KEY" in line and "LLM_API_KEY_ENV_ALLOWED" in line for line in lines), lines
    assert not any(CANARY in line for line in lines)


def test_a_profile_row_stored_before_the_rule_is_refused_at_serve_time_too(
    api, retail, own_server, monkeypatch, settings
):
    settings.OPENAI_BASE_URL = ""
    monkeypatch.setenv("DATABASE_URL", f"postgres://app:{CANARY}@db/app")
    AgentProfile.objects.filter(pk=retail.pk).update(
        llm_base_url=own_server.base_url, llm_model="evil", llm_api_key_env="DATABASE_URL"
    )

    body = say(api)
    assert body["answer"] == say_in(body["metadata"]["language"], ERROR_ANSWER)
    assert own_server.requests == []


def test_the_system_checks_name_profiles_and_served_versions_with_a_key_variable_not_allowed(retail, monkeypatch):
    monkeypatch.setenv("METRICS_TOKEN", CANARY)
    document = profile_documents(["retail_loja"])["retail_loja"]
    document["profile"]["llm_api_key_env"] = "METRICS_TOKEN"
    version_release(profile=retail, version=RoutingVersion.objects.create(profile=retail, number=1, document=document))
    AgentProfile.objects.filter(pk=retail.pk).update(llm_api_key_env="DJANGO_SECRET_KEY")

    (row,) = model_key_variables_check(None, databases=["default"])
    (served,) = served_model_key_variables_check(None, databases=["default"])

    assert (row.id, row.obj) == ("agents.W003", retail) and "DJANGO_SECRET_KEY" in row.msg
    assert (served.id, served.obj) == ("routing.W002", retail)
    assert "Version 1 of profile retail_loja" in served.msg and "METRICS_TOKEN" in served.msg
    assert "LLM_API_KEY_ENV_ALLOWED" in row.hint + served.hint
    assert CANARY not in row.msg + row.hint + served.msg + served.hint


# -- the profile's page ------------------------------------------------------------------------------------------


def test_a_user_who_may_change_profiles_but_not_their_model_sees_it_read_only(client, editor, retail):
    editor.user_permissions.add(Permission.objects.get(codename="change_agentprofile"))
    client.force_login(editor)
    AgentProfile.objects.filter(pk=retail.pk).update(llm_base_url=CREDENTIALED, llm_model="billing")

    page = client.get(change_url(retail))
    data = form_data(page)
    saved = client.post(
        change_url(retail),
        {**data, "description": "Loja online", "llm_base_url": "http://127.0.0.1:18240/v1", "llm_model": "evil"},
    )

    assert not {"llm_base_url", "llm_model", "llm_api_key_env"} & set(page.context["adminform"].form.fields)
    assert "llm-pw-6d0f" not in page.content.decode() and "https://***@llm.example/v1" in page.content.decode()
    assert saved.status_code == 302, error_messages(saved)
    retail.refresh_from_db()
    assert (retail.description, retail.llm_base_url, retail.llm_model) == ("Loja online", CREDENTIALED, "billing")


def test_an_editor_viewing_a_profile_never_sees_its_endpoints_credentials(editor_client, retail):
    AgentProfile.objects.filter(pk=retail.pk).update(llm_base_url=CREDENTIALED)

    page = editor_client.get(change_url(retail)).content.decode()

    assert "llm-pw-6d0f" not in page and "https://***@llm.example/v1" in page


def test_an_operator_sees_the_endpoint_masked_and_keeps_it_unless_replaced(admin_client, retail):
    AgentProfile.objects.filter(pk=retail.pk).update(llm_base_url=CREDENTIALED)

    page = admin_client.get(change_url(retail))
    kept = admin_client.post(change_url(retail), form_data(page))
    retail.refresh_from_db()
    stored = retail.llm_base_url
    replaced = admin_client.post(change_url(retail), {**form_data(page), "llm_base_url": "https://llm.example/v2"})

    assert "llm-pw-6d0f" not in page.content.decode()
    assert kept.status_code == 302 and stored == CREDENTIALED
    assert replaced.status_code == 302
    retail.refresh_from_db()
    assert retail.llm_base_url == "https://llm.example/v2"
