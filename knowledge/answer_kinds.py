"""What kind of answer a question asks for, and whether a passage holds one of that kind: pure text.

A question's interrogative phrase names the kind of its answer — "what time", "a que horas", "¿a qué hora?" a time
of day; "how long", "quanto tempo", "¿cuánto tarda?" a duration; "how much", "quanto custa", "¿cuánto cuesta?" a
price — and the common words the relevance bar leaves out (:mod:`agents.passages`) take it with them. Read here, as
question-answering systems read the expected answer type: the phrase is read as one word of the question, its
:data:`KINDS` mark, in place of its own content words ("time", "tempo", "tarda"), and a passage holds that word when
it holds an answer of that kind, by the language's words for it ("horário", "hours", "plazo") or by its shape ("8h",
"9 a.m.", "5 business days", "R$ 10"). The tables are each language's grammar, not any help centre's.

A passage's words (``knowledge.synonym_reading.passage_words``) hold, beside them, the marks its heading names and,
for each sentence of its text holding an answer of a kind, the mark joined to each of that sentence's words
(:func:`kinds_held`); :func:`kind_held` reads a question's mark against them. A mark is shorter than a content word
and of no letter, so no word of a text is read as one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import lru_cache

from agents.public import stems_of, word_keys
from common.text import normalize

TIME = "@h"  # a time of day: when something opens, closes, is served
LIVE = "@l"  # whether what is shown is live, or how late it is
DURATION = "@d"  # how long something takes or lasts
PRICE = "@$"  # what something costs
KIND_MARKS = frozenset({TIME, DURATION, PRICE, LIVE})


@dataclass(frozen=True)
class Kind:
    """One kind of answer: its ``mark``; how a question asks for it (``asked``: phrases of pt, en and es, folded,
    whole words); how a passage holds one: by one of its ``words`` (folded, whole) or by its ``shape`` (a regular
    expression on the text in lower case); ``verbs``: the words that ask for it with one of its phrases anywhere in
    the question, read as the phrase's ("a bolsa abre que horas?": what opens at a time of day)."""

    mark: str
    asked: tuple[str, ...]
    words: frozenset[str]
    shape: re.Pattern[str]
    verbs: frozenset[str] = frozenset()


# Number words the shapes read beside digits ("dois dias úteis", "two business days", "dos días hábiles").
_NUMBER = (
    r"(?:\d+(?:[.,]\d+)?|um|uma|dois|duas|tres|três|quatro|cinco|seis|sete|oito|nove|dez|quinze|vinte|trinta|"
    r"one|two|three|four|five|six|seven|eight|nine|ten|fifteen|twenty|thirty|"
    r"un|una|dos|cuatro|siete|ocho|nueve|diez|quince|veinte|treinta)"
)


def _phrases(*languages: str) -> tuple[str, ...]:
    """The phrases of each language's line (pt, en, es), separated by commas."""
    return tuple(phrase.strip() for line in languages for phrase in line.split(","))


def _words(line: str) -> frozenset[str]:
    """The words of ``line``, separated by spaces."""
    return frozenset(line.split())


KINDS = (
    Kind(
        TIME,
        asked=_phrases(
            "que horas, que hora, ate que horas, ate que hora, qual horario, qual o horario, quando abre, quando abrem,"
            " quando fecha, quando fecham",
            "what time, what hours, what are your hours, when do you open, when do you close, when does it open,"
            " when does it close, when are you open",
            "a que hora, hasta que hora, que horario, cual horario, cual es el horario, cuando abre, cuando abren,"
            " cuando cierra, cuando cierran",
        ),
        words=_words("horario horarios hours expediente"),
        shape=re.compile(
            r"\b\d{1,2}h(?:\d{2})?\b|\b\d{1,2}:\d{2}\b|\b\d{1,2}(?::\d{2})?\s?(?:a\.?m\b|p\.?m\b)|"
            r"\b24\s?(?:h|horas|hours)\b|\b24/7\b|\bmeio-dia\b|\bnoon\b|\bmediod[ií]a\b"
        ),
        verbs=_words("abre abrem abrir fecha fecham fechar open opens close closes abren cierra cierran cerrar"),
    ),
    Kind(
        DURATION,
        asked=_phrases(
            "quanto tempo, em quanto tempo, quantos dias, quantas horas, quantas semanas, quanto demora,"
            " demora quanto, leva quanto, qual o prazo, qual prazo",
            "how long, how much time, how many days, how many hours, how many weeks, how soon",
            "cuanto tiempo, cuanto tarda, cuanto tardan, cuanto demora, cuanto demoran, cuantos dias, cuantas horas,"
            " cuantas semanas, cual es el plazo, que plazo",
        ),
        words=_words("prazo prazos plazo plazos"),
        shape=re.compile(
            rf"\b{_NUMBER}\s(?:dias?|horas?|minutos?|semanas?|m[eê]s|meses|anos?|"
            r"days?|hours?|minutes?|weeks?|months?|years?|business days?|working days?|d[ií]as?|a[nñ]os?)\b"
        ),
    ),
    Kind(
        PRICE,
        asked=_phrases(
            "quanto custa, quanto custam, quanto e, quanto sai, quanto fica, quanto cobra, quanto cobram, quanto pago,"
            " quanto vou pagar, qual o valor, qual valor, qual o preco, qual preco",
            "how much, what does it cost, what is the price, whats the price, what is the fee, whats the fee,"
            " what is the cost, whats the cost",
            "cuanto cuesta, cuanto cuestan, cuanto sale, cuanto salen, cuanto cobran, cuanto vale, cuanto es,"
            " cuanto pago, cual es el precio, que precio, cual es el valor",
        ),
        words=_words(
            "preco precos price prices precio precios tarifa tarifas fee fees taxa taxas custa custo custos cost costs"
            " costo costos cuesta gratuito gratuita gratis"
        ),
        shape=re.compile(r"(?:r\$|us\$|\$|€|£)\s?\d|\d\s?(?:€|%)|\d\s(?:reais|d[oó]lares|dollars|euros|pesos)\b"),
    ),
    Kind(
        LIVE,  # "é em tempo real?": answered by how late it is ("atraso de 15 minutos", "delayed by 15 minutes")
        asked=_phrases(
            "em tempo real, tempo real, ao vivo", "real time, in real time, realtime", "en tiempo real, tiempo real"
        ),
        words=_words("atraso atrasada atrasado delay delayed lag retraso demora"),
        shape=re.compile(r"\b(?:tempo|tiempo) real\b|\breal[- ]?time\b|\bao vivo\b|\ben vivo\b"),
    ),
)

# A request for a recommendation in other words than a help centre's ("me indica", "vale a pena comprar…?", "should I
# buy…?", "¿me conviene…?") is read as the language's verb for it, by which a help centre says what it recommends or
# does not ("não recomenda a compra", "does not recommend buying", "no recomienda comprar"): a word of the question
# like its others, counted among those a passage holds, in place of the phrase's own words. By the language's word,
# pt, en, es; "should i" alone asks whether to do something, "should i pay by pix?" too: that is asking for advice.
# Not "compensa" ("is it worth it"): a payment "compensa" when the bank clears it, a help centre's word for that.
ADVICE = {
    "recomenda": _phrases(
        "vale a pena, me indica, me indique, voce indica, vc indica, o que voce indica, o que vc indica, me aconselha,"
        " voce aconselha, vc aconselha"
    ),
    "recommend": _phrases(
        "should i, should we, is it worth, is it a good idea to, is it a good time to, would you advise, do you advise,"
        " any advice on, what would you advise"
    ),
    "recomienda": _phrases(
        "vale la pena, me conviene, conviene, me aconsejas, me aconseja, me recomendas, me recomendaria, deberia"
    ),
}
_PHRASE_READ = {phrase: word for word, phrases in ADVICE.items() for phrase in phrases}
# The phrases of every kind and of advice as one expression, the longest first, each from a word's start to a word's
# end (the question's words folded, one space between): "how much time" a duration before "how much" a price.
_PHRASE_KIND = {phrase: kind.mark for kind in KINDS for phrase in kind.asked}
_PHRASES = "|".join(re.escape(phrase) for phrase in sorted({*_PHRASE_KIND, *_PHRASE_READ}, key=len, reverse=True))
_ASKED = re.compile(rf"(?:^|(?<= ))({_PHRASES})(?= |$)")
KINDS_READ_KEPT = 1024  # questions whose kind a process keeps, as agents.passages keeps their words
# Passages' headings and texts whose kinds a process keeps: two parts a passage, of as many passages as
# knowledge.synonym_reading keeps the words of.
PARTS_READ_KEPT = 1024


@dataclass(frozen=True)
class Asked:
    """What ``question`` asks for: the :data:`KINDS` marks of its interrogative phrases, in order, the words of
    those phrases and of its requests for advice (folded), which the marks and ``read`` stand for, and the words its
    requests for advice are read as (:data:`ADVICE`)."""

    marks: tuple[str, ...]
    words: frozenset[str]
    read: tuple[str, ...] = ()


NOTHING_ASKED = Asked((), frozenset())


@lru_cache(maxsize=KINDS_READ_KEPT)
def kinds_asked(question: str) -> Asked:
    """The kinds of answer ``question`` asks for (:data:`KINDS`), read on its folded words: "a loja abre que horas?"
    a time of day, "how long does a refund take?" a duration, "¿cuánto cuesta el envío?" a price; and the word its
    request for advice is read as (:data:`ADVICE`): "vale a pena comprar?" "recomenda"."""
    marks: list[str] = []
    read: list[str] = []
    words: set[str] = set()
    advice: set[str] = set()
    for found in _ASKED.finditer(normalize(question)):
        phrase = found.group(1)
        mark = _PHRASE_KIND.get(phrase)
        if mark is None:
            read += [] if _PHRASE_READ[phrase] in read else [_PHRASE_READ[phrase]]
            advice.update(phrase.split())
            continue
        if mark not in marks:
            marks.append(mark)
        words.update(phrase.split())
    if marks:  # "how much should I pay?", "¿a qué hora debería llegar?": a modal verb, no request for advice
        read = []
    else:
        words |= advice
    if marks:
        folded = set(normalize(question).split())
        words.update(verb for kind in KINDS if kind.mark in marks for verb in kind.verbs & folded)
    return Asked(tuple(marks), frozenset(words), tuple(read)) if words else NOTHING_ASKED


def asked_with_kinds(asked: list[str], question: str) -> list[str]:
    """The words of ``question`` the relevance bar counts (``asked``, :func:`agents.passages.asked_words`), the
    words of its interrogative phrases read as the kinds of answer they ask for (:func:`kinds_asked`) and those of
    its requests for advice as the word they stand for (:data:`ADVICE`): those words left out, the words read for
    them, then the kinds' marks, after the others."""
    kinds = kinds_asked(question)
    if not kinds.words:
        return asked
    kept = [word for word in asked if word not in kinds.words]
    return kept + [word for word in (*kinds.read, *kinds.marks) if word not in kept]


def kind_words(marks: tuple[str, ...]) -> tuple[str, ...]:
    """The words of the kinds ``marks`` (:data:`KINDS`), which a search looks for beside the question's own: the
    passages saying "horário" or "prazo" are found for "que horas?" or "quanto tempo?", as a synonym's are."""
    return tuple(word for kind in KINDS if kind.mark in marks for word in kind.words)


_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")


def kinds_in(text: str) -> frozenset[str]:
    """The marks of the kinds of answer ``text`` holds (:data:`KINDS`): by a word of the kind's (folded, whole) or
    by its shape."""
    lower = text.casefold()
    words = set(normalize(text).split())
    held = set()
    for kind in KINDS:
        if not kind.words.isdisjoint(words) or kind.shape.search(lower):
            held.add(kind.mark)
    return frozenset(held)


@lru_cache(maxsize=PARTS_READ_KEPT)
def kinds_held(part: str, *, heading: bool) -> frozenset[str]:
    """What a passage's ``part`` holds of the kinds of answer (:data:`KINDS`), among its words
    (:func:`agents.passages.stems_of`): a heading, the marks of the kinds it names ("Prazos de entrega", "Opening
    hours"), for the whole section; a text, for each sentence (or line: a table's row) holding one, the mark joined
    to each of that sentence's words' entries (:func:`sentence_entry`) — an answer of the kind is an answer to the
    question only beside what the question is about: "within 5 working days" of a sentence on an older bill's copy
    does not say how long porting a number takes."""
    marks = kinds_in(part) if part else frozenset()
    if heading or not marks:
        return marks
    held: set[str] = set()
    for sentence in _SENTENCES.split(part):
        marks = kinds_in(sentence)
        if marks:
            entries = stems_of(sentence)
            held.update(sentence_entry(mark, entry) for mark in marks for entry in entries)
    return frozenset(held)


def sentence_entry(mark: str, entry: str) -> str:
    """A sentence's word ``entry`` (of :func:`agents.passages.stems_of`) beside an answer of the kind ``mark``."""
    return f"{mark}{entry}"


def kind_held(mark: str, words: Sequence[str], stems: AbstractSet[str]) -> bool:
    """A text of ``stems`` (:func:`agents.passages.stems_of` with :func:`kinds_held`) holds an answer of the kind
    ``mark`` to a question of ``words``: its heading names the kind, or a sentence of it holding one answers beside
    one of the question's own words (:func:`agents.passages.word_keys`; a name or a code as it is)."""
    if mark in stems:
        return True
    for word in words:
        if word in KIND_MARKS:
            continue
        keys = word_keys(word) if len(word) >= 4 else (word,)
        if any(sentence_entry(mark, key) in stems for key in keys):
            return True
    return False
