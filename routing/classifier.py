"""The router's classifier step: which intent a message belongs to when no keyword decided.

Two classifiers, chosen per profile by :func:`intent_classifier`:

* over an OpenAI-compatible endpoint (``ROUTER_LLM_*`` when routing has an endpoint of its own, else the
  answering one): structured output over the enabled intents' names, descriptions and examples;
* offline, with no endpoint configured: bag-of-words cosine similarity between the message and each intent's
  examples (one by one) and its name, description and keywords (together); the closest intent wins with that
  similarity as its confidence (ties: priority, then name). It takes the offline model's latency.

Neither raises: a failing endpoint gives a zero-confidence :class:`~routing.router.Classification` (below any
threshold, so the router falls back), and the router decides what the confidence is worth.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from functools import lru_cache
from typing import TypeVar

from pydantic import BaseModel, Field

from agents.public import (
    KIND_ROUTING,
    OpenAICompatibleModel,
    llm_configured,
    offline_pause,
    router_llm_separate,
    usage_record,
)
from common.infra import tracing
from common.text import normalize
from routing.router import Classification, Classifier, IntentSpec
from routing.specs import ProfileSpec

logger = logging.getLogger(__name__)

Answer = TypeVar("Answer", bound=BaseModel)

# Function words ignored by the offline classifier (Portuguese, English, Spanish).
_STOPWORD_TEXT = (
    "a o as os um uma de do da dos das e em no na nos nas por para com que meu minha meus minhas seu sua se "
    "eu voce me mim ja nao sim the an of to and in on for my is it i you your be el la los las y en con mi "
    "mis su es"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def _tokens(text: str) -> list[str]:
    return [token for token in normalize(text).split() if len(token) > 2 and token not in _STOPWORDS]


def _cosine(left: Counter[str], right: Counter[str]) -> float:
    if not left or not right:
        return 0.0
    dot = sum(count * right[token] for token, count in left.items())
    return dot / (math.sqrt(sum(c * c for c in left.values())) * math.sqrt(sum(c * c for c in right.values())))


@lru_cache(maxsize=64)
def _bags(intents: tuple[IntentSpec, ...]) -> tuple[tuple[Counter[str], ...], ...]:
    """Each intent's bags of words — its examples one by one, and its name, description and keywords together —
    counted once per compiled set of intents (a profile's), not on every message."""
    return tuple(
        (
            *(Counter(_tokens(example)) for example in intent.examples),
            Counter(_tokens(" ".join([intent.name.replace("_", " "), intent.description, *intent.keywords]))),
        )
        for intent in intents
    )


async def offline_classify(text: str, intents: tuple[IntentSpec, ...]) -> Classification | None:
    """The offline classifier (see the module docstring)."""
    await offline_pause()
    message = Counter(_tokens(text))
    best: tuple[float, int, str] | None = None
    for intent, bags in zip(intents, _bags(intents), strict=True):
        score = max(_cosine(message, bag) for bag in bags)
        candidate = (score, -intent.priority, intent.name)
        if score > 0 and (best is None or (candidate[0], candidate[1]) > (best[0], best[1])):
            best = candidate
    if best is None:
        return Classification(intent="", confidence=0.0, reason="Offline classifier found no similar intent.")
    score, _, name = best
    return Classification(
        intent=name,
        confidence=round(score, 3),
        reason=f"Offline classifier: message most similar to {name} (cosine {score:.2f}).",
    )


class IntentChoice(BaseModel):
    """Structured output of the LLM classifier."""

    intent: str = Field(description="The name of the best matching intent, or an empty string when none fits.")
    confidence: float = Field(ge=0.0, le=1.0, description="How sure you are, from 0 to 1.")
    reason: str = Field(default="", description="One short sentence explaining the choice.")


CLASSIFIER_PROMPT = (
    "You route customer messages to intents. Choose the single intent that best fits the message, "
    "using the intents' descriptions and examples. If none fits, answer an empty intent with confidence 0. "
    "Intents:\n{catalogue}"
)


async def structured_answer(
    profile: ProfileSpec,
    schema: type[Answer],
    messages: list[tuple[str, str]],
    *,
    for_routing: bool = True,
    kind: str = KIND_ROUTING,
) -> Answer | None:
    """One structured-output call (``schema`` as a function the model must call) to the profile's routing endpoint
    (``for_routing``) or its answering one: the answer, ``None`` when the model answered something else. The tokens
    it used count in the turn's usage under ``kind`` (:mod:`agents.usage`). Raises what the client raises (HTTP
    errors, timeouts): each caller decides what a failure means."""
    model = OpenAICompatibleModel(profile, for_routing=for_routing)
    runnable = model.client().with_structured_output(schema, method="function_calling", include_raw=True)
    with tracing.llm_span(model.model_name, purpose=kind) as current:
        reply = await runnable.ainvoke(messages)
        tracing.usage_record(current, reply["raw"])
    usage_record(kind, model.model_name, reply["raw"])
    answer = reply["parsed"]
    return answer if isinstance(answer, schema) else None


def llm_classifier(profile: ProfileSpec) -> Classifier:
    """The classifier over the profile's routing endpoint (structured output, one call per message)."""

    async def classify(text: str, intents: tuple[IntentSpec, ...]) -> Classification | None:
        catalogue = "\n".join(
            f"- {intent.name}: {intent.description}"
            + (f" Examples: {'; '.join(intent.examples)}" if intent.examples else "")
            for intent in intents
        )
        try:
            choice = await structured_answer(
                profile, IntentChoice, [("system", CLASSIFIER_PROMPT.format(catalogue=catalogue)), ("human", text)]
            )
        except Exception as exc:  # noqa: BLE001 — any client failure means "no decision"
            logger.warning("LLM classifier failed: %s", exc)
            return Classification(intent="", confidence=0.0, reason=f"Classifier error: {type(exc).__name__}")
        if choice is None:
            return None
        return Classification(intent=choice.intent, confidence=choice.confidence, reason=choice.reason)

    return classify


def intent_classifier(profile: ProfileSpec) -> Classifier:
    """The classifier step of the router for ``profile``.

    A routing endpoint of its own (``ROUTER_LLM_*``: often a small, fast model)
    wins; otherwise the profile's answering endpoint (its own, else the platform's); otherwise the offline classifier.
    """
    if routing_model_configured(profile):
        return llm_classifier(profile)
    return offline_classify


def routing_model_configured(profile: ProfileSpec) -> bool:
    """Routing may ask a model for ``profile``: routing has an endpoint of its own, or the profile's answering one
    (its own, else the platform's) is configured."""
    return router_llm_separate() or llm_configured(profile)
