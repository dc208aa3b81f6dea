"""Goal mode's own words in the customer's language (Portuguese, English, Spanish), and the manifests' sentences.

A goal turn speaks the language of the customer's message (:func:`turn_language`: :mod:`common.language`, else the
conversation's, else :data:`DEFAULT_LANGUAGE`): its questions, the sentences of a step that failed or did not run,
the line that introduces the offline answer. What the platform says is here (:data:`MESSAGES`, English message ids
the gettext catalogues translate); what a domain says is in its manifest, where any sentence — a ``flow.pre``
entry's ``question`` and ``not_found``, an entity's ``label`` — may be one string or one per language
(:func:`in_language`).

No model, no database.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from django.utils.translation import gettext_lazy, pgettext_lazy

from common.i18n import DEFAULT_LANGUAGE, say
from common.language import LANGUAGES, detect_language

# The platform's goal-mode sentences: English message ids, in each language by the catalogues (common.i18n).
MESSAGES: Mapping[str, Any] = {
    "rephrase": gettext_lazy("I did not understand the request; could you say it another way?"),
    "confirm": gettext_lazy("Do you want {goal}{entities}? Reply yes to go on."),
    "declined": gettext_lazy("All right, I won't do that. What do you need?"),
    "which": gettext_lazy("Which {labels}?"),
    "which_many": pgettext_lazy("several", "Which {labels}?"),  # Spanish asks "¿Cuáles son …?"
    "and": gettext_lazy("and"),
    "ambiguous": gettext_lazy("I found more than one option for '{query}': {choices} Which one?"),
    "not_found": gettext_lazy("I found nothing for '{query}'."),
    "failed": gettext_lazy("{capability} failed."),
    "no_answer": gettext_lazy("{capability} did not answer within {seconds:g} s."),
    "no_answer_in_time": gettext_lazy("{capability} did not answer in time."),
    "too_large": gettext_lazy("The answer of {capability} was too large to read."),
    "plan_time": gettext_lazy("Not done: the request ran out of time."),
    "after_failure": gettext_lazy("Not done: step {step} gave no result."),
    "plan_stopped": gettext_lazy("Not done: the plan stopped before it."),
    "skipped": gettext_lazy("[{capability}: not done]"),
    "found": gettext_lazy("Here is what I found:"),
    "failed_plan": gettext_lazy(
        "I could not complete the request right now. Please try again shortly or in other words."
    ),
}


@lru_cache(maxsize=8)
def words(language: str | None) -> Mapping[str, str]:
    """The platform's goal-mode words in ``language`` (:data:`DEFAULT_LANGUAGE`'s for any other)."""
    return {key: say(language, message) for key, message in MESSAGES.items()}


def said(key: str, language: str | None, **values: Any) -> str:
    """One of :data:`MESSAGES`' sentences in ``language``, filled in with ``values``."""
    return words(language)[key].format(**values)


def turn_language(text: str, conversation: str | None = None) -> str:
    """The language a goal turn answers in: the message's, when :func:`common.language.detect_language` can tell;
    else the conversation's (a reply such as "2" or "Nordea" keeps it); else :data:`DEFAULT_LANGUAGE`."""
    for language in (detect_language(text), conversation):
        if language is not None and language in LANGUAGES:
            return language
    return DEFAULT_LANGUAGE


def in_language(value: Any, language: str | None) -> str:
    """A manifest's sentence in ``language``: ``value`` itself when it is one string; from an object by language
    (``{"pt": …, "en": …, "es": …}``) the one in ``language``, else :data:`DEFAULT_LANGUAGE`'s, else the first;
    ``""`` for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        for key in (language, DEFAULT_LANGUAGE, *value):
            found = value.get(key) if key else None
            if isinstance(found, str) and found.strip():
                return found
    return ""


def sentence_problem(value: Any) -> str:
    """Why ``value`` is not a manifest sentence (a string, or an object of strings by language), or ``""``."""
    if isinstance(value, str):
        return ""
    if isinstance(value, Mapping) and value and all(isinstance(text, str) for text in value.values()):
        unknown = sorted(str(key) for key in value if key not in LANGUAGES)
        return f"names no language of {', '.join(LANGUAGES)}: {', '.join(unknown)}" if unknown else ""
    return "must be a string or an object of strings by language (pt, en, es)"
