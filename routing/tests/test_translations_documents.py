"""A specialist's and an intent's texts in other languages, carried by the profile's document (and read from versions
published before them), the compiled spec, the diff and YAML import/export. The rule and lookups themselves:
``common/tests/test_translations.py``."""

from __future__ import annotations

import copy

import pytest
import yaml

from agents.models import Specialist
from common.translations import ERROR_TRANSLATION_FIELD, ERROR_TRANSLATION_LANGUAGE
from releases.configio import ConfigImportError, Source, config_export_data, config_import
from releases.versions import document_diff, version_publish
from routing.documents import profile_compile, profile_documents
from routing.models import Intent
from routing.selectors import live_version

pytestmark = pytest.mark.django_db

PRODUCT = {"en": {"display_name": "Plans and services"}, "es": {"display_name": "Planes y servicios"}}
SUBJECT = {"en": {"description": "questions about plans"}}


@pytest.fixture
def product(telecom) -> Specialist:
    specialist = Specialist.objects.get(profile=telecom, name="product_agent")
    specialist.display_name = "Planos e serviços"
    specialist.translations = PRODUCT
    specialist.save(update_fields=["display_name", "translations"])
    return specialist


@pytest.fixture
def plans(telecom) -> Intent:
    intent = Intent.objects.get(profile=telecom, name="product_information")
    intent.description = "dúvidas sobre planos"
    intent.translations = SUBJECT
    intent.save(update_fields=["description", "translations"])
    return intent


# -- the document, the compiled spec, versions and the diff ----------------------------------------------------------


def test_the_document_holds_each_rows_translations_and_the_compile_says_them_by_language(telecom, product, plans):
    document = profile_documents()["telecom_contas"]

    assert document["specialists"]["product_agent"]["translations"] == PRODUCT
    assert document["specialists"]["billing_agent"]["translations"] == {}
    assert document["intents"]["product_information"]["translations"] == SUBJECT
    spec = profile_compile(document, pk=telecom.pk)
    specialist, intent = spec.specialists["product_agent"], spec.router.intents_by_name["product_information"]
    assert spec.language == "pt"
    assert [spec.display_name_in(specialist, language) for language in ("pt", "en", "es", "")] == [
        "Planos e serviços",
        "Plans and services",
        "Planes y servicios",
        "Planos e serviços",
    ]
    assert [spec.subject_line_in(intent, language) for language in ("pt", "en", "es")] == [
        "dúvidas sobre planos",
        "questions about plans",
        "",
    ]


def test_the_profiles_language_is_what_a_text_without_a_translation_is_said_in(telecom, product):
    telecom.language = "en"
    telecom.save(update_fields=["language"])
    product.display_name, product.translations = "Plans", {"pt": {"display_name": "Planos"}}
    product.save(update_fields=["display_name", "translations"])

    spec = profile_compile(profile_documents()["telecom_contas"], pk=telecom.pk)

    specialist = spec.specialists["product_agent"]
    assert [spec.display_name_in(specialist, language) for language in ("pt", "en", "es")] == [
        "Planos",
        "Plans",
        "Plans",
    ]


def test_a_version_published_before_translations_compiles_with_none_and_differs_in_nothing(telecom):
    draft = profile_documents()["telecom_contas"]
    old = copy.deepcopy(draft)
    for row in (*old["specialists"].values(), *old["intents"].values()):
        del row["translations"]
    version_publish(profile=telecom, document=old, note="before translations")

    live = live_version(telecom)
    assert live is not None and "translations" not in live.document["specialists"]["product_agent"]
    assert document_diff(live.document, draft) == []
    spec = profile_compile(live.document, pk=telecom.pk)
    assert all(specialist.translations == {} for specialist in spec.specialists.values())
    assert all(intent.translations == {} for intent in spec.intents)


def test_the_diff_says_which_text_changed_in_which_language(telecom, product, plans):
    before = profile_documents()["telecom_contas"]
    product.translations = {"en": {"display_name": "Plans"}, "es": {"description": "Planes y ofertas"}}
    product.save(update_fields=["translations"])
    plans.translations = {}
    plans.save(update_fields=["translations"])

    assert sorted(change.text for change in document_diff(before, profile_documents()["telecom_contas"])) == [
        "intent product_information: description in en 'questions about plans' → (none)",
        "specialist product_agent: description in es (none) → 'Planes y ofertas'",
        "specialist product_agent: display name in en 'Plans and services' → 'Plans'",
        "specialist product_agent: display name in es 'Planes y servicios' → (none)",
    ]


# -- YAML ------------------------------------------------------------------------------------------------------------


def import_problems(*sources: Source) -> list[str]:
    with pytest.raises(ConfigImportError) as refused:
        config_import(sources=list(sources))
    return refused.value.messages


def test_the_export_writes_the_translations_of_rows_that_have_some_and_imports_back_unchanged(telecom, product, plans):
    files = config_export_data()

    (profile,) = [agent for agent in files["agents.yaml"]["agents"] if agent["agent_id"] == "telecom_contas"]
    specialists = {specialist["name"]: specialist for specialist in profile["specialists"]}
    assert specialists["product_agent"]["translations"] == PRODUCT
    assert "translations" not in specialists["billing_agent"]
    intents = {intent["name"]: intent for intent in files["routing.telecom_contas.yaml"]["intents"]}
    assert intents["product_information"]["translations"] == SUBJECT
    assert "translations" not in intents["billing_invoice_explanation"]
    before = profile_documents()
    sources = [
        Source(name, yaml.safe_dump(files[name], allow_unicode=True))
        for name in ("agents.yaml", "routing.telecom_contas.yaml")
    ]
    report = config_import(sources=sources)
    assert not report.changed
    assert profile_documents() == before


def test_an_import_sets_replaces_keeps_and_clears_translations(telecom, plans):
    def routing_file(line: str) -> Source:
        text = (
            f"agent_id: telecom_contas\nintents:\n  - name: product_information\n    agent: product_agent\n    {line}\n"
        )
        return Source("routing.yaml", text)

    config_import(sources=[routing_file("translations: {es: {description: ' dudas sobre planes '}}")])
    plans.refresh_from_db()
    assert plans.translations == {"es": {"description": "dudas sobre planes"}}  # the file's replace the stored

    config_import(sources=[routing_file("priority: 30")])  # the key left out: kept
    plans.refresh_from_db()
    assert plans.translations == {"es": {"description": "dudas sobre planes"}}

    config_import(sources=[routing_file("translations: null")])
    plans.refresh_from_db()
    assert plans.translations == {}


def test_an_import_refuses_an_unknown_language_or_field_on_its_own_line_and_writes_nothing(telecom, product):
    text = (
        "agents:\n  - agent_id: telecom_contas\n    specialists:\n      - name: product_agent\n"
        "        translations:\n          en: {display_name: Plans}\n          fr: {display_name: Forfaits}\n"
        "          es: {name: planes}\n"
    )

    problems = import_problems(Source("agents.yaml", text))

    assert problems == [
        "agents.yaml:7: agents[0].specialists[0].translations.fr: "
        + ERROR_TRANSLATION_LANGUAGE.format(language="fr", known="pt, es, en"),
        "agents.yaml:8: agents[0].specialists[0].translations.es: "
        + ERROR_TRANSLATION_FIELD.format(language="es", field="name", fields="display_name, description"),
    ]
    product.refresh_from_db()
    assert product.translations == PRODUCT
