"""A profile's language and a specialist's and an intent's translations, as the models check them on write."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from agents.models import AgentProfile, Specialist
from common.translations import ERROR_TRANSLATION_FIELD, ERROR_TRANSLATION_LANGUAGE
from routing.models import Intent

pytestmark = pytest.mark.django_db


def test_a_profile_is_written_in_portuguese_unless_it_says_otherwise_and_only_in_a_platform_language(telecom):
    assert AgentProfile(agent_id="novo", name="Novo").language == "pt"
    telecom.language = "fr"

    with pytest.raises(ValidationError) as refused:
        telecom.full_clean()

    assert refused.value.message_dict == {"language": ["Unknown language 'fr': use one of pt, es, en."]}


def test_a_specialists_translations_are_checked_by_language_and_field(telecom):
    specialist = Specialist.objects.filter(profile=telecom).first()
    assert specialist is not None
    specialist.translations = {"en": {"display_name": "Billing"}, "fr": {"display_name": "Facturation"}}

    with pytest.raises(ValidationError) as refused:
        specialist.full_clean()

    assert refused.value.message_dict == {
        "translations": [ERROR_TRANSLATION_LANGUAGE.format(language="fr", known="pt, es, en")]
    }
    specialist.translations = {"en": {"display_name": "Billing", "description": "Invoices and payments"}}
    specialist.full_clean()


def test_an_intents_translations_hold_its_subject_line_only(telecom):
    intent = Intent.objects.filter(profile=telecom).first()
    assert intent is not None
    intent.translations = {"es": {"description": "dudas sobre la factura", "name": "factura"}}

    with pytest.raises(ValidationError) as refused:
        intent.full_clean()

    assert refused.value.message_dict == {
        "translations": [ERROR_TRANSLATION_FIELD.format(language="es", field="name", fields="description")]
    }
