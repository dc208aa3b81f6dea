"""A profile's own name and description per language: stored, versioned, exported and imported, edited in the admin."""

from __future__ import annotations

import copy

import pytest
import yaml

from agents.models import AgentProfile
from common.translation_forms import ERROR_TRANSLATION_OWN
from releases.configio import ConfigImportError, Source, config_export_data, config_import
from releases.versions import document_diff, version_publish
from routing.documents import profile_compile, profile_documents
from routing.selectors import live_version
from tests.adminkit import change_url, error_messages, form_data, shown_fields, visible_text

pytestmark = pytest.mark.django_db

NAMED = {"en": {"name": "Accounts agent", "description": "Bills and plans."}, "es": {"name": "Agente de cuentas"}}


@pytest.fixture
def named(telecom) -> AgentProfile:
    telecom.name, telecom.description, telecom.translations = "Agente de contas", "Contas e planos.", NAMED
    telecom.save(update_fields=["name", "description", "translations"])
    return telecom


def test_the_document_holds_the_profiles_translations_and_the_compile_says_its_name_by_language(named):
    document = profile_documents()["telecom_contas"]
    spec = profile_compile(document, pk=named.pk)

    assert document["profile"]["translations"] == NAMED
    assert (spec.name_in("en"), spec.name_in("es"), spec.name_in("pt"), spec.name_in(None)) == (
        "Accounts agent",
        "Agente de cuentas",
        "Agente de contas",
        "Agente de contas",
    )
    assert (spec.own_description_in("en"), spec.own_description_in("es")) == ("Bills and plans.", "Contas e planos.")


def test_a_version_published_before_profile_translations_compiles_with_none_and_differs_in_nothing(telecom):
    draft = profile_documents()["telecom_contas"]
    old = copy.deepcopy(draft)
    del old["profile"]["translations"]  # as documents were before the setting
    version_publish(profile=telecom, document=old, note="before profile translations")

    live = live_version(telecom)
    assert live is not None and "translations" not in live.document["profile"]
    assert document_diff(live.document, draft) == []
    assert profile_compile(live.document, pk=telecom.pk).translations == {}


def test_the_export_writes_the_profiles_translations_and_imports_back_unchanged(named, telecom):
    files = config_export_data()

    (profile,) = [agent for agent in files["agents.yaml"]["agents"] if agent["agent_id"] == "telecom_contas"]
    assert profile["translations"] == {
        "en": {"description": "Bills and plans.", "name": "Accounts agent"},
        "es": {"name": "Agente de cuentas"},
    }
    before = profile_documents()
    report = config_import(sources=[Source("agents.yaml", yaml.safe_dump(files["agents.yaml"], allow_unicode=True))])
    assert not report.changed
    assert profile_documents() == before


def test_an_import_refuses_a_profile_translation_of_an_unknown_field_naming_it(telecom):
    text = "agents:\n  - agent_id: telecom_contas\n    name: Agente\n    translations: {en: {policy: Be nice}}\n"

    with pytest.raises(ConfigImportError) as refused:
        config_import(sources=[Source("agents.yaml", text)])

    assert any("'policy' has no translation" in message for message in refused.value.messages)
    telecom.refresh_from_db()
    assert telecom.translations == {}


@pytest.mark.sqlite_too
def test_the_profile_page_edits_its_name_per_language_and_warns_of_what_is_missing(staff_client, named):
    page = staff_client.get(change_url(named))

    assert {"name_en", "name_es", "description_en", "description_es"} <= shown_fields(page)
    assert "profile description lacks es" in visible_text(page.content.decode())
    data = form_data(page)
    assert data["name_en"] == "Accounts agent"
    data.update(description_es=" Facturas y planes. ", name_en="")
    response = staff_client.post(change_url(named), data)

    assert response.status_code == 302, error_messages(response)
    named.refresh_from_db()
    assert named.translations == {
        "en": {"description": "Bills and plans."},
        "es": {"description": "Facturas y planes.", "name": "Agente de cuentas"},
    }
    assert "profile name lacks en" in visible_text(staff_client.get(change_url(named)).content.decode())


@pytest.mark.sqlite_too
def test_a_name_box_in_the_profiles_own_language_is_refused(staff_client, named):
    data = form_data(staff_client.get(change_url(named)))
    data["name_pt"] = "Outro nome"

    response = staff_client.post(change_url(named), data)

    assert response.status_code == 200
    assert ERROR_TRANSLATION_OWN.format(language="pt", label="Name") in error_messages(response)
