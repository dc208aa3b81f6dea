"""Whether a message reads as the answer to a yes/no question: yes, no, or neither, and which words decided.

The platform asks yes/no questions in three places: the permission gate ("Posso prosseguir?"), a state policy's
flow ("Confirma o pagamento?") and goal mode's "is this what you want?". The answer is read here, with the
profile's own yes and no words (``confirmation_words``, ``denial_words``), in Portuguese, English and Spanish.
Pure: no ORM, no settings.

The rules, in the order they apply:

1. What is read (the *span*) is the whole message when it is short (:data:`SHORT_WORDS` words or fewer), else its
   first clause (up to the first ``,`` ``;`` ``:`` ``.`` ``!`` ``?`` or dash). Whatever words follow a reply do not
   change it: "sim, pode diagnosticar", "yes, go ahead and check it", "dale, revisa".
2. A phrase of :data:`UNSURE_PHRASES` in the span makes it neither ("não sei", "I don't know", "no sé",
   "talvez"), whatever yes or no words it holds.
3. A reply word counts where it *leads* the span ("claro, pode seguir") or, in a short span, where it *ends* it
   ("pode verificar sim", "mejor no", "agora não"). A word inside a longer sentence does not count: "você pode me
   dizer o valor da fatura" holds "pode" and is no grant.
4. A clause that asks ("...?", "¿...") is never a reply: "can you tell me my balance?", "¿puedes decirme el
   saldo?", "sim?".
5. A refusal wins over agreement: a no word that leads or ends the span makes it a no ("não pode", "claro que
   não", "no, no hace falta").

Words are matched as the keywords are (:func:`common.text.normalize`: case and accents ignored, whole words), the
longest phrase first, so "no problem" (a yes word) is not read as "no", and "não sei" not as "não". A word that is
another word in one of the three languages (:data:`HOMOGRAPHS`: Portuguese "no" is "in the", Spanish "si" is
"if") leads only when it stands on its own — its own clause, or followed by a reply word of its kind — unless the
message is in another language: "No meu celular aparece sem serviço" is no refusal, "no quiero" is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from common.language import detect_language
from common.text import normalize

YES, NO = "yes", "no"
_UNSURE = "unsure"

# A span of this many words or fewer is read whole, and a reply word may end it as well as lead it.
SHORT_WORDS = 4
# ReplyWords.read_past_fillers: opening clauses of this many words or fewer, this many at most, are set aside when the
# message does not read as a reply with them.
FILLER_WORDS = 3
FILLER_CLAUSES = 2
_LAST_CLAUSE = re.compile(r"[,;:.!—–-]\s*((?:[^\s,;:.!?—–-]+\s*){1,2})[.!]*\s*$")
_FILLER = re.compile(rf"^\s*(?:[^\s,;:.!?—–-]+\s*){{1,{FILLER_WORDS}}}[,;:.!—–-]+\s*")

# The user cannot tell: never a yes or a no, whatever reply words they hold. The platform's own, not a profile's:
# they are how the three languages say "I don't know", not a choice of the business.
UNSURE_PHRASES = (
    # Portuguese
    "não sei",
    "sei lá",
    "talvez",
    "não tenho certeza",
    "não tenho ctz",
    "vou pensar",
    # English
    "i don't know",
    "don't know",
    "dunno",
    "not sure",
    "maybe",
    "perhaps",
    "let me think",
    # Spanish
    "no sé",
    "no lo sé",
    "tal vez",
    "quizás",
    "quizá",
    "a lo mejor",
    "no estoy seguro",
    "no estoy segura",
    "lo pienso",
)

# A reply word that is another word in one language, by its normalised form: (that language, the spelling that is
# the other word). "sí" with its accent is only ever a yes; "si" may be "if".
HOMOGRAPHS = {"no": ("pt", "no"), "si": ("es", "si")}

# Clause breaks: punctuation, a line break, a dash between spaces. "¿" and "¡" open a clause.
_BREAK = re.compile(r"[,;:.!?…\n¿¡]+|\s[-–—]+\s")
_EDGE_PUNCTUATION = "\"'“”‘’«»()[]{}*_~"


@dataclass(frozen=True)
class Reply:
    """How a message reads as an answer: ``reads_as`` is :data:`YES`, :data:`NO` or ``None`` (neither); ``words``
    the phrase that decided, as the profile's list spells it (an unsure phrase for neither, or ""); ``rest`` what
    the message says after the part read (its other clauses; "" when it was read whole)."""

    reads_as: str | None = None
    words: str = ""
    rest: str = ""

    def __bool__(self) -> bool:
        return self.reads_as is not None

    def as_metadata(self) -> dict[str, Any]:
        """What a decision records of a reply (``metadata["reply"]``)."""
        return {"reads_as": self.reads_as, "words": self.words}


NEITHER = Reply()


@dataclass(frozen=True)
class ReplyWords:
    """A profile's yes and no words (its ``confirmation_words`` and ``denial_words``)."""

    yes: tuple[str, ...] = ()
    no: tuple[str, ...] = ()

    def read(self, text: str) -> Reply:
        return reply_read(text, yes_words=self.yes, no_words=self.no)

    def read_past_fillers(self, text: str) -> Reply:
        """:meth:`read`, and when the message reads as neither, read again past each short opening clause that says
        nothing ("bom, pode rodar o diagnóstico", "whatever, yes cancel it", "entendido. sí, ya está pagado"): up to
        :data:`FILLER_CLAUSES` clauses of :data:`FILLER_WORDS` words or fewer are set aside. What asks or doubts
        stays neither, as :meth:`read` says."""
        reply = self.read(text)
        rest = text
        for _ in range(FILLER_CLAUSES):
            cut = _FILLER.match(rest)
            after = rest[cut.end() :] if cut is not None else ""
            if reply.reads_as == YES and after.strip():
                # "ok. todavía no he pagado": an opening "ok" acknowledges; a refusal after it is the answer.
                later = self.read(after)
                return later if later.reads_as == NO else reply
            if reply or reply.words or not after.strip():  # a yes or a no; unsure, which no later clause undoes
                break
            rest = after
            reply = self.read(rest)
        if not reply and not reply.words:
            # "you can check the line, yes": a closing clause of a word or two that reads as a reply answers.
            last = _LAST_CLAUSE.search(text)
            if last is not None:
                reply = self.read(last.group(1))
        return reply


NO_REPLY_WORDS = ReplyWords()  # reads every message as neither


@dataclass(frozen=True)
class _Clause:
    tokens: tuple[str, ...]  # normalised words
    first_word: str  # the first word as written (case folded, accents kept)
    words: int  # words as written
    question: bool
    end: int  # where the clause ends in the message (its break included)


@dataclass(frozen=True)
class _Match:
    start: int  # token positions in the span
    end: int
    clause: int  # the clause of the span it is in
    kind: str
    phrase: str


Phrases = dict[str, tuple[tuple[tuple[str, ...], str, str], ...]]


@lru_cache(maxsize=64)
def _phrases(yes_words: tuple[str, ...], no_words: tuple[str, ...]) -> Phrases:
    """Every phrase by its first normalised word, longest first; a phrase in two lists is unsure before no before
    yes (a refusal wins over agreement)."""
    kinds: dict[tuple[str, ...], tuple[str, str]] = {}
    for kind, phrases in ((YES, yes_words), (NO, no_words), (_UNSURE, UNSURE_PHRASES)):
        for phrase in phrases:
            tokens = tuple(normalize(phrase).split())
            if tokens and kinds.get(tokens, ("",))[0] != kind:  # a list's first spelling names it ("não", not "nao")
                kinds[tokens] = (kind, phrase)
    by_first: dict[str, list[tuple[tuple[str, ...], str, str]]] = {}
    for tokens, (kind, phrase) in kinds.items():
        by_first.setdefault(tokens[0], []).append((tokens, kind, phrase))
    return {first: tuple(sorted(entries, key=lambda entry: -len(entry[0]))) for first, entries in by_first.items()}


def _clauses(text: str) -> list[_Clause]:
    """The message's clauses that hold a word, in order."""
    clauses: list[_Clause] = []
    position, opened = 0, False
    for found in [*_BREAK.finditer(text), None]:
        raw = text[position : found.start() if found else len(text)]
        mark = found.group() if found else ""
        tokens = tuple(normalize(raw).split())
        if tokens:
            first = next((word.strip(_EDGE_PUNCTUATION) for word in raw.split() if word.strip(_EDGE_PUNCTUATION)), "")
            clauses.append(
                _Clause(
                    tokens=tokens,
                    first_word=first.casefold(),
                    words=len(raw.split()),
                    question=opened or "?" in mark,
                    end=found.end() if found else len(text),
                )
            )
            opened = False
        if "¿" in mark:
            opened = True
        if found is None:
            break
        position = found.end()
    return clauses


def _matches(clauses: list[_Clause], phrases: Phrases) -> list[_Match]:
    """The phrases found in ``clauses``, left to right, the longest at each place, never across a clause break."""
    found: list[_Match] = []
    offset = 0
    for index, clause in enumerate(clauses):
        tokens, at = clause.tokens, 0
        while at < len(tokens):
            for candidate, kind, phrase in phrases.get(tokens[at], ()):
                if tokens[at : at + len(candidate)] == candidate:
                    found.append(_Match(offset + at, offset + at + len(candidate), index, kind, phrase))
                    at += len(candidate)
                    break
            else:
                at += 1
        offset += len(tokens)
    return found


def _stands_alone(match: _Match, clauses: list[_Clause], found: list[_Match], text: str) -> bool:
    """A leading reply word that may be another word (:data:`HOMOGRAPHS`) is read as a reply only on its own."""
    tokens = normalize(match.phrase).split()
    homograph = HOMOGRAPHS.get(tokens[0]) if len(tokens) == 1 else None
    clause = clauses[match.clause]
    if homograph is None or clause.first_word != homograph[1] or match.end == len(clause.tokens):
        return True
    if any(other.start == match.end and other.kind == match.kind for other in found):  # "si claro", "no no"
        return True
    return detect_language(text) != homograph[0]


def reply_read(text: str, *, yes_words: Sequence[str], no_words: Sequence[str]) -> Reply:
    """How ``text`` reads as the answer to a yes/no question, with these yes and no words (the module's rules)."""
    clauses = _clauses(text)
    if not clauses:
        return NEITHER
    if sum(clause.words for clause in clauses) > SHORT_WORDS:
        clauses = clauses[:1]
    found = _matches(clauses, _phrases(tuple(yes_words), tuple(no_words)))
    unsure = next((match for match in found if match.kind == _UNSURE), None)
    if unsure is not None:
        return Reply(None, unsure.phrase)
    replies = [match for match in found if match.kind in (YES, NO) and not clauses[match.clause].question]
    size = sum(len(clause.tokens) for clause in clauses)
    lead = next((match for match in replies if match.start == 0), None)
    if lead is not None and not _stands_alone(lead, clauses, found, text):
        lead = None
    short = sum(clause.words for clause in clauses) <= SHORT_WORDS
    tail = replies[-1] if short and replies and replies[-1].end == size else None
    decided = [match for match in (lead, tail) if match is not None]
    if not decided:
        return NEITHER
    chosen = next((match for match in decided if match.kind == NO), decided[0])
    return Reply(chosen.kind, chosen.phrase, text[clauses[-1].end :].strip())
