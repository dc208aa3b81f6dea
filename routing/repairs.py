"""Conversation repair: what a message says about the conversation itself rather than a new request — drop the
current flow, correct a value given earlier, say that again, skip the question, "I already told you" — and the marks
of a side question ("antes disso", "by the way") and of a return ("voltando ao pagamento:", "back to the payment:").

The patterns' phrases are the profile's (``cancel_words``, ``correction_words``, ``repeat_words``, ``skip_words``,
``already_told_words``: editable, versioned, with built-in defaults in Portuguese, English and Spanish); the marks of
a side question and of a return are the platform's. Pure: no ORM, no settings.

The rules, in the order they apply:

1. Phrases are matched as keywords are (:func:`common.text.normalize`: case and accents ignored, whole words), the
   longest first.
2. A cancel, repeat, skip or "already told" phrase counts in the message's *lead* — its first :data:`LEAD_WORDS`
   words: "never mind, cancel that", "ah, esquece", "olvídalo, ya no hace falta". Deeper inside a longer message it is
   part of a request ("quero cancelar, mas esquece a multa" is no cancel of the flow).
3. A correction phrase counts anywhere in the first :data:`CORRECTION_WORDS` words ("o pedido é o P200, digitei
   errado"), because customers say the new value first as often as the apology.
4. Where two patterns are found, the order of :data:`PATTERNS` decides: a cancel wins (the customer wants out).
5. A return mark leads the message and is cut from it before it is read again ("voltando ao pagamento: já paguei" is
   read as "já paguei"); a side-question mark leads it and is kept (the side question is routed with it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from common.text import fold, normalize
from routing.replies import YES, Reply

CANCEL, CORRECT, REPEAT, SKIP, ALREADY_TOLD = "cancel", "correct", "repeat", "skip", "already_told"
PATTERNS = (CANCEL, CORRECT, REPEAT, SKIP, ALREADY_TOLD)  # the first found wins
LEAD_WORDS = 8
# A one-word phrase ("próxima", "skip", "siguiente") is the repair in a short message, not inside a longer question:
# "a próxima fatura vem mais cara?" asks about the next bill.
ONE_WORD_QUESTION_WORDS = 3
CORRECTION_WORDS = 14
SHORT_SKIP_WORDS = 6  # a skip this short passes a yes/no question even past a yes ("ok, pula essa")

# A side question announced as such: the message is about something else, the flow waits.
DIGRESSION_MARKS = (
    "antes disso",
    "mas antes",
    "antes me",
    "antes de mais nada",
    "antes de continuar",
    "aproveitando",
    "aproveito",
    "pergunta rápida",
    "só uma dúvida",
    "uma dúvida",
    "outra coisa",
    "mudando de assunto",
    "aliás",
    "by the way",
    "btw",
    "before that",
    "but first",
    "but before",
    "before i do",
    "before we go on",
    "quick question",
    "side question",
    "while i have you",
    "one more thing",
    "another thing",
    "on another note",
    "hold on",
    "meanwhile",
    "in the meantime",
    "enquanto isso",
    "nesse meio tempo",
    "mientras tanto",
    "entretanto",
    "wait a second",
    "just a sec",
    "espera aí",
    "peraí",
    "pera aí",
    "calma aí",
    "un momento",
    "espera un momento",
    "antes de eso",
    "pero antes",
    "antes dime",
    "antes explícame",
    "antes de seguir",
    "por cierto",
    "otra cosa",
    "una pregunta",
    "cambiando de tema",
    "aprovechando",
    "aprovecho",
    "pregunta rápida",
)
# A return to the flow that waits: cut before the message is read as the flow's reply.
RETURN_MARKS = (
    r"(voltando|retomando|de volta)( ao| a| à| para o| pro| para a| pra)?",
    r"(back to|returning to|going back to)( the| my)?",
    r"(volviendo|regresando|retomando)( al| a la| a lo| a)?",
)
_RETURN = re.compile(
    r"^\s*(?:" + "|".join(RETURN_MARKS) + r")\s+[\w\sçãõáéíóúâêô-]{0,40}?\s*[:,—–-]\s*", re.IGNORECASE | re.UNICODE
)


@dataclass(frozen=True)
class RepairWords:
    """A profile's phrases of each repair pattern."""

    cancel: tuple[str, ...] = ()
    correct: tuple[str, ...] = ()
    repeat: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    already_told: tuple[str, ...] = ()

    def read(self, text: str) -> Repair | None:
        """The repair pattern ``text`` reads as, with the phrase that decided; ``None`` when none."""
        return _read(self, text)

    def phrases(self, pattern: str) -> tuple[str, ...]:
        return tuple(getattr(self, pattern))


@dataclass(frozen=True)
class Repair:
    pattern: str
    phrase: str

    def as_metadata(self) -> dict[str, str]:
        return {"pattern": self.pattern, "phrase": self.phrase}


@lru_cache(maxsize=64)
def _phrase_matcher(phrases: tuple[str, ...]) -> re.Pattern[str] | None:
    """One alternation over the normalised phrases, longest first, on word boundaries."""
    words = sorted({normalize(phrase) for phrase in phrases if normalize(phrase)}, key=len, reverse=True)
    if not words:
        return None
    return re.compile(r"(?<!\w)(?:" + "|".join(re.escape(word) for word in words) + r")(?!\w)")


def _lead(normalised: str, words: int) -> str:
    return " ".join(normalised.split()[:words])


@lru_cache(maxsize=512)
def _read(words: RepairWords, text: str) -> Repair | None:
    normalised = normalize(text)
    for pattern in PATTERNS:
        matcher = _phrase_matcher(words.phrases(pattern))
        if matcher is None:
            continue
        span = _lead(normalised, CORRECTION_WORDS if pattern == CORRECT else LEAD_WORDS)
        found = matcher.search(span)
        if found is not None and not _one_word_in_a_question(found.group(0), normalised, text):
            return Repair(pattern, found.group(0))
    return None


def _one_word_in_a_question(phrase: str, normalised: str, text: str) -> bool:
    return " " not in phrase and ("?" in text or "¿" in text) and len(normalised.split()) > ONE_WORD_QUESTION_WORDS


def skips_the_question(repair: Repair | None, reply: Reply, text: str) -> bool:
    """Whether ``text`` passes a yes/no question (a permission) rather than answering it: it reads as a skip, and
    as no yes — or its yes is the skip's own word ("pode pular esse teste"), or it is short ("sure, skip it"). A yes
    that goes on ("sim, pode rodar, e na próxima vez nem precisa perguntar") answers the question."""
    if repair is None or repair.pattern != SKIP:
        return False
    if reply.reads_as != YES:
        return True
    own = f" {normalize(reply.words)} " in f" {repair.phrase} "
    return own or len(text.split()) <= SHORT_SKIP_WORDS


def phrase_span(text: str, phrase: str) -> tuple[int, int] | None:
    """Where ``phrase`` (as :func:`common.text.normalize` writes it) stands in ``text``, as indices of ``text``;
    ``None`` when it is not found or the text's folding changes its length (then no span can be told)."""
    folded = fold(text)
    if len(folded) != len(text) or not phrase:
        return None
    pattern = r"(?<!\w)" + r"\W+".join(re.escape(word) for word in phrase.split()) + r"(?!\w)"
    found = re.search(pattern, folded)
    return (found.start(), found.end()) if found else None


def without_phrase(text: str, phrase: str) -> str:
    """``text`` with ``phrase`` cut out ("ah voltou sozinho, pode esquecer" without "pode esquecer"); ``text`` when
    it cannot be told where the phrase stands."""
    span = phrase_span(text, phrase)
    return text if span is None else f"{text[: span[0]]}{text[span[1] :]}"


def after_phrases(text: str, phrases: Sequence[str]) -> str:
    """What ``text`` says after the last of ``phrases`` it holds ("errei, eu queria dizer VALE3" → "VALE3"), ``""``
    when nothing follows or none can be placed."""
    ends = [span[1] for phrase in phrases if (span := phrase_span(text, normalize(phrase))) is not None]
    return text[max(ends) :].strip(" ,;:.-—–") if ends else ""


def marks_digression(text: str) -> str:
    """The side-question mark that leads ``text`` (its first :data:`LEAD_WORDS` words), or ``""``."""
    matcher = _phrase_matcher(DIGRESSION_MARKS)
    assert matcher is not None
    found = matcher.search(_lead(normalize(text), LEAD_WORDS))
    return found.group(0) if found else ""


def return_cut(text: str) -> tuple[str, str]:
    """``text`` without the return mark that leads it ("voltando ao pagamento: já paguei" → "já paguei"), and the
    mark; ``(text, "")`` when it has none or nothing follows it."""
    found = _RETURN.match(text)
    if found is None or not text[found.end() :].strip():
        return text, ""
    return text[found.end() :], found.group(0).strip()


def repair_words(mapping: Mapping[str, Sequence[str]]) -> RepairWords:
    """The repair phrases of a profile's settings (``cancel_words`` …), as the router reads them."""
    return RepairWords(
        cancel=tuple(mapping.get("cancel_words", ())),
        correct=tuple(mapping.get("correction_words", ())),
        repeat=tuple(mapping.get("repeat_words", ())),
        skip=tuple(mapping.get("skip_words", ())),
        already_told=tuple(mapping.get("already_told_words", ())),
    )
