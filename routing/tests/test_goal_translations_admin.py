"""A goal's texts per language on the admin's pages: a box per language for its description, and the warning listing
which text lacks which language — its description, and the label a clarification asks a required entity by — on
the goal page and on the page of a profile that serves it."""

from __future__ import annotations

import pytest

from agents.models import RoutingMode
from common.language import LANGUAGES
from common.translation_forms import NO_MISSING
from routing.models import Goal
from tests.adminkit import change_url, error_messages, form_data, shown_fields, visible_text
from tests.factories import AgentProfileFactory, SpecialistFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def quote(finance) -> Goal:
    goal = Goal.objects.get(name="GET_QUOTE")
    goal.translations = {"en": {"description": "The price of stocks."}}
    symbol = goal.entities_schema["symbol_text"]
    goal.entities_schema = {**goal.entities_schema, "symbol_text": {**symbol, "label": {"pt": "o ativo", "en": "it"}}}
    goal.save(update_fields=["translations", "entities_schema"])
    return goal


@pytest.mark.sqlite_too
def test_the_goal_page_has_a_box_per_language_and_saves_the_descriptions_translations(staff_client, quote):
    page = staff_client.get(change_url(quote))

    assert {f"description_{language}" for language in LANGUAGES} <= shown_fields(page)
    data = form_data(page)
    assert data["description_en"] == "The price of stocks."
    data.update(description_es=" El precio de las acciones. ", description_en="")
    response = staff_client.post(change_url(quote), data)

    assert response.status_code == 302, error_messages(response)
    quote.refresh_from_db()
    assert quote.translations == {"es": {"description": "El precio de las acciones."}}


@pytest.mark.sqlite_too
def test_the_goal_page_warns_of_a_description_and_a_required_entitys_label_lacking_a_language(staff_client, quote):
    shown = visible_text(staff_client.get(change_url(quote)).content.decode())

    assert "Missing translations" in shown
    assert "description lacks es" in shown and "entity symbol_text: label lacks es" in shown
    assert "entity notify" not in shown  # not required: never asked for

    Goal.objects.filter(pk=quote.pk).update(translations={lang: {"description": "x"} for lang in ("en", "es")})
    symbol = quote.entities_schema["symbol_text"]
    labels = {"pt": "o ativo", "en": "the stock", "es": "el activo"}
    Goal.objects.filter(pk=quote.pk).update(
        entities_schema={**quote.entities_schema, "symbol_text": {**symbol, "label": labels}}
    )
    assert NO_MISSING in visible_text(staff_client.get(change_url(quote)).content.decode())


@pytest.mark.sqlite_too
def test_a_goal_served_by_an_english_profile_is_taken_as_written_in_english(staff_client, finance, quote):
    profile = AgentProfileFactory(agent_id="stocks_en", routing_mode=RoutingMode.GOAL, language="en")
    profile.goal_domains.set([finance])

    shown = visible_text(staff_client.get(change_url(quote)).content.decode())

    assert "description lacks pt, es" in shown


@pytest.mark.sqlite_too
def test_the_page_of_a_profile_serving_the_goal_lists_its_missing_texts(staff_client, finance, quote):
    profile = AgentProfileFactory(agent_id="bolsa", routing_mode=RoutingMode.GOAL)
    SpecialistFactory(profile=profile, name="general_agent")
    profile.goal_domains.set([finance])

    shown = visible_text(staff_client.get(change_url(profile)).content.decode())

    assert "goal finance.GET_QUOTE: description lacks es" in shown
    assert "goal finance.GET_QUOTE, entity symbol_text: label lacks es" in shown
    assert "goal finance.TOP_MOVERS" not in shown  # the demo manifest gives its texts in every language
