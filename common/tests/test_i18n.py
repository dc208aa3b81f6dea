"""Every sentence the platform writes to a customer is in the pt and es catalogues (English is the message id).

The message ids are read from the product code itself (every ``gettext``-family call with a literal in the apps
that write to customers), the translations from the compiled catalogues the platform loads.
"""

from __future__ import annotations

import ast
import gettext
import re
import string
import subprocess
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import translation

from common.i18n import say

ROOT = Path(settings.BASE_DIR)
# The apps whose words reach customers; their admin pages and forms are the staff's (English).
CUSTOMER_APPS = ("agents", "chat", "conversations", "handoffs", "routing", "common")
STAFF_FILES = re.compile(r"(^|/)(admin\w*|forms|adminkit)\.py$")
CALLS = {"gettext": 0, "gettext_lazy": 0, "gettext_noop": 0, "pgettext": 1, "pgettext_lazy": 1}
CATALOGUE_LANGUAGES = ("pt", "es")
# Message ids a language writes as English does: for these alone a translation equal to its message id is one.
SPELLED_ALIKE: dict[str, frozenset[str]] = {"pt": frozenset(), "es": frozenset({"no"})}


def customer_message_ids() -> dict[str, str]:
    """``{message id (with its context, as a catalogue keys it): "file:line"}`` of the customer-facing code."""
    found: dict[str, str] = {}
    for app in CUSTOMER_APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if "/tests/" in relative or "/migrations/" in relative or STAFF_FILES.search(relative):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.Call):
                    continue
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                if name not in CALLS or len(node.args) <= CALLS[name]:
                    continue
                literals = [arg.value for arg in node.args[: CALLS[name] + 1] if isinstance(arg, ast.Constant)]
                if len(literals) == CALLS[name] + 1 and all(isinstance(text, str) for text in literals):
                    found.setdefault("\x04".join(literals), f"{relative}:{node.lineno}")
    return found


def catalogue(language: str, compiled_path: Path | None = None) -> dict[str, str]:
    """The messages of ``language``'s compiled catalogue (the committed one unless ``compiled_path``)."""
    compiled_path = compiled_path or ROOT / "locale" / language / "LC_MESSAGES" / "django.mo"
    with open(compiled_path, "rb") as compiled:
        read = gettext.GNUTranslations(compiled)
    return {key: value for key, value in read._catalog.items() if key}  # type: ignore[attr-defined]


def fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


def test_the_customer_facing_code_has_message_ids_to_check():
    ids = customer_message_ids()

    assert len(ids) >= 40  # the reader finds the tables' lazy ids, not only direct calls
    assert "To go on I need your permission to use {tool} (“{what}”). May I proceed? " in "".join(ids)


@pytest.mark.parametrize("language", CATALOGUE_LANGUAGES)
def test_every_customer_facing_message_id_is_translated_in_the_catalogue(language):
    translated = catalogue(language)

    missing = {message: where for message, where in customer_message_ids().items() if not translated.get(message)}

    assert not missing, f"not in locale/{language} (run compilemessages after editing the .po): {missing}"


@pytest.mark.parametrize("language", CATALOGUE_LANGUAGES)
def test_no_customer_facing_message_is_left_in_english_in_the_catalogue(language):
    translated = catalogue(language)

    english = {
        message: where
        for message, where in customer_message_ids().items()
        if translated.get(message) == message.split("\x04")[-1] and message not in SPELLED_ALIKE[language]
    }

    assert not english, f"left in English in locale/{language}: {english}"


@pytest.mark.parametrize("language", CATALOGUE_LANGUAGES)
def test_the_committed_catalogue_is_its_po_file_compiled(language, tmp_path):
    source = ROOT / "locale" / language / "LC_MESSAGES" / "django.po"
    subprocess.run(["msgfmt", "--check", "-o", str(tmp_path / "django.mo"), str(source)], check=True)

    assert catalogue(language) == catalogue(language, tmp_path / "django.mo"), "run compilemessages -l " + language


@pytest.mark.parametrize("language", CATALOGUE_LANGUAGES)
def test_a_translation_keeps_the_fields_its_message_id_fills_in(language):
    translated = catalogue(language)

    changed = {
        message: translated[message]
        for message in customer_message_ids()
        if message in translated and fields(message.split("\x04")[-1]) != fields(translated[message])
    }

    assert not changed


def test_a_sentence_is_said_in_the_language_asked_and_english_is_its_message_id():
    assert say("es", "{person} is with you now.", person="Ana") == "Ana lo está atendiendo ahora."
    assert say("pt", "{person} is with you now.", person="Ana") == "Ana está atendendo você agora."
    assert say("en", "{person} is with you now.", person="Ana") == "Ana is with you now."
    assert say("xx", "{person} is with you now.", person="Ana") == "Ana está atendendo você agora."  # the default
    assert translation.get_language() == settings.LANGUAGE_CODE  # the language asked does not outlive the call


# The platform's own machinery, which a customer neither sees nor asks for: they meet specialists and people.
MACHINERY = re.compile(
    r"\b(?:agents?|agentes?|acionad[oa]s?|activad[oa]s?|triggered|consolida(?:tion|ção|cao|ción|cion)|orquestra\w*"
    r"|orchestrat\w*)\b",
    re.IGNORECASE,
)


@pytest.mark.parametrize("language", ("en", *CATALOGUE_LANGUAGES))
def test_no_customer_facing_message_names_the_platforms_machinery(language):
    ids = customer_message_ids()
    translated = catalogue(language) if language != "en" else {message: message.split("\x04")[-1] for message in ids}

    internal = {
        message: translated.get(message, "")
        for message in ids
        if MACHINERY.search(re.sub(r"\{[^{}]*\}", "", translated.get(message, "")))
    }

    assert not internal, f"locale/{language} says what the platform does inside: {internal}"
