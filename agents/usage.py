"""Token usage of a turn's model calls: what each model reported (langchain's ``usage_metadata``), added up by kind
of call and model.

The specialist runtime counts its own calls on its outcome (a plan's step on a Celery worker brings them back with
its partial); every other model call of a turn — the classifier, the supervisor's synthesis and review, the LLM
judge, goal mode's reading, the conversation's summary — records its reply with :func:`usage_record` into the turn's
:class:`TurnUsage`, which the graph makes current for the turn (:func:`usage_counting`). A call made outside a turn
(the admin's route preview) is counted nowhere.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

KIND_ANSWER = "answer"  # a specialist's tool loop, goal mode's written answer
KIND_ROUTING = "routing"  # the router's LLM classifier
KIND_SYNTHESIS = "synthesis"  # the supervisor's consolidation by the model
KIND_REVIEW = "review"  # the supervisor's coverage check
KIND_JUDGE = "judge"  # the LLM judge
KIND_GOAL = "goal"  # goal mode's reading of the goal and entities
KIND_MEMORY = "memory"  # the conversation's running summary (conversations.memory.summary)
KINDS = (KIND_ANSWER, KIND_ROUTING, KIND_SYNTHESIS, KIND_REVIEW, KIND_JUDGE, KIND_GOAL, KIND_MEMORY)

CHARS_PER_TOKEN = 4


def text_tokens(text: str) -> int:
    """The offline model's count of a text's tokens: one per four characters, rounded up (about what a BPE
    tokenizer gives for English; deterministic, no tokenizer needed)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


def reply_tokens(message: Any) -> tuple[int, int]:
    """``(input_tokens, output_tokens)`` a model's reply reports; ``(0, 0)`` when it reports none."""
    usage = getattr(message, "usage_metadata", None)
    if not usage:
        return 0, 0
    return int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)


class TurnUsage:
    """Tokens per (kind, model): ``[calls, prompt_tokens, completion_tokens]``, in the order first recorded."""

    __slots__ = ("calls",)

    def __init__(self) -> None:
        self.calls: dict[tuple[str, str], list[int]] = {}

    def add(self, kind: str, model: str, prompt_tokens: int, completion_tokens: int, calls: int = 1) -> None:
        counted = self.calls.get((kind, model))
        if counted is None:
            self.calls[(kind, model)] = [calls, prompt_tokens, completion_tokens]
        else:
            counted[0] += calls
            counted[1] += prompt_tokens
            counted[2] += completion_tokens

    def merged(self, other: TurnUsage) -> TurnUsage:
        total = TurnUsage()
        for usage in (self, other):
            for (kind, model), (calls, prompt, completion) in usage.calls.items():
                total.add(kind, model, prompt, completion, calls)
        return total

    @property
    def prompt_tokens(self) -> int:
        return sum(counted[1] for counted in self.calls.values())

    @property
    def completion_tokens(self) -> int:
        return sum(counted[2] for counted in self.calls.values())

    def answering_model(self) -> str:
        """The model of the turn's first answer call, else of its first call of any kind ("" without calls)."""
        models = [model for kind, model in self.calls if kind == KIND_ANSWER] or [model for _, model in self.calls]
        return models[0] if models else ""

    def as_dict(self) -> dict[str, Any]:
        """``metadata["usage"]``: the turn's totals and one entry per kind of call and model."""
        prompt, completion = self.prompt_tokens, self.completion_tokens
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "model": self.answering_model(),
            "calls": [
                {"kind": kind, "model": model, "calls": calls, "prompt_tokens": p, "completion_tokens": c}
                for (kind, model), (calls, p, c) in self.calls.items()
            ],
        }


def other_models(usage: dict[str, Any]) -> bool:
    """Whether some calls of a turn's ``metadata["usage"]`` went to another model than the one that answered (a
    routing model of its own, a profile's answering model beside the platform's judge): their tokens are priced
    at their own model's price (:func:`conversations.selectors.usage_by_day`)."""
    return any(call["model"] != usage["model"] for call in usage["calls"])


_current: ContextVar[TurnUsage | None] = ContextVar("turn_usage", default=None)


@contextmanager
def usage_counting(usage: TurnUsage) -> Iterator[TurnUsage]:
    """Within the block (and the tasks it starts), :func:`usage_record` adds to ``usage``."""
    token = _current.set(usage)
    try:
        yield usage
    finally:
        _current.reset(token)


def usage_record(kind: str, model: str, message: Any) -> None:
    """Add what ``message`` (a model's reply) reports to the current turn's usage, under ``kind`` and ``model``."""
    usage = _current.get()
    if usage is not None:
        usage.add(kind, model, *reply_tokens(message))
