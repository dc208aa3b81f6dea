"""The Snowball stems of a word in the platform's languages: what the relevance bar and the knowledge search on SQLite
compare words by, beside their first letters.

PostgreSQL's ``portuguese``, ``english`` and ``spanish`` text search configurations stem with the Snowball algorithms;
:func:`word_stems` runs the same three (the ``snowballstemmer`` package, pure Python) on a folded word (case and
accents aside, as customers type and as the bar compares), so that *billing* is *bill* and *troco* is *troca* on every
engine. A word is stemmed in the three languages whatever the question's: the bar reads a question against passages
of any language, as it reads the common words of all three. A stem costs tens of microseconds: each word's are kept
(:data:`STEMS_KEPT`), and the stemmers, which hold their word while they run, take turns.

Beside its own, a word has the stems of its bases (:func:`word_bases`), which its suffix leaves and the stemmers do not
reach: Portuguese and Spanish write a quality's intensive with a suffix (*lentíssimo*, *lentísimo*: very slow), which
the stemmers keep (``lentisim``), and a short root's *-ário* (*horário*, ``horari``) is no longer its first letters
(*horas*, ``hor``); English writes a verb's noun with *-ment* (*payment*, *pay*) and a participle's negation with
*un-* (*unpaid*, *paid*). A word of four letters or more holds a word of three its English stem is (:func:`short_stems`:
*buying* holds *buy*).
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

import snowballstemmer

STEMMED_LANGUAGES = ("portuguese", "english", "spanish")
STEMS_KEPT = 100_000  # words whose stems a process keeps (a word and its stems: a few hundred bytes)
_STEMMERS = tuple(snowballstemmer.stemmer(language) for language in STEMMED_LANGUAGES)
_ENGLISH = _STEMMERS[STEMMED_LANGUAGES.index("english")]
_TURNS = threading.Lock()
# What a word's bases are (:func:`word_bases`): (ending of a folded word, what the base writes instead, the fewest
# letters the base keeps before it), longest endings first. Portuguese's and Spanish's intensives (-íssimo, -ísimo and
# their feminines and plurals) are their adjective's superlative, its ending written again (``lentisima`` → ``lenta``);
# the nouns and adjectives of -ário, -ario (RSLP's noun step, Orengo and Huyck's Portuguese stemmer, removes it;
# Snowball's lists have no such suffix) leave their root (``horario`` → ``hor``, as ``horas`` stems).
_REDUCTIONS = (
    ("issimos", "os", 3), ("issimas", "as", 3), ("isimos", "os", 3), ("isimas", "as", 3),
    ("issimo", "o", 3), ("issima", "a", 3), ("isimo", "o", 3), ("isima", "a", 3),
    ("arios", "", 3), ("arias", "", 3), ("ario", "", 3), ("aria", "", 3),
)  # fmt: skip
# Spanish's stem-changing verbs and their nouns write their root's stressed *o* as *ue* (*resolver*, *resuelve*;
# *costar*, *cuesta*; *probar*, *prueba*), which the stemmers keep (``resuelv``, ``resolv``): a word with *ue* after a
# consonant (not the silent *u* of *que*, *gue*) and before one that does not end it also has the base with *o*.
_DIPHTHONG = re.compile(r"(?<=[b-df-hj-np-tv-z])(?<![qg])ue(?=[b-df-hj-np-tv-z][a-z])")
# English's nouns of an action in -ment (*payment*, *shipment*, *agreement*) have their verb as a base (*pay*, *ship*,
# *agree*), which the English stemmer keeps apart (``payment``): three letters or more before it (not *moment*;
# *comment*'s *com* is a stop word, which no question counts). What is left of a noun of no verb is no word a text
# writes (*docu* of *document*), or seldom (*state* of *statement*).
_MENT = re.compile(r"^([a-z]{3,})ments?$")
# English's un- before a participle or an adjective (*unpaid*, *unavailable*, *unplug*) has the word it negates as a
# base (*paid*, *available*, *plug*): four letters or more after it (not *under*, *until*), and no *i* next (*universe*,
# *unique*, *united*, *union*, Portuguese's *unidade* and *união*, Spanish's *único*: words of *uni-*) but in *in*,
# *im*, *ir* (*uninstall*, *unimportant*).
_UN = re.compile(r"^un((?!i)[a-z]{4,}|i[mnr][a-z]{2,})$")
BASES_KEPT = 100_000  # words whose bases a process keeps, as it keeps their stems


@lru_cache(maxsize=BASES_KEPT)
def word_bases(word: str) -> tuple[str, ...]:
    """The bases of ``word`` (folded) its suffixes leave (:data:`_REDUCTIONS`): ``lentisimo`` → (``lento``,); its
    root's *o* written as a stressed *ue* (:data:`_DIPHTHONG`): ``resuelve`` → (``resolve``,); English's verb of a
    noun in -ment (:data:`_MENT`: ``payment`` → (``pay``,)) and the word an un- negates (:data:`_UN`: ``unpaid`` →
    (``paid``,))."""
    bases = [_DIPHTHONG.sub("o", word, count=1)] if "ue" in word else []
    if (verb := _MENT.match(word)) or (verb := _UN.match(word)):
        bases.append(verb.group(1))
    for ending, base_ending, fewest in _REDUCTIONS:
        if word.endswith(ending) and len(word) - len(ending) >= fewest:
            bases.append(word[: len(word) - len(ending)] + base_ending)
            break
    return tuple(base for base in bases if base != word)


@lru_cache(maxsize=STEMS_KEPT)
def word_stems(word: str) -> frozenset[str]:
    """The stems of ``word`` (folded) in Portuguese, English and Spanish, each once: ``billing`` → {``billing``,
    ``bill``}, ``troco`` → {``troc``, ``troco``}; and those of its bases (:func:`word_bases`): ``lentisimo`` →
    {``lentisim``, ``lentisimo``, ``lent``, ``lento``}."""
    words = (word, *word_bases(word))
    with _TURNS:
        return frozenset(stemmer.stemWord(each) for each in words for stemmer in _STEMMERS)


@lru_cache(maxsize=STEMS_KEPT)
def short_stems(word: str) -> frozenset[str]:
    """The English stems of ``word`` (folded) and of its bases (:func:`word_bases`) of three letters: ``buying`` →
    {``buy``}, ``payment`` → {``pay``}, ``used`` → {``use``}; the words of three letters a text writing ``word``
    holds. English's stemmer takes off an inflection (*-ing*, *-ed*) and leaves a word; Portuguese's and Spanish's
    leave a root (*pagar*, ``pag``), and read an English noun as a verb (*buyer*, ``buy``): not theirs. Nor a plural's
    *-s* or *-es*, which the three languages write: the English stemmer reads Portuguese's *dias* as ``dia``, which
    every section on paying by a date then held."""
    forms = (word, *word_bases(word))
    with _TURNS:
        stems = [(form, _ENGLISH.stemWord(form)) for form in forms]
    return frozenset(
        stem for form, stem in stems if len(stem) == 3 and stem.isalpha() and form not in (stem + "s", stem + "es")
    )
