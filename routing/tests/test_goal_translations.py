"""A goal's description per language: what goal mode's confirmation names it by, in the conversation's language (its
translation, else the text in the profile's language); carried by the manifest and its sync, the profile's document,
the compiled catalogue, the diff and YAML import/export. The admin's boxes: ``test_goal_translations_admin.py``."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import replace

import pytest
import yaml

from agents.models import RoutingMode
from agents.services import mcp_server_sync
from common.translations import ERROR_TRANSLATION_FIELD
from mcp_servers.finance.server import MANIFEST
from releases.configio import ConfigImportError, Source, config_export_data, config_import, goals_file_name
from releases.versions import document_diff, version_publish
from routing.documents import profile_compile, profile_documents
from routing.goals.decide import CLARIFICATION, LOW_CONFIDENCE, goal_decide
from routing.goals.manifest import ManifestError, manifest_read
from routing.goals.planner import GoalCatalogue
from routing.models import Goal
from routing.selectors import live_version
from routing.tests.test_goal_intent import catalogue_of, profile_serving
from tests.factories import AgentProfileFactory, SpecialistFactory

QUOTE = {"en": {"description": "The price of stocks."}, "es": {"description": "El precio de una o más acciones."}}


def confirmation(language: str, *, translations=QUOTE, description: str | None = None, own: str = "pt") -> str:
    """Goal mode's "is this what you want?" for a quote, asked in ``language`` by a profile written in ``own``."""
    catalogue = catalogue_of(MANIFEST)
    key = ("finance", "GET_QUOTE")
    goal = replace(catalogue.goals[key], translations=translations, confidence_threshold=0.99)
    if description is not None:
        goal = replace(goal, description=description)
    profile = replace(
        profile_serving(GoalCatalogue(goals={**catalogue.goals, key: goal}, capabilities=catalogue.capabilities)),
        language=own,
    )
    decision = asyncio.run(goal_decide(profile=profile, text="cotação da PETR4", goal_state=None, language=language))
    assert decision.status == CLARIFICATION and decision.clarification["reason"] == LOW_CONFIDENCE
    return decision.clarification["question"]


def test_the_confirmation_names_the_goal_by_its_translation_in_the_conversations_language():
    assert confirmation("es") == "¿Quiere el precio de una o más acciones (PETR4)? Responda sí para continuar."
    assert confirmation("en") == "Do you want the price of stocks (PETR4)? Reply yes to go on."
    # The profile's own language is the description itself (its English gloss left out).
    assert confirmation("pt") == "Você quer o preço de uma ou mais ações (PETR4)? Responda sim para continuar."


def test_without_a_translation_the_confirmation_names_the_goal_as_the_profile_wrote_it():
    # No translation: Spanish reads the profile's language's label; English keeps the manifest's gloss.
    assert confirmation("es", translations={}).startswith("¿Quiere o preço de uma ou mais ações (PETR4)?")
    assert confirmation("en", translations={}).startswith("Do you want the price of one or more stocks (PETR4)?")
    # A profile written in English: its Portuguese customers read its translation into Portuguese.
    english = {"pt": {"description": "A cotação de ações."}}
    said = confirmation("pt", translations=english, description="Stock quotes.", own="en")
    assert said.startswith("Você quer a cotação de ações (PETR4)?")
    assert confirmation("en", translations=english, description="Stock quotes.", own="en").startswith(
        "Do you want stock quotes (PETR4)?"
    )


def movers_confirmation(text: str, language: str) -> str:
    """Goal mode's "is this what you want?" for the day's movers, read from ``text``, asked in ``language``."""
    catalogue = catalogue_of(MANIFEST)
    key = ("finance", "TOP_MOVERS")
    goal = replace(catalogue.goals[key], confidence_threshold=1.0)
    profile = profile_serving(GoalCatalogue(goals={**catalogue.goals, key: goal}, capabilities=catalogue.capabilities))
    decision = asyncio.run(goal_decide(profile=profile, text=text, goal_state=None, language=language))
    assert decision.status == CLARIFICATION and decision.clarification["reason"] == LOW_CONFIDENCE
    assert decision.intent_output.entities.get("direction") in ("GAINERS", "LOSERS")  # read, as a code
    return decision.clarification["question"]


@pytest.mark.parametrize(
    ("text", "language", "named"),
    [
        ("maiores altas do Brasil", "pt", "(altas, Brasil)"),
        ("biggest losers in Norway", "en", "(biggest losers, Norway)"),
        ("mayores caídas en Suecia", "es", "(mayores caídas, Suecia)"),
    ],
)
def test_the_confirmation_names_a_chosen_value_in_the_customers_words_not_by_its_code(text, language, named):
    asked = movers_confirmation(text, language)

    assert named in asked
    assert not {"GAINERS", "LOSERS", "BOTH"} & set(asked.replace("(", " ").replace(")", " ").replace(",", " ").split())


def test_a_manifest_may_give_a_goals_translations_and_an_unknown_language_or_field_is_refused():
    data = copy.deepcopy(MANIFEST)
    data["goals"][0]["translations"] = QUOTE

    assert manifest_read(data).goals["GET_QUOTE"].translations == QUOTE
    data["goals"][0]["translations"] = {"fr": {"description": "Le prix"}}
    with pytest.raises(ManifestError, match=r"goals\[0\]\.translations: Unknown language 'fr'"):
        manifest_read(data)
    data["goals"][0]["translations"] = {"en": {"examples": "prices"}}
    with pytest.raises(ManifestError, match="has no translation"):
        manifest_read(data)


# -- synced, versioned, compiled, diffed, exported ------------------------------------------------------------------


@pytest.fixture
def profile(finance):
    profile = AgentProfileFactory(agent_id="bolsa_assistente", routing_mode=RoutingMode.GOAL)
    SpecialistFactory(profile=profile, name="general_agent")
    profile.goal_domains.set([finance])
    return profile


@pytest.mark.django_db
def test_the_demo_manifests_goals_are_synced_with_their_english_and_spanish_descriptions(finance):
    for goal in Goal.objects.filter(domain="finance"):
        assert set(goal.translations) == {"en", "es"}, goal.name
        assert all(texts["description"] for texts in goal.translations.values())
        assert goal.synced["translations"] == goal.translations


@pytest.mark.django_db
def test_a_translation_edited_by_the_business_is_kept_by_a_resync(finance):
    goal = Goal.objects.get(name="GET_QUOTE")
    goal.translations = {**goal.translations, "es": {"description": "Cotizaciones."}}
    goal.save(update_fields=["translations"])

    mcp_server_sync(server=finance)

    goal.refresh_from_db()
    assert goal.translations["es"] == {"description": "Cotizaciones."}
    assert "translations" in goal.edited_fields()


@pytest.mark.django_db
def test_the_document_and_the_compiled_catalogue_carry_a_goals_translations(profile):
    stored = Goal.objects.get(name="GET_QUOTE").translations

    document = profile_documents()["bolsa_assistente"]

    assert document["goals"]["finance"]["GET_QUOTE"]["translations"] == stored
    spec = profile_compile(document, pk=profile.pk)
    assert spec.goals.goal("finance", "GET_QUOTE").translations == stored


@pytest.mark.django_db
def test_a_version_published_before_goal_translations_differs_in_nothing_and_a_change_is_named(profile):
    draft = profile_documents()["bolsa_assistente"]
    old = copy.deepcopy(draft)
    for goal in old["goals"]["finance"].values():
        del goal["translations"]
    version_publish(profile=profile, document=old, note="before goal translations")
    live = live_version(profile)
    assert live is not None and "translations" not in live.document["goals"]["finance"]["GET_QUOTE"]
    assert profile_compile(live.document, pk=profile.pk).goals.goal("finance", "GET_QUOTE").translations == {}
    none = copy.deepcopy(draft)
    for goal in none["goals"]["finance"].values():
        goal["translations"] = {}
    assert document_diff(live.document, none) == []  # read as published: translations it did not have are none

    assert [change.text for change in document_diff(live.document, draft)] == [
        f"goal finance, {name.replace('_', ' ')}: description in {language} (none) → '{texts['description']}'"
        for name, goal in draft["goals"]["finance"].items()
        for language, texts in goal["translations"].items()
    ]


@pytest.mark.django_db
def test_the_goals_file_exports_translations_and_an_import_sets_and_refuses_them(finance):
    files = config_export_data()
    name = goals_file_name("finance")
    goals = files[name]["goals"]
    assert goals["GET_QUOTE"]["translations"] == Goal.objects.get(name="GET_QUOTE").translations
    before = profile_documents()

    config_import(sources=[Source(name, yaml.safe_dump(files[name], allow_unicode=True))])
    assert profile_documents() == before

    head = "domain: finance\nmcp_server: finance\ngoals:\n  GET_QUOTE:\n"
    config_import(sources=[Source(name, head + "    translations: {es: {description: ' Precios '}}\n")])
    assert Goal.objects.get(name="GET_QUOTE").translations == {"es": {"description": "Precios"}}
    with pytest.raises(ConfigImportError) as refused:
        config_import(sources=[Source(name, head + "    translations: {es: {name: Precios}}\n")])
    assert refused.value.messages == [
        f"{name}:5: goals.GET_QUOTE.translations.es: "
        + ERROR_TRANSLATION_FIELD.format(language="es", field="name", fields="description")
    ]
    assert Goal.objects.get(name="GET_QUOTE").translations == {"es": {"description": "Precios"}}
