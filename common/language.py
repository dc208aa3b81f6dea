"""Which of the platform's three languages (Portuguese, Spanish, English) a text is in.

:func:`detect_language` is py3langid's naive Bayes over byte n-grams with its model cut down to ``pt``, ``es``
and ``en``. Chosen over lingua-language-detector (built from the same three languages) on 150 short customer
messages (3 to 15 words, written without accents and with typos, 50 per language): py3langid misread 1, lingua
2 in its high-accuracy mode and 5 in its low-accuracy mode; py3langid takes about 20 µs a 10-word message
against lingua's 56 µs (high) and 29 µs (low), installs 4.5 MB on the numpy that scipy already brings (lingua:
96 MB), and gives a probability per language, which is what "too uncertain to tell" is decided on. Its model
loads once per process, on first use, memory-mapped read-only from a cut copy on disk (:func:`_arrays`).

By default a text is scored by :func:`_python_scorer`: py3langid's automaton walk and naive Bayes in plain Python
over the same mapped arrays, without the dozen NumPy calls py3langid makes around the walk (a served turn finds
them out of the caches: about half py3langid's cost a message, the same language and probability, tested). A
compiled loop of ours (:mod:`common.language_kernel`, numba) gives the same probabilities, but loading numba and
LLVM costs a process about 120 MiB: it scores only in a process that has loaded numba for a larger reason
(:func:`language_compiled_use`). With ``STOCK_PATHS`` on, py3langid's own ``LanguageIdentifier`` scores
(docs/decisions/numba-kernels.md).

Pure: imports no app.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import re
import tempfile
import threading
import unicodedata
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common.infra import stock_paths

LANGUAGES = ("pt", "es", "en")
# Below these probabilities (of three) the text is too uncertain to tell. One word needs more: "sim" reads as
# Spanish at 0.57, "obrigado" as Portuguese at 0.79; a sentence at 0.5 beats the other two languages together.
MIN_PROBABILITY = 0.5
MIN_PROBABILITY_ONE_WORD = 0.9
# Words of two letters or more: numbers, ids ("P100"), emoji and punctuation say nothing of the language.
_WORD = re.compile(r"[^\W\d_]{2,}")

# Portuguese and Spanish share most of their letters and many short words, and the model reads a short message of
# either ("precio de Vale y Petrobras") as either. Their closed-class words (articles, contractions, conjunctions,
# pronouns, question words) tell the two apart outright: when the model leans to one of them without being sure, a
# message that bears marks of one and none of the other is that one. Words both languages (or English) use the same
# way ("a", "de", "o" — Spanish "or" —, "no", "que", "me", "se", "por", "para", "do") are no mark, and neither are
# letters ("ç", "ñ"), which names and business data bring into a message of the other language.
_PORTUGUESE_MARKS = (
    "os um uma uns umas da dos das na nas ao aos à às pelo pela pelos pelas num numa e é não nao você voce vocês "
    "voces eu meu minha meus minhas seu sua seus suas ele ela sem isso isto com em também já até onde quando qual "
    "quais quanto quanta quantos quantas hoje muito muita mais obrigado obrigada sim pra pro tá tô vc vcs"
)
_SPANISH_MARKS = (
    "el los las un una unos unas del al y es yo mi mis su sus usted ustedes él ella ello eso esto sin con en también "
    "tambien hay qué cuál cuáles cual cuales cuánto cuánta cuántos cuántas cuanto cuanta donde dónde cuándo hoy muy "
    "mucho mucha más gracias sí ya hasta pero"
)
_MARKS = {"pt": frozenset(_PORTUGUESE_MARKS.split()), "es": frozenset(_SPANISH_MARKS.split())}
_MARK_SIGNS = {"pt": frozenset(), "es": frozenset("¿¡")}  # Spanish's opening marks: punctuation, never a name's
_MARK_WORD = re.compile(r"[^\W\d_]+")
# A message of content words alone ("busco vuelos a Paris", "vuelos a Atlántida") bears no closed-class word, but its
# spelling may belong to one of the two languages only: Portuguese's nasal vowels, "ç", "nh" and "lh", "-agem" and
# "-ção" (also written "-cao"); Spanish's "ñ", the diphthong "ue" where Portuguese keeps the vowel ("vuelo"/"voo",
# "cuenta"/"conta", "puedo"/"posso"), "-ción", "-dad" and "-aje". Read only in words written in lower case and in the
# message's first word: a name elsewhere ("São Paulo", "Peñarol", "Manuel") is no mark. Looser signs are left out:
# "ie" ("cliente" is both), "ll" (English loanwords), "-ue" at a word's end ("continue", "blue").
_MARK_SPELLINGS = {
    "pt": re.compile(r"[ãõç]|.(?:nh|lh).|^.{2,}agens?$|^.{3,}c(?:ao|oes)$"),
    "es": re.compile(r"ñ|(?<![qg])ue[b-df-hj-np-tv-z]|^.{2,}ci[oó]n(?:es)?$|^.{3,}dad(?:es)?$|^.{2,}ajes?$"),
}
# Spanish's article "la" is left out of its marks: Portuguese customers write "lá" ("there") without its accent. Before
# a noun of a feminine ending ("la bolsa", "la factura", "la conexión", "la velocidad") it is the article, which
# Portuguese writes "a"; "lá" stands before an adverb or a preposition ("la fora", "la na loja", "la agora") or ends
# the sentence. Not after a hyphen: Portuguese's pronoun after a verb ("comprá-la amanhã").
_SPANISH_ARTICLE = re.compile(r"(?<![\w-])la\s+([^\W\d_]{2,}(?:a|ci[oó]n|si[oó]n|dad|tad|tud|umbre))\b")
_AFTER_LA_IN_PORTUGUESE = frozenset(
    ("fora", "agora", "ainda", "toda", "mesma", "nessa", "nesta", "naquela", "dessa", "desta")
)
MARKS_DECIDE_BELOW = 0.9  # a reading of Portuguese or Spanish this sure stands whatever the marks say
# A reading of English under MARKS_DECIDE_BELOW gives way to the marks too, but only to this many words marked: a
# Portuguese or Spanish message written without its accents ("qual o numero do whatsapp de voces", read as English at
# 0.52) bears several, where an English one bears one at most by chance ("no e-mail yet": "e"; "hay fever", "the
# sin tax").
MARKS_AGAINST_ENGLISH = 2

_Scorer = Callable[[str], tuple[str, float]]
_scorer: _Scorer | None = None
_compiled = False  # language_compiled_use()
_model_lock = threading.Lock()
# The last texts told in this context (a request's task) and what each was told to be, newest last: a turn asks about
# the customer's message and its answer more than once (the turn's language, the offline model, the judge, a
# conversation test's checks), with other texts asked between; a request never reuses another's.
_Told = tuple[str, str | None]
_last_told: contextvars.ContextVar[tuple[_Told, ...]] = contextvars.ContextVar("language_told", default=())
TOLD_KEPT = 4


def identifier() -> Any:
    """py3langid's identifier over the three languages only (its other 94 columns are never read)."""
    from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier  # type: ignore[import-untyped]
    from py3langid.modelio import load_model  # type: ignore[import-untyped]

    ptc, pc, classes, nextmove, row, output = load_model(MODEL_DIR / MODEL_FILE)
    columns = [classes.index(language) for language in LANGUAGES]
    return LanguageIdentifier(
        ptc[:, columns].copy(), pc[columns], list(LANGUAGES), nextmove, output, norm_probs=True, tk_row=row
    )


def language_compiled_use() -> None:
    """Score with the compiled loop (:mod:`common.language_kernel`) from now on, unless ``STOCK_PATHS`` is on: for a
    process that has loaded numba for other compiled loops (:mod:`routing.examples_kernel`), where the loop costs no
    more memory and saves about 30 µs a text."""
    global _compiled, _scorer
    with _model_lock:
        _compiled, _scorer = True, None


def _load() -> _Scorer:
    """The scorer of a text, loaded once per process over the mapped arrays: the plain Python reading, the compiled
    loop (:func:`language_compiled_use`), or py3langid's identifier with ``STOCK_PATHS`` on."""
    global _scorer
    with _model_lock:
        if _scorer is None:
            arrays = _arrays()
            if stock_paths():
                _scorer = _stock_scorer(arrays)
            else:
                _scorer = _compiled_scorer(arrays) if _compiled else _python_scorer(arrays)
    return _scorer


def _prepared(text: str) -> bytes:
    """The bytes py3langid reads of a text: an all-capitals text lower-cased, NFC, UTF-8."""
    if text.isupper():
        text = text.lower()
    return unicodedata.normalize("NFC", text).encode("utf-8", "surrogatepass")


def _python_scorer(arrays: tuple[Any, ...]) -> _Scorer:
    """py3langid's ``classify`` computed in plain Python over the mapped arrays: the same automaton walk over the
    text's bytes, each feature found weighed ln(1 + count) against its row of the three languages' log-probabilities,
    plus the priors, divided by √(bytes), normalised (a softmax); no feature, every language equally likely.

    py3langid surrounds the walk with a dozen NumPy calls on arrays of three (the features' counts gathered, a
    matrix product, the softmax), each a few µs in a served turn that finds NumPy's code out of the caches: three
    sums in Python floats cost less than their dispatch. The sums are kept in double precision where py3langid's are
    single: probabilities within 1e-6 of its own on every text tested (``common/tests/test_language.py``)."""
    import numpy as np

    nextmove, rowbase, output, ptc, pc = (np.asarray(array) for array in arrays)  # plain views of the same pages
    # Each table read from the mapped pages (memory views give Python integers), the states' rows too: a list of them
    # held 4 MB of integer objects in each process, read from wherever the heap had put them.
    moves, outputs, rows = nextmove.data, output.data, rowbase.data
    table = np.ascontiguousarray(ptc, dtype=np.float32).data.cast("B").cast("f")  # row f at 3f, 3f+1, 3f+2
    priors = tuple(float(prior) for prior in pc)
    log1p, exp, ln2 = math.log1p, math.exp, math.log(2)

    def score(text: str) -> tuple[str, float]:
        data = _prepared(text)
        found = []
        state = 0
        for letter in data:
            state = moves[rows[state] + letter]
            feature = outputs[state]
            if feature >= 0:
                found.append(feature)
        if not found:
            return LANGUAGES[0], 1.0 / len(LANGUAGES)
        pt, es, en = priors
        once_pt = once_es = once_en = 0.0  # most features are found once: their rows summed, then weighed ln 2 at once
        for feature, count in Counter(found).items():
            at = 3 * feature
            if count == 1:
                once_pt += table[at]
                once_es += table[at + 1]
                once_en += table[at + 2]
            else:
                weight = log1p(count)
                pt += weight * table[at]
                es += weight * table[at + 1]
                en += weight * table[at + 2]
        pt, es, en = pt + ln2 * once_pt, es + ln2 * once_es, en + ln2 * once_en
        scale = 1.0 / math.sqrt(len(data))
        scores = (pt * scale, es * scale, en * scale)
        top = max(scores)
        best = scores.index(top)  # the first of equal scores, as NumPy's argmax
        return LANGUAGES[best], 1.0 / sum(exp(value - top) for value in scores)

    return score


def _stock_scorer(arrays: tuple[Any, ...]) -> _Scorer:
    """py3langid's ``LanguageIdentifier.classify`` over the mapped arrays (its own text preparation and scores).

    Its automaton walk indexes the transition and output tables once per byte of the text, as Python sequences of
    integers (py3langid loads them as an ``array.array`` and a list): they are handed over as memory views of the
    mapped arrays, which read like those, where a ``numpy.memmap`` made each index a NumPy scalar through memmap's
    Python ``__getitem__`` (2.5 times the cost of a 200-character answer's reading)."""
    import numpy as np
    from py3langid.langid import LanguageIdentifier

    nextmove, rowbase, output, ptc, pc = (np.asarray(array) for array in arrays)  # plain views of the same pages
    rows = (rowbase >> 8).tolist()  # py3langid takes the states' rows and shifts them itself
    model = LanguageIdentifier(ptc, pc, list(LANGUAGES), nextmove.data, output.data, norm_probs=True, tk_row=rows)
    return model.classify


def _compiled_scorer(arrays: tuple[Any, ...]) -> _Scorer:
    """The compiled loop over the mapped arrays, with py3langid's text preparation (an all-capitals text
    lower-cased, NFC, UTF-8)."""
    import numpy as np

    from common.language_kernel import language_probabilities

    def score(text: str) -> tuple[str, float]:
        data = np.frombuffer(_prepared(text), dtype=np.uint8)
        column, probability = language_probabilities(data, *arrays)
        return LANGUAGES[column], probability

    return score


_ARRAYS = ("nextmove", "rowbase", "output", "ptc", "pc")


def _arrays() -> tuple[Any, ...]:
    """The model's arrays as the scorer takes them (:data:`_ARRAYS`), memory-mapped read-only from the cache of
    them (:func:`_cache_dir`), made from py3langid's model by the first process that needs them.

    Mapped, the processes of a machine share one copy of the automaton (39 MB), and each holds resident only the
    pages its texts walk through, where a process that decompressed the model held all of it (docs/benchmarks.md,
    "Memory per process"). Without a writable cache (no settings, a read-only disk) the arrays are made in memory."""
    import numpy as np

    directory = _cache_dir()
    if directory is not None:
        with contextlib.suppress(OSError, ValueError):
            return tuple(np.load(directory / f"{name}.npy", mmap_mode="r") for name in _ARRAYS)
    model = identifier()
    arrays: tuple[Any, ...] = (
        np.frombuffer(model.tk_nextmove, dtype=np.int32 if model.tk_nextmove.itemsize == 4 else np.int64),
        np.array(model._rowbase, dtype=np.int64),
        np.array(model.tk_output, dtype=np.int64),
        np.ascontiguousarray(model.nb_ptc, dtype=np.float32),
        np.ascontiguousarray(model.nb_pc, dtype=np.float32),
    )
    if directory is None:
        return arrays
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=directory.parent) as made:
            for name, array in zip(_ARRAYS, arrays, strict=True):
                np.save(Path(made) / f"{name}.npy", array)
            os.rename(made, directory)  # whole or not at all; another process's, made at the same time, stays
    except OSError:
        return arrays
    return tuple(np.load(directory / f"{name}.npy", mmap_mode="r") for name in _ARRAYS)


def _cache_dir() -> Path | None:
    """Where the model's arrays are kept: ``VAR_DIR/cache/language/<py3langid's version and model>``, or ``None``
    without settings."""
    from importlib.metadata import version

    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from py3langid.langid import MODEL_DIR, MODEL_FILE

    try:
        var_dir = Path(settings.VAR_DIR)
    except (ImproperlyConfigured, AttributeError):
        return None
    model = (MODEL_DIR / MODEL_FILE).stat().st_size
    return var_dir / "cache" / "language" / f"py3langid-{version('py3langid')}-{model}-{'-'.join(LANGUAGES)}"


def language_model_warm() -> None:
    """Load the model now (about a second the first time on a machine, when the cut copy is made), not in the first
    turn that asks: for a process's start, before it serves."""
    language_scores("warm")


def language_scores(text: str) -> tuple[str, float]:
    """The likeliest of :data:`LANGUAGES` for ``text`` and its probability, as py3langid's ``classify`` gives them."""
    return (_scorer or _load())(text)


def detect_language(text: str) -> str | None:
    """``"pt"``, ``"es"`` or ``"en"``; ``None`` when ``text`` has no word, or is too short or too uncertain.

    The text's words alone are read (numbers, ids and emoji left out). A reading of Portuguese or Spanish under
    :data:`MARKS_DECIDE_BELOW` of two words or more gives way to the marks of one of the two (:func:`_marked`: "y",
    "el", "¿" against "e", "os", "não"). Thread-safe; the first call loads the model.
    The same text asked again in the same context (one request's turn) is answered from its last reading (of the
    last :data:`TOLD_KEPT` texts).
    """
    kept = _last_told.get()
    for told_text, told_language in kept:
        if told_text == text:
            return told_language
    words = _WORD.findall(text)
    if not words:
        return None
    language, probability = language_scores(" ".join(words))
    needed = MIN_PROBABILITY_ONE_WORD if len(words) == 1 else MIN_PROBABILITY
    told = language if probability >= needed else None
    if len(words) > 1 and probability < MARKS_DECIDE_BELOW:
        told = _marked(text, least=1 if language in _MARKS else MARKS_AGAINST_ENGLISH) or told
    _last_told.set((*kept[1 - TOLD_KEPT :], (text, told)))
    return told


def language_clear(text: str, language: str) -> bool:
    """Whether ``text`` reads as ``language`` beyond doubt: the model sure of it (:data:`MARKS_DECIDE_BELOW` or
    more), or, for Portuguese and Spanish, the marks of that language alone (:func:`_marked`). What a short reply
    the two languages share ("ok, confirmado por favor", read either way at 0.55) is not, whatever
    :func:`detect_language` makes of it."""
    words = _WORD.findall(text)
    if not words:
        return False
    scored, probability = language_scores(" ".join(words))
    return (scored == language and probability >= MARKS_DECIDE_BELOW) or (
        len(words) > 1 and language in _MARKS and _marked(text) == language
    )


def _marked(text: str, *, least: int = 1) -> str | None:
    """Portuguese or Spanish when ``text`` bears marks of that one only (:data:`_MARKS`, :data:`_MARK_SIGNS`,
    :data:`_MARK_SPELLINGS`, Spanish's article "la" before a feminine noun: :data:`_SPANISH_ARTICLE`), on ``least``
    of its words or more (an opening sign counts as one)."""
    lowered = text.casefold()
    words = set(_MARK_WORD.findall(lowered))
    written = _MARK_WORD.findall(text)
    spelled = {word.casefold() for position, word in enumerate(written) if position == 0 or word.islower()}
    counts = {
        language: len(words & marks)
        + any(sign in _MARK_SIGNS[language] for sign in lowered)
        + sum(1 for word in spelled - marks if _MARK_SPELLINGS[language].search(word))
        for language, marks in _MARKS.items()
    }
    if "la" in words:
        counts["es"] += any(
            noun not in _MARKS["pt"] and noun not in _AFTER_LA_IN_PORTUGUESE
            for noun in _SPANISH_ARTICLE.findall(lowered)
        )
    marked = [language for language, count in counts.items() if count]
    return marked[0] if len(marked) == 1 and counts[marked[0]] >= least else None
