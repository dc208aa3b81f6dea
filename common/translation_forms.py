"""A row's texts per language on its admin page: a box per platform language for each translated field, and the
warning that lists what lacks which language.

:func:`translations_form` makes the form base a model form mixes in (``class SpecialistAdminForm(translations_form(
{...}), forms.ModelForm)``): a box per field and language of :data:`common.language.LANGUAGES` (``display_name_en``),
filled from the row's ``translations`` and saved into them (:func:`common.translations.translations_cleaned`). The
profile's own language is the field itself: a box in it is refused, naming the field to write in instead.
:func:`missing_warning` renders :func:`common.translations.translations_missing` for the page.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django import forms
from django.utils.html import format_html, format_html_join

from common.language import LANGUAGES
from common.translations import Translations, translations_cleaned, translations_missing

ERROR_TRANSLATION_OWN = "{language} is the profile's language: write this text in “{label}” above."
NO_MISSING = "Every text has a value in every language."


def translation_box(field: str, language: str) -> str:
    """The form field of ``field``'s text in ``language``: ``display_name_en``."""
    return f"{field}_{language}"


class TranslationsFormBase(forms.Form):
    """The behaviour of :func:`translations_form`'s forms: ``translated`` maps each field to its label."""

    translated: Mapping[str, str] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        instance = getattr(self, "instance", None)
        stored = getattr(instance, "translations", None) or {}
        # A translation into the profile's own language (left from before its language changed) is not offered: the
        # field says it, and the next save drops it.
        own = self.stored_language()
        for field in self.translated:
            for language in LANGUAGES:
                text = (stored.get(language) or {}).get(field)
                if text and language != own:
                    self.initial.setdefault(translation_box(field, language), text)

    def stored_language(self) -> str | None:
        """The language the stored row's own fields are written in (its profile's); ``None`` for a new row."""
        instance = getattr(self, "instance", None)
        return (
            getattr(getattr(instance, "profile", None), "language", None)
            if getattr(instance, "profile_id", None)
            else None
        )

    def translations_language(self) -> str | None:
        """The language the row's own fields are written in (its profile's), once known."""
        profile = self.cleaned_data.get("profile") or getattr(getattr(self, "instance", None), "profile", None)
        return getattr(profile, "language", None)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or self.cleaned_data
        own = self.translations_language()
        texts: dict[str, dict[str, str]] = {}
        for field, label in self.translated.items():
            for language in LANGUAGES:
                box = translation_box(field, language)
                text = (cleaned.get(box) or "").strip()
                if text and language == own:
                    self.add_error(box, ERROR_TRANSLATION_OWN.format(language=language, label=label))
                elif text:
                    texts.setdefault(language, {})[field] = text
        instance = getattr(self, "instance", None)
        if instance is not None:
            instance.translations = translations_cleaned(texts)
        return cleaned


def translations_form(
    translated: Mapping[str, str], *, limits: Mapping[str, int] | None = None, long: Iterable[str] = ()
) -> type[TranslationsFormBase]:
    """A form base with a box per platform language for each of ``translated`` (field → its label), each at most
    ``limits[field]`` characters, a text area for the ``long`` fields."""
    long = set(long)
    boxes: dict[str, Any] = {"translated": dict(translated)}
    for field, label in translated.items():
        for language in LANGUAGES:
            widget = forms.Textarea(attrs={"rows": 3, "cols": 80}) if field in long else forms.TextInput
            boxes[translation_box(field, language)] = forms.CharField(
                label=f"{label} ({language})",
                required=False,
                max_length=(limits or {}).get(field),
                widget=widget,
            )
    return type("TranslationsForm", (TranslationsFormBase,), boxes)


def translation_boxes(translated: Iterable[str]) -> list[str]:
    """The boxes of ``translated`` in page order (by field, then language): a fieldset's fields."""
    return [translation_box(field, language) for field in translated for language in LANGUAGES]


def missing_lines(
    rows: Iterable[tuple[str, Mapping[str, str], Translations | None]], *, own: str, labels: Mapping[str, str]
) -> list[str]:
    """One line per text that lacks a language: ``(row's name, its texts by field, its translations)`` rows, the
    fields named by ``labels`` ("specialist billing_agent: display name lacks en, es"; no name: "display name lacks
    en")."""
    lines = []
    for name, texts, translations in rows:
        for field, languages in translations_missing(texts, translations, own=own):
            said = f"{labels.get(field, field)} lacks {', '.join(languages)}"
            lines.append(f"{name}: {said}" if name else said)
    return lines


def rows_missing(
    rows: Iterable[tuple[str, Any]], fields: Iterable[str], *, own: str, labels: Mapping[str, str]
) -> list[str]:
    """:func:`missing_lines` of model rows: ``(name, row)`` pairs, each row's ``fields`` and its ``translations``."""
    fields = tuple(fields)
    return missing_lines(
        ((name, {field: getattr(row, field) for field in fields}, row.translations) for name, row in rows),
        own=own,
        labels=labels,
    )


def missing_warning(lines: list[str]) -> str:
    """The page's warning: the lines as a list, marked as a warning, or :data:`NO_MISSING`."""
    if not lines:
        return NO_MISSING
    items = format_html_join("", "<li>{}</li>", ((line,) for line in lines))
    return format_html(
        '<div class="missing-translations"><p class="warning"><strong>Missing translations</strong> — said in the '
        "profile's language instead (a subject line is left out):</p><ul>{}</ul></div>",
        items,
    )
