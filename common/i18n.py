"""The platform's own words in a conversation's language.

Every sentence the platform writes to a customer is an English message id, translated by Django's gettext
catalogues (``locale/<language>/LC_MESSAGES/django.po``, compiled to ``django.mo``; docs/languages.md). A table of
such sentences holds them lazily (``gettext_lazy``, ``pgettext_lazy`` where two read the same in English) and
says them with :func:`say`; code that writes one sentence calls
``gettext`` inside ``translation.override(language)``. English needs no catalogue: its message ids are its words.

Placeholders are ``str.format`` fields (``{position}``): a translation keeps them, and values (names, numbers,
business data) are put in after the lookup, never translated.
"""

from __future__ import annotations

from typing import Any

from django.utils import translation
from django.utils.functional import Promise
from django.utils.translation import gettext

from common.language import LANGUAGES

DEFAULT_LANGUAGE = "pt"  # when neither the channel, the conversation nor the message tells


def language_known(language: str | None) -> str:
    """``language`` when it is one the platform speaks (:data:`common.language.LANGUAGES`), else the default."""
    return language if language in LANGUAGES else DEFAULT_LANGUAGE


def say(language: str | None, message: str | Promise, /, **values: Any) -> str:
    """``message`` (an English message id, or a lazy translation of one) in ``language``, its ``{fields}`` filled
    with ``values``."""
    with translation.override(language_known(language)):
        text = gettext(message) if isinstance(message, str) else str(message)
    return text.format(**values) if values else text
