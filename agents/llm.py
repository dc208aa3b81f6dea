"""The one module that owns model access.

Two providers stand behind :class:`ModelProvider`, looked up in :data:`PROVIDERS`:

* ``openai`` — any OpenAI-compatible endpoint through langchain-openai, when
  ``OPENAI_BASE_URL`` and ``LLM_MODEL`` are set (a profile may override the
  model and temperature);
* ``offline`` — a deterministic model that needs no network. It is a product
  feature, not a test double: the quick start runs on it, every answer says
  ``"llm": "offline"``, and ``OFFLINE_LLM_LATENCY_MS`` makes it take that long
  per call (for benchmarks).

Providers never raise to the caller: a model error or timeout becomes a
graceful :class:`ModelAnswer` with ``error`` set, or a ``None`` classification.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar

from django.conf import settings
from pydantic import BaseModel, Field

from routing.router import Classification, IntentSpec
from routing.text import normalize

if TYPE_CHECKING:
    from routing.snapshot import ProfileSpec, SpecialistSpec

logger = logging.getLogger(__name__)

OFFLINE_NOTICE = "(offline model)"
ERROR_ANSWER = (
    "Desculpe, não consegui concluir sua solicitação agora. Tente novamente em instantes. "
    "(Sorry, I could not complete your request right now. Please try again shortly.)"
)


@dataclass(frozen=True)
class AnswerRequest:
    """What a specialist answers from."""

    profile: ProfileSpec
    specialist: SpecialistSpec
    text: str
    intent: str = ""
    intent_description: str = ""
    history: tuple[tuple[str, str], ...] = ()
    context: dict[str, Any] = field(default_factory=dict)


@dataclass
class ModelAnswer:
    text: str
    llm: str
    model: str
    latency_ms: float = 0.0
    error: str | None = None

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {"llm": self.llm, "model": self.model, "latency_ms": round(self.latency_ms, 1)}
        if self.error:
            info["error"] = self.error
        return info


class ModelProvider:
    """Contract of a model provider.

    ``classify`` returns the intent it believes the message belongs to (or
    ``None`` when it cannot say); ``respond`` returns the specialist's answer.
    Neither raises: failures are reported in the return value and logged.
    """

    name: ClassVar[str]

    def __init__(self, profile: ProfileSpec) -> None:
        self.profile = profile

    async def classify(self, text: str, intents: tuple[IntentSpec, ...]) -> Classification | None:
        raise NotImplementedError

    async def respond(self, request: AnswerRequest) -> ModelAnswer:
        raise NotImplementedError


# --- offline -------------------------------------------------------------------

# Function words ignored by the offline classifier (Portuguese, English, Spanish).
_STOPWORD_TEXT = (
    "a o as os um uma de do da dos das e em no na nos nas por para com que meu minha meus minhas seu sua se "
    "eu voce me mim ja nao sim the an of to and in on for my is it i you your be el la los las y en con mi "
    "mis su es"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def _tokens(text: str) -> list[str]:
    return [token for token in normalize(text).split() if len(token) > 2 and token not in _STOPWORDS]


def _cosine(left: Counter, right: Counter) -> float:
    if not left or not right:
        return 0.0
    dot = sum(count * right[token] for token, count in left.items())
    return dot / (math.sqrt(sum(c * c for c in left.values())) * math.sqrt(sum(c * c for c in right.values())))


class OfflineModel(ModelProvider):
    """Deterministic, network-free model.

    * classification: bag-of-words cosine similarity between the message and
      each intent's examples (one by one) and its name, description and
      keywords (together); the intent with the closest match wins with that
      similarity as confidence (ties: priority, then name);
    * answers: composed from the specialist, the intent and the request, in
      Portuguese and English, marked as coming from the offline model.
    """

    name = "offline"

    async def _pause(self) -> None:
        if settings.OFFLINE_LLM_LATENCY_MS:
            await asyncio.sleep(settings.OFFLINE_LLM_LATENCY_MS / 1000)

    async def classify(self, text: str, intents: tuple[IntentSpec, ...]) -> Classification | None:
        await self._pause()
        message = Counter(_tokens(text))
        best: tuple[float, int, str] | None = None
        for intent in intents:
            # Nearest example, or the intent's own vocabulary, whichever is closer.
            bags = [Counter(_tokens(example)) for example in intent.examples]
            bags.append(
                Counter(_tokens(" ".join([intent.name.replace("_", " "), intent.description, *intent.keywords])))
            )
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

    async def respond(self, request: AnswerRequest) -> ModelAnswer:
        started = time.perf_counter()
        await self._pause()
        specialist = request.specialist
        topic = (request.intent_description or request.intent.replace("_", " ")).strip().rstrip(".")
        subject = f" Assunto: {topic[:1].lower()}{topic[1:]}." if topic and request.intent != "fallback" else ""
        text = (
            f"{specialist.display_name} {OFFLINE_NOTICE}: recebi sua mensagem.{subject} "
            f'Você disse: "{request.text}". Vou tratar disso como {specialist.name}.'
        )
        return ModelAnswer(text=text, llm=self.name, model="offline", latency_ms=(time.perf_counter() - started) * 1000)


# --- OpenAI-compatible -----------------------------------------------------------


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


@lru_cache(maxsize=32)
def _chat_model(
    base_url: str, api_key: str, model: str, temperature: float | None, timeout: float, max_retries: int
) -> Any:
    """One client per configuration, reused so HTTP connections are pooled."""
    from langchain_openai import ChatOpenAI

    options: dict[str, Any] = {
        "model": model,
        "base_url": base_url,
        "api_key": api_key or "not-needed",
        "timeout": timeout,
        "max_retries": max_retries,
    }
    if temperature is not None:
        options["temperature"] = temperature
    return ChatOpenAI(**options)


class OpenAICompatibleModel(ModelProvider):
    name = "openai"

    @property
    def model(self) -> str:
        return self.profile.llm_model or settings.LLM_MODEL

    def client(self) -> Any:
        return _chat_model(
            settings.OPENAI_BASE_URL,
            settings.OPENAI_API_KEY,
            self.model,
            self.profile.llm_temperature,
            settings.LLM_TIMEOUT_SECONDS,
            settings.LLM_MAX_RETRIES,
        )

    async def classify(self, text: str, intents: tuple[IntentSpec, ...]) -> Classification | None:
        catalogue = "\n".join(
            f"- {intent.name}: {intent.description}"
            + (f" Examples: {'; '.join(intent.examples)}" if intent.examples else "")
            for intent in intents
        )
        runnable = self.client().with_structured_output(IntentChoice, method="function_calling")
        try:
            choice = await runnable.ainvoke(
                [("system", CLASSIFIER_PROMPT.format(catalogue=catalogue)), ("human", text)]
            )
        except Exception as exc:  # noqa: BLE001 — any client failure means "no decision"
            logger.warning("LLM classifier failed: %s", exc)
            return Classification(intent="", confidence=0.0, reason=f"Classifier error: {type(exc).__name__}")
        if not isinstance(choice, IntentChoice):
            return None
        return Classification(intent=choice.intent, confidence=choice.confidence, reason=choice.reason)

    async def respond(self, request: AnswerRequest) -> ModelAnswer:
        started = time.perf_counter()
        system = "\n\n".join(part for part in (request.profile.policy, request.specialist.prompt) if part)
        messages: list[tuple[str, str]] = [("system", system or f"You are {request.specialist.display_name}.")]
        messages.extend(("human" if role == "user" else "ai", content) for role, content in request.history)
        messages.append(("human", request.text))
        try:
            reply = await self.client().ainvoke(messages)
            text = reply.content if isinstance(reply.content, str) else str(reply.content)
            error = None
        except Exception as exc:  # noqa: BLE001 — the user gets a graceful answer, the error is recorded
            logger.warning("LLM call failed for %s: %s", request.specialist.name, exc)
            text, error = ERROR_ANSWER, f"{type(exc).__name__}: {exc}"
        return ModelAnswer(
            text=text,
            llm=self.name,
            model=self.model,
            latency_ms=(time.perf_counter() - started) * 1000,
            error=error,
        )


PROVIDERS: dict[str, type[ModelProvider]] = {
    OfflineModel.name: OfflineModel,
    OpenAICompatibleModel.name: OpenAICompatibleModel,
}


def reset_clients() -> None:
    """Forget pooled clients (after the endpoint settings changed)."""
    _chat_model.cache_clear()


def llm_configured() -> bool:
    return bool(settings.OPENAI_BASE_URL and settings.LLM_MODEL)


def provider_for(profile: ProfileSpec) -> ModelProvider:
    """The provider that answers for ``profile``: the endpoint when configured, else offline."""
    return PROVIDERS[OpenAICompatibleModel.name if llm_configured() else OfflineModel.name](profile)


def intent_classifier(profile: ProfileSpec):
    """The classifier step of the router for ``profile``."""
    provider = provider_for(profile)
    return provider.classify
