"""External desks are the operator's: made and changed in the admin by operators only, their signing secret
write-only (never in a page, an export or the history), and a profile may send its escalations only to the platform's
desk or an enabled external desk — in its admin form and by YAML import alike (docs/external-desk.md)."""

from __future__ import annotations

import pytest
from auditlog.models import LogEntry
from django.core.checks import run_checks
from django.core.files.uploadedfile import SimpleUploadedFile

from agents.escalation import EscalationSettings
from agents.models import AgentProfile, ExternalDesk
from releases.configio.exporter import config_export
from releases.configio.importer import ConfigImportError, config_import
from releases.configio.source import Source
from tests.adminkit import add_url, change_url, changelist_url, delete_url, error_messages, form_data, history_url

pytestmark = pytest.mark.django_db

SECRET = "desk-secret-canary-7f3a9c2e"
URL = "https://hook:url-password-canary@desk.example.com/hooks/platform?token=url-token-canary"
CANARIES = ("desk-secret-canary", "url-password-canary", "url-token-canary")
IMPORT_URL = "/admin/routing/intent/config/import/"


@pytest.fixture
def desk(db) -> ExternalDesk:
    return ExternalDesk.objects.create(name="acme_desk", url=URL, secret=SECRET)


def shows_no_secret(text: str) -> bool:
    return not any(canary in text for canary in CANARIES)


def desk_of(profile: AgentProfile) -> str:
    profile.refresh_from_db()
    return EscalationSettings.from_json(profile.escalation).desk


# -- the operator's pages ----------------------------------------------------------------------------------------------


def test_an_operator_adds_a_desk_whose_secret_and_credentials_are_never_shown_again(staff_client):
    data = form_data(staff_client.get(add_url(ExternalDesk)))
    data.update({"name": "acme_desk", "url": URL, "secret": SECRET, "timeout": "3"})
    response = staff_client.post(add_url(ExternalDesk), data)
    assert response.status_code == 302, error_messages(response)
    stored = ExternalDesk.objects.get(name="acme_desk")
    assert (stored.url, stored.secret) == (URL, SECRET)

    for page in (changelist_url(ExternalDesk), change_url(stored), history_url(stored)):
        text = staff_client.get(page).content.decode()
        assert "desk.example.com" in text or page == history_url(stored)
        assert shows_no_secret(text), page
    assert shows_no_secret(str(list(LogEntry.objects.values_list("changes", flat=True))))
    assert "typed here (never shown)" in staff_client.get(change_url(stored)).content.decode()


def test_a_change_that_leaves_the_secret_blank_keeps_it_and_a_named_variable_replaces_it(staff_client, desk):
    data = form_data(staff_client.get(change_url(desk)))
    assert data.get("secret", "") == ""  # never rendered back
    response = staff_client.post(change_url(desk), {**data, "timeout": "9"})
    assert response.status_code == 302, error_messages(response)
    desk.refresh_from_db()
    assert (desk.secret, desk.url, desk.timeout) == (SECRET, URL, 9.0)  # the masked URL kept its credentials

    response = staff_client.post(change_url(desk), {**data, "secret_env": "ACME_DESK_SECRET"})
    assert response.status_code == 302, error_messages(response)
    desk.refresh_from_db()
    assert (desk.secret, desk.secret_env) == ("", "ACME_DESK_SECRET")


@pytest.mark.parametrize(
    ("variable", "says"),
    [("DJANGO_SECRET_KEY", "platform's own secrets"), ("HOME", "EXTERNAL_DESK_ENV_ALLOWED")],
)
def test_a_secret_variable_must_be_one_the_operator_allows_and_never_a_platform_secret(
    staff_client, desk, variable, says
):
    data = form_data(staff_client.get(change_url(desk)))
    response = staff_client.post(change_url(desk), {**data, "secret_env": variable})
    assert response.status_code == 200
    assert any(says in message for message in error_messages(response))
    desk.refresh_from_db()
    assert desk.secret_env == ""


def test_a_desk_needs_a_secret_of_some_length(staff_client):
    data = form_data(staff_client.get(add_url(ExternalDesk)))
    for secret, says in (("", "needs a signing secret"), ("short", "at least 16 characters")):
        response = staff_client.post(add_url(ExternalDesk), {**data, "name": "x", "url": URL, "secret": secret})
        assert response.status_code == 200
        assert any(says in message for message in error_messages(response)), error_messages(response)
    assert not ExternalDesk.objects.exists()


def test_a_desk_a_profile_names_cannot_be_deleted(staff_client, telecom, desk):
    telecom.escalation = {**telecom.escalation, "desk": "acme_desk"}
    telecom.save(update_fields=["escalation"])

    response = staff_client.post(delete_url(desk), {"post": "yes"})
    assert response.status_code == 200
    assert "telecom_contas sends its escalations to acme_desk" in response.content.decode()
    assert ExternalDesk.objects.filter(pk=desk.pk).exists()


# -- routing editors ---------------------------------------------------------------------------------------------------


def test_a_routing_editor_reads_the_desks_but_never_their_secret(editor_client, desk):
    listing = editor_client.get(changelist_url(ExternalDesk))
    page = editor_client.get(change_url(desk))

    assert listing.status_code == page.status_code == 200
    assert "acme_desk" in listing.content.decode()
    assert shows_no_secret(listing.content.decode()) and shows_no_secret(page.content.decode())
    assert 'name="_save"' not in page.content.decode()


def test_a_routing_editor_cannot_add_or_change_a_desk(editor_client, desk):
    assert editor_client.get(add_url(ExternalDesk)).status_code == 403
    added = editor_client.post(add_url(ExternalDesk), {"name": "evil", "url": "https://evil.example", "secret": SECRET})
    changed = editor_client.post(change_url(desk), {"name": "acme_desk", "url": "https://evil.example", "timeout": "5"})

    assert (added.status_code, changed.status_code) == (403, 403)
    desk.refresh_from_db()
    assert desk.url == URL and not ExternalDesk.objects.filter(name="evil").exists()


def test_nobody_imports_a_desk_the_configuration_files_have_none(editor_client, desk):
    text = "external_desks:\n  evil:\n    url: https://evil.example/hook\n    secret: stolen-secret-0123456789\n"
    upload = SimpleUploadedFile("desks.yaml", text.encode(), content_type="application/x-yaml")
    response = editor_client.post(IMPORT_URL, {"yaml_files": [upload], "_import": "1"})

    assert response.status_code == 200
    assert "external_desks" in response.content.decode()
    with pytest.raises(ConfigImportError):
        config_import(sources=[Source("desks.yaml", text)])  # the operator's shell neither: they use the admin
    assert list(ExternalDesk.objects.values_list("name", flat=True)) == ["acme_desk"]


def test_an_export_holds_no_desk_and_no_secret(telecom, desk):
    telecom.escalation = {**telecom.escalation, "desk": "acme_desk"}
    telecom.save(update_fields=["escalation"])

    files = config_export()

    assert "desk: acme_desk" in files["agents.yaml"]
    assert shows_no_secret("\n".join(files.values())) and "desk.example.com" not in "\n".join(files.values())


# -- a profile's desk --------------------------------------------------------------------------------------------------


def test_a_profiles_form_offers_the_platforms_desk_and_the_enabled_external_ones(staff_client, telecom, desk):
    ExternalDesk.objects.create(name="switched_off", url="https://off.example", secret=SECRET, enabled=False)

    page = staff_client.get(change_url(telecom))

    choices = dict(page.context["adminform"].form.fields["escalation_desk"].choices)
    assert choices == {"": "The platform's desk", "acme_desk": "acme_desk (external)"}


def test_a_profile_chooses_an_enabled_external_desk_and_not_another(staff_client, telecom, desk):
    data = form_data(staff_client.get(change_url(telecom)))

    refused = staff_client.post(change_url(telecom), {**data, "escalation_desk": "nowhere"})
    assert refused.status_code == 200 and desk_of(telecom) == ""
    chosen = staff_client.post(change_url(telecom), {**data, "escalation_desk": "acme_desk"})
    assert chosen.status_code == 302, error_messages(chosen)
    assert desk_of(telecom) == "acme_desk"


def test_a_profile_keeps_a_desk_switched_off_since_when_other_fields_are_saved(staff_client, telecom, desk):
    telecom.escalation = {**telecom.escalation, "desk": "acme_desk"}
    telecom.save(update_fields=["escalation"])
    ExternalDesk.objects.filter(pk=desk.pk).update(enabled=False)
    data = form_data(staff_client.get(change_url(telecom)))

    response = staff_client.post(change_url(telecom), {**data, "name": "Telecom renamed"})

    assert response.status_code == 302, error_messages(response)
    assert desk_of(telecom) == "acme_desk"


def profile_file(desk_name: str) -> Source:
    return Source("agents.yaml", f"agents:\n  - agent_id: telecom_contas\n    escalation:\n      desk: {desk_name}\n")


def test_an_import_refuses_a_desk_that_is_not_set_up_naming_the_key(telecom, desk):
    with pytest.raises(ConfigImportError) as refused:
        config_import(sources=[profile_file("nowhere")])

    [problem] = refused.value.messages
    assert "agents[0].escalation.desk" in problem and "'nowhere' is not an external desk" in problem
    assert desk_of(telecom) == ""


def test_an_import_sends_a_profile_to_an_enabled_desk(telecom, desk):
    config_import(sources=[profile_file("acme_desk")])

    assert desk_of(telecom) == "acme_desk"


def test_a_system_check_names_a_desk_whose_secret_variable_is_not_set_never_a_value(desk, monkeypatch):
    ExternalDesk.objects.create(name="env_desk", url="https://env.example", secret_env="ENV_DESK_SECRET")
    monkeypatch.delenv("ENV_DESK_SECRET", raising=False)
    [warning] = [check for check in run_checks(databases=["default"]) if check.id == "agents.W004"]
    assert warning.obj.name == "env_desk" and "ENV_DESK_SECRET is not set" in warning.msg

    monkeypatch.setenv("ENV_DESK_SECRET", "value-of-the-desk-secret-1")
    assert not [check for check in run_checks(databases=["default"]) if check.id == "agents.W004"]
