"""A row's translations: the rule they are checked by, how they are stored, said in a language and found missing."""

from __future__ import annotations

from common.translations import (
    ERROR_TRANSLATION_FIELD,
    ERROR_TRANSLATION_LANGUAGE,
    ERROR_TRANSLATION_LENGTH,
    ERROR_TRANSLATION_TEXT,
    ERROR_TRANSLATIONS,
    translated,
    translated_only,
    translations_cleaned,
    translations_missing,
    translations_problems,
)

FIELDS = ("display_name", "description")
PLANS = {"en": {"display_name": "Plans and services"}, "es": {"display_name": "Planes y servicios", "description": ""}}


def test_translations_by_language_then_field_are_fine():
    assert translations_problems(PLANS, FIELDS) == []
    assert translations_problems({}, FIELDS) == []


def test_each_wrong_part_is_named_with_its_language():
    value = {"fr": {"display_name": "Forfaits"}, "en": {"title": "Plans", "description": 3}, "es": "Planes"}

    assert translations_problems(value, FIELDS) == [
        ("fr", ERROR_TRANSLATION_LANGUAGE.format(language="fr", known="pt, es, en")),
        ("en", ERROR_TRANSLATION_FIELD.format(language="en", field="title", fields="display_name, description")),
        ("en", ERROR_TRANSLATION_TEXT.format(language="en", field="description")),
        ("es", ERROR_TRANSLATIONS),
    ]
    assert translations_problems(["en"], FIELDS) == [("", ERROR_TRANSLATIONS)]


def test_a_text_longer_than_its_fields_limit_is_refused():
    problems = translations_problems({"en": {"display_name": "x" * 201}}, FIELDS, {"display_name": 200})

    assert problems == [
        ("en", ERROR_TRANSLATION_LENGTH.format(language="en", field="display_name", limit=200, length=201))
    ]


def test_stored_translations_keep_the_platforms_language_order_and_drop_empty_texts():
    cleaned = translations_cleaned({"en": {"display_name": " Plans "}, "es": {"description": "  "}, "pt": {}})

    assert cleaned == {"en": {"display_name": "Plans"}}
    assert list(translations_cleaned({"en": {"description": "b"}, "es": {"description": "a"}})) == ["es", "en"]


def test_a_text_is_said_in_the_language_asked_else_in_the_profiles():
    assert translated("Planos e serviços", PLANS, "display_name", "en", own="pt") == "Plans and services"
    assert translated("Planos e serviços", PLANS, "display_name", "pt", own="pt") == "Planos e serviços"
    assert translated("dúvidas sobre planos", PLANS, "description", "es", own="pt") == "dúvidas sobre planos"
    assert translated("Planos e serviços", PLANS, "display_name", None, own="pt") == "Planos e serviços"


def test_a_text_said_only_in_the_language_asked_is_empty_without_a_translation():
    assert translated_only("dúvidas sobre planos", PLANS, "description", "es", own="pt") == ""
    assert translated_only("dúvidas sobre planos", PLANS, "description", "pt", own="pt") == "dúvidas sobre planos"


def test_missing_translations_name_each_text_and_the_other_languages_it_lacks():
    texts = {"display_name": "Planos e serviços", "description": "Planos, ofertas", "empty": ""}

    assert translations_missing(texts, PLANS, own="pt") == [("description", ("es", "en"))]
    assert translations_missing(texts, PLANS, own="en") == [
        ("display_name", ("pt",)),
        ("description", ("pt", "es")),
    ]
