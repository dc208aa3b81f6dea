"""Goal mode's own words in the customer's language (Portuguese, English, Spanish), and the manifests' sentences.

A goal turn speaks the language of the customer's message (:func:`turn_language`: :mod:`common.language`, else the
conversation's, else :data:`DEFAULT_LANGUAGE`): its questions, the sentences of a step that failed or did not run,
the line that introduces the offline answer. What the platform says is here, one table per language
(:data:`WORDS`); what a domain says is in its manifest, where any sentence — a ``flow.pre`` entry's ``question``
and ``not_found``, an entity's ``label`` — may be one string or one per language (:func:`in_language`).

Pure: no model, no database.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common.language import LANGUAGES, detect_language

DEFAULT_LANGUAGE = "pt"  # when neither the message nor the conversation tells

WORDS: Mapping[str, Mapping[str, str]] = {
    "pt": {
        "rephrase": "Não entendi o pedido; pode dizer de outro jeito?",
        "confirm": "Você quer {goal}{entities}? Responda sim para continuar.",
        "declined": "Tudo bem, não vou fazer isso. O que você precisa?",
        "which": "Qual {labels}?",
        "which_many": "Quais {labels}?",
        "and": "e",
        "ambiguous": "Encontrei mais de uma opção para '{query}': {choices} Qual delas?",
        "not_found": "Não encontrei nada para '{query}'.",
        "failed": "{capability} falhou.",
        "no_answer": "{capability} não respondeu em {seconds:g} s.",
        "no_answer_in_time": "{capability} não respondeu a tempo.",
        "too_large": "{capability} respondeu demais e não foi lido.",
        "plan_time": "Não executado: o tempo do pedido acabou.",
        "after_failure": "Não executado: o passo {step} não deu resultado.",
        "plan_stopped": "Não executado: o plano parou antes.",
        "skipped": "[{capability}: não executado]",
        "found": "Veja o que encontrei:",
        "failed_plan": "Não consegui concluir o pedido agora. Tente de novo em instantes ou com outras palavras.",
    },
    "en": {
        "rephrase": "I did not understand the request; could you say it another way?",
        "confirm": "Do you want {goal}{entities}? Reply yes to go on.",
        "declined": "All right, I won't do that. What do you need?",
        "which": "Which {labels}?",
        "which_many": "Which {labels}?",
        "and": "and",
        "ambiguous": "I found more than one option for '{query}': {choices} Which one?",
        "not_found": "I found nothing for '{query}'.",
        "failed": "{capability} failed.",
        "no_answer": "{capability} did not answer within {seconds:g} s.",
        "no_answer_in_time": "{capability} did not answer in time.",
        "too_large": "The answer of {capability} was too large to read.",
        "plan_time": "Not done: the request ran out of time.",
        "after_failure": "Not done: step {step} gave no result.",
        "plan_stopped": "Not done: the plan stopped before it.",
        "skipped": "[{capability}: not done]",
        "found": "Here is what I found:",
        "failed_plan": "I could not complete the request right now. Please try again shortly or in other words.",
    },
    "es": {
        "rephrase": "No entendí el pedido; ¿puede decirlo de otra manera?",
        "confirm": "¿Quiere {goal}{entities}? Responda sí para continuar.",
        "declined": "De acuerdo, no lo haré. ¿Qué necesita?",
        "which": "¿Cuál es {labels}?",
        "which_many": "¿Cuáles son {labels}?",
        "and": "y",
        "ambiguous": "Encontré más de una opción para '{query}': {choices} ¿Cuál de ellas?",
        "not_found": "No encontré nada para '{query}'.",
        "failed": "{capability} falló.",
        "no_answer": "{capability} no respondió en {seconds:g} s.",
        "no_answer_in_time": "{capability} no respondió a tiempo.",
        "too_large": "La respuesta de {capability} fue demasiado grande para leerla.",
        "plan_time": "No realizado: se acabó el tiempo del pedido.",
        "after_failure": "No realizado: el paso {step} no dio resultado.",
        "plan_stopped": "No realizado: el plan se detuvo antes.",
        "skipped": "[{capability}: no realizado]",
        "found": "Esto es lo que encontré:",
        "failed_plan": "No pude completar el pedido ahora. Inténtelo de nuevo en un momento o con otras palabras.",
    },
}


def words(language: str | None) -> Mapping[str, str]:
    """The platform's goal-mode words in ``language`` (:data:`DEFAULT_LANGUAGE`'s for any other)."""
    return WORDS.get(language or "", WORDS[DEFAULT_LANGUAGE])


def said(key: str, language: str | None, **values: Any) -> str:
    """One of :data:`WORDS`' sentences in ``language``, filled in with ``values``."""
    return words(language)[key].format(**values)


def turn_language(text: str, conversation: str | None = None) -> str:
    """The language a goal turn answers in: the message's, when :func:`common.language.detect_language` can tell;
    else the conversation's (a reply such as "2" or "Nordea" keeps it); else :data:`DEFAULT_LANGUAGE`."""
    for language in (detect_language(text), conversation):
        if language is not None and language in WORDS:
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
