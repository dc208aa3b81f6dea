"""Per-language texts on the admin's pages: a box per language for a specialist's display name and description and an
intent's subject line, the profile's language, and the warning listing which text lacks which language (on the
specialist, intent and profile pages)."""

from __future__ import annotations

import pytest

from agents.models import Specialist
from common.language import LANGUAGES
from common.translation_forms import ERROR_TRANSLATION_OWN, NO_MISSING
from routing.models import Intent
from tests.adminkit import add_url, change_url, error_messages, form_data, shown_fields, visible_text

pytestmark = pytest.mark.django_db


@pytest.fixture
def product(telecom) -> Specialist:
    specialist = Specialist.objects.get(profile=telecom, name="product_agent")
    specialist.display_name, specialist.description = "Planos e serviços", ""
    specialist.translations = {"en": {"display_name": "Plans and services"}}
    specialist.save(update_fields=["display_name", "description", "translations"])
    return specialist


@pytest.fixture
def plans(telecom) -> Intent:
    intent = Intent.objects.get(profile=telecom, name="product_information")
    intent.description, intent.translations = "dúvidas sobre planos", {}
    intent.save(update_fields=["description", "translations"])
    return intent


@pytest.mark.sqlite_too
def test_the_specialist_page_has_a_box_per_language_filled_from_its_translations_and_saves_them(staff_client, product):
    page = staff_client.get(change_url(product))

    assert {f"display_name_{language}" for language in LANGUAGES} <= shown_fields(page)
    data = form_data(page)
    assert data["display_name_en"] == "Plans and services"
    data.update(display_name_es=" Planes y servicios ", description_en="Plans, offers and coverage")
    response = staff_client.post(change_url(product), data)

    assert response.status_code == 302, error_messages(response)
    product.refresh_from_db()
    assert product.translations == {
        "es": {"display_name": "Planes y servicios"},
        "en": {"description": "Plans, offers and coverage", "display_name": "Plans and services"},
    }


@pytest.mark.sqlite_too
def test_emptying_a_box_drops_that_translation(staff_client, product):
    data = form_data(staff_client.get(change_url(product)))
    data["display_name_en"] = ""

    response = staff_client.post(change_url(product), data)

    assert response.status_code == 302, error_messages(response)
    product.refresh_from_db()
    assert product.translations == {}


def test_a_box_in_the_profiles_own_language_is_refused_and_nothing_is_saved(staff_client, product):
    data = form_data(staff_client.get(change_url(product)))
    data["display_name_pt"] = "Planos"

    response = staff_client.post(change_url(product), data)

    assert response.status_code == 200
    assert ERROR_TRANSLATION_OWN.format(language="pt", label="Display name") in error_messages(response)
    product.refresh_from_db()
    assert product.translations == {"en": {"display_name": "Plans and services"}}


def test_a_display_name_longer_than_the_fields_limit_is_refused_in_any_language(staff_client, product):
    data = form_data(staff_client.get(change_url(product)))
    data["display_name_es"] = "x" * 201

    response = staff_client.post(change_url(product), data)

    assert response.status_code == 200
    assert any("at most 200 characters" in message for message in error_messages(response))


@pytest.mark.sqlite_too
def test_a_specialist_is_added_with_its_translations(staff_client, telecom):
    data = form_data(staff_client.get(add_url(Specialist)))
    data.update(profile=telecom.pk, name="roaming_agent", display_name="Roaming", display_name_es="Itinerancia")
    response = staff_client.post(add_url(Specialist), data)

    assert response.status_code == 302, error_messages(response)
    assert Specialist.objects.get(profile=telecom, name="roaming_agent").translations == {
        "es": {"display_name": "Itinerancia"}
    }


@pytest.mark.sqlite_too
def test_the_intent_page_edits_the_subject_line_per_language_and_warns_of_what_is_missing(staff_client, plans):
    page = staff_client.get(change_url(plans))

    assert "subject line lacks es, en" in visible_text(page.content.decode())
    data = form_data(page)
    data["description_en"] = "questions about plans"
    response = staff_client.post(change_url(plans), data)
    assert response.status_code == 302, error_messages(response)
    plans.refresh_from_db()
    assert plans.translations == {"en": {"description": "questions about plans"}}
    assert "subject line lacks es" in visible_text(staff_client.get(change_url(plans)).content.decode())
    data["description_es"] = "dudas sobre planes"
    staff_client.post(change_url(plans), data)
    assert NO_MISSING in visible_text(staff_client.get(change_url(plans)).content.decode())


@pytest.mark.sqlite_too
def test_the_specialist_page_warns_of_each_text_that_lacks_a_language(staff_client, product):
    shown = visible_text(staff_client.get(change_url(product)).content.decode())

    assert "Missing translations" in shown and "display name lacks es" in shown
    assert "description lacks" not in shown  # an empty text needs none


@pytest.mark.sqlite_too
def test_the_profile_page_lists_every_specialists_and_intents_missing_texts_and_sets_its_language(
    staff_client, telecom, product, plans
):
    page = staff_client.get(change_url(telecom))
    shown = visible_text(page.content.decode())

    assert "specialist product_agent: display name lacks es" in shown
    assert "intent product_information: subject line lacks es, en" in shown
    data = form_data(page)
    assert data["language"] == "pt"
    data["language"] = "en"
    response = staff_client.post(change_url(telecom), data)
    assert response.status_code == 302, error_messages(response)
    telecom.refresh_from_db()
    assert telecom.language == "en"
    shown = visible_text(staff_client.get(change_url(telecom)).content.decode())
    assert "specialist product_agent: display name lacks pt, es" in shown  # its English name is no longer its own
    data["language"] = "fr"
    refused = staff_client.post(change_url(telecom), data)
    assert refused.status_code == 200 and any("fr" in message for message in error_messages(refused))
