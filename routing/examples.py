"""The examples tier: route a message by the intents' example utterances.

Between the keywords and the LLM classifier (:mod:`routing.router`): when no keyword decided, the message is
scored against every enabled intent's examples and against "none of these" — a background of messages that belong
to no intent (:mod:`routing.background`); the likeliest intent wins when its score clears the profile's threshold
and beats both the runner-up intent and "none of these" by the profile's margin. Both are chosen per profile by
:mod:`releases.calibration` from the profile's saved routing tests, its examples and its out-of-scope samples.

Pure data, no ORM, no settings but ``STOCK_PATHS`` (:func:`offline_engine`). An :class:`ExampleIndex` is compiled
once per profile version (with the router) and then scores a message without touching the database:

* **Offline** (the default, no downloaded weights): the TF-IDF vector of the normalised text
  (:func:`common.text.normalize`: lower case, no accents, no punctuation) over two blocks of features, each
  L2-normalised as scikit-learn's ``TfidfVectorizer`` makes it — character n-grams inside word boundaries
  (``char_wb``, 4–5), which match inflections, typos and the shared roots of Portuguese and Spanish ("cobrança" /
  "cobranza"), and words and pairs of words, which tell "não chegou" from "não funciona" — scored by **multinomial
  naive Bayes** fitted on the examples and the background: an intent's score is its posterior probability given the
  message (a uniform prior over every class, smoothing α = :data:`ALPHA`, the log-likelihoods tempered by
  :data:`TEMPERATURE`), scikit-learn's ``MultinomialNB(alpha=ALPHA, fit_prior=False)`` joint log-likelihoods on the
  same vectors divided by the temperature (a test checks it); "none of these" is the background classes' posterior
  together. Against the nearest example and the examples' centroid (cosine) it scored
  before, on the demo profiles' examples left out in turn with their near copies it ranks 90–92 % first against
  87–89 %, and the paraphrases in ``bench/paraphrases`` routed right at the calibrated rule rose from 77 % to 85 %
  with fewer wrong routes (docs/benchmarks.md, Routing accuracy): a score is the evidence of every example of an intent
  together, and the words an intent's examples share weigh more than the ones every intent has. Its cost is the
  message's features times the intents that have them (:func:`routing.examples_kernel.bayes_scores`), not times
  their examples.
* **Embeddings** (when the profile asks for them and an endpoint is configured): the examples and the message
  embedded by an OpenAI-compatible ``/v1/embeddings`` endpoint (:mod:`common.embeddings`), the examples and the
  background after ``ROUTER_EMBEDDINGS_DOCUMENT_PREFIX``, the message (and an example left out, scored as one)
  after ``ROUTER_EMBEDDINGS_QUERY_PREFIX``. An intent's score mixes
  two cosine similarities: with its nearest example (weight :data:`NEAREST_WEIGHT`) and with the centroid of its
  examples (the normalised sum of their vectors, the rest); "none of these" is the similarity of the nearest
  background example.

What scores an offline index (:func:`offline_engine`): NumPy over the index's tables for the profiles of tens of
intents; numba's compiled loops (:mod:`routing.examples_kernel`) from :data:`COMPILED_MIN_CLASSES` classes, where
NumPy's cost grows past the tier's budget and loading numba (about 150 MiB of a process) pays; scikit-learn's own
vectorisers and ``MultinomialNB`` with ``STOCK_PATHS`` on (:mod:`routing.examples_stock`). All three score alike
(tested); docs/decisions/numba-kernels.md has the figures.

Either way a decision shows the best intent's examples nearest to the message (cosine). An example
left out (calibration) is left out of its intent's counts or centroid too, exactly.
"""

from __future__ import annotations

import contextvars
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, NamedTuple, Protocol

import numpy as np

from common.embeddings import EmbeddingsUnavailable, EmbeddingsVectoriser, Endpoint, embeddings_vectoriser
from common.infra import stock_paths
from common.language import language_compiled_use
from routing.background import Background, none_label
from routing.examples_stock import StockBayes, StockVectoriser
from routing.tfidf import NO_FEATURES, NO_WEIGHTS, TfidfVectoriser, code_points, index_ranges

logger = logging.getLogger(__name__)

_A_WORD = re.compile(r"[^\W_]")  # a text with a letter or digit has a word once normalised
NEAREST = 3  # examples shown with a decision
RANKED = 5  # intents ranked with a decision (the best, the runner-up and why the others lost)
NEAREST_WEIGHT = (
    0.3  # embeddings: an intent's score is this much its nearest example's similarity, the rest its centroid's
)
OFFLINE_SCORE = "naive-bayes"  # what a version's offline threshold and margin were chosen for (routing.documents)
ALPHA = 0.03  # naive Bayes's additive smoothing (the best of 0.01 … 0.3 on the demo's examples left out in turn)
# The log-likelihoods are divided by this before they are normalised ("tempered" naive Bayes): a word's n-grams are
# not independent evidence, and naive Bayes counts each, so its posteriors are too sure of themselves. 2 is the
# temperature whose confidences are best calibrated on the demo profiles' examples left out in turn (expected
# calibration error of the top intent 0.026-0.034, against 0.034-0.065 untempered; 1.5 and 3 did worse).
TEMPERATURE = 2.0
# What scores an offline index (ExampleIndex.engine). NumPy serves the profiles of a few dozen intents; numba's compiled
# loops (routing.examples_kernel) serve larger ones, where NumPy's cost grows past the tier's budget, and load numba
# and LLVM (about 150 MiB of a process) only in a process that compiles such a profile; scikit-learn's own code is
# the stock path (STOCK_PATHS). docs/decisions/numba-kernels.md has the figures.
NUMPY = "numpy"
COMPILED = "numba"
STOCK = "scikit-learn"
ENGINES = (NUMPY, COMPILED, STOCK)
COMPILED_MIN_CLASSES = 100  # classes (intents and "none of these") from which the compiled loops score


class Vectoriser(Protocol):
    """Turns texts into L2-normalised vectors: the examples once (``fit``), each message (``vector``). A ``remote``
    one calls an endpoint per message: the router awaits its ``avector`` instead."""

    name: str
    remote: bool

    def fit(self, texts: Sequence[str]) -> Any: ...

    def vector(self, text: str) -> Any: ...


_NOTHING = (NO_FEATURES, NO_WEIGHTS, (-1, 0.0), NO_FEATURES, NO_WEIGHTS)  # a match with no evidence at all
Excluded = int | Sequence[int] | np.ndarray | None  # example rows left out of a match


class Neighbour(NamedTuple):
    """One example near the message (a named tuple: a decision builds a few, and a tuple is the quickest to build)."""

    intent: str
    example: str
    score: float

    def as_dict(self) -> dict[str, Any]:
        return {"intent": self.intent, "example": self.example, "score": round(self.score, 3)}


@dataclass(frozen=True)
class ExamplesMatch:
    """How a message scored against the examples: the intents' scores, best first, the nearest examples, and how much
    the message reads as "none of these" (the index's background classes: small talk, off-topic, the profile's
    out-of-scope examples). :meth:`decides` says whether the best intent wins under a threshold and a margin."""

    ranking: tuple[tuple[str, float], ...]  # (intent, score), best first: see the module docstring
    nearest: tuple[Neighbour, ...]
    vectoriser: str
    # The likeliest background class and what the background scored: all its classes' posterior together (offline),
    # its best class's score (embeddings). ("", 0.0) without a background.
    none_of_these: tuple[str, float] = ("", 0.0)

    @property
    def best(self) -> tuple[str, float]:
        return self.ranking[0] if self.ranking else ("", 0.0)

    @property
    def runner_up(self) -> tuple[str, float]:
        return self.ranking[1] if len(self.ranking) > 1 else ("", 0.0)

    @property
    def rival(self) -> float:
        """What the best intent must beat: the runner-up intent's score or "none of these", whichever is higher."""
        return max(self.runner_up[1], self.none_of_these[1])

    @property
    def gap(self) -> float:
        return self.best[1] - self.rival

    @property
    def reads_as_none(self) -> bool:
        """The message is likelier none of these than any intent."""
        return self.none_of_these[1] > 0 and self.none_of_these[1] >= self.best[1]

    def elsewhere(self, intent: str) -> float:
        """How sure the examples are that the message is not ``intent`` (offline, where scores are posteriors): one
        minus its score, its score taken as the lowest ranked one's when it ranked below them."""
        scores = dict(self.ranking)
        if intent in scores:
            return 1.0 - scores[intent]
        return 1.0 - (self.ranking[-1][1] if len(self.ranking) >= RANKED else 0.0)

    def decides(self, threshold: float, margin: float) -> bool:
        return bool(self.ranking) and self.best[1] >= threshold and self.gap >= margin

    def why(self, threshold: float, margin: float) -> str:
        """One sentence: why the best intent won, or why nothing did."""
        (intent, score), (second, second_score) = self.best, self.runner_up
        kind, none_score = self.none_of_these
        if not self.ranking or score <= 0:
            return "No example shares a word or an n-gram with the message."
        if self.reads_as_none:
            return (
                f"The message reads as none of the intents ({none_label(kind)}, {none_score:.2f}; the likeliest "
                f"intent, {intent}, {score:.2f})."
            )
        if score < threshold:
            return f"The likeliest intent, {intent}, scored {score:.2f}, below the threshold {threshold:.2f}."
        if self.gap < margin:
            if none_score > second_score:
                return (
                    f"{intent} ({score:.2f}) is too close to none of these ({none_label(kind)}, {none_score:.2f}): "
                    f"the gap {self.gap:.2f} is below the margin {margin:.2f}."
                )
            return (
                f"{intent} ({score:.2f}) and {second} ({second_score:.2f}) are too close: the gap {self.gap:.2f} is "
                f"below the margin {margin:.2f}."
            )
        beaten = f", runner-up {second} {second_score:.2f}" if second else ""
        return f"By its examples {intent} is the likeliest intent (score {score:.2f} ≥ {threshold:.2f}{beaten})."

    def as_metadata(self, threshold: float, margin: float, *, limit: int = 5) -> dict[str, Any]:
        """What a decision records: the score, the runner-up, "none of these", the nearest examples, the rule it was
        held to."""
        (_, score), (second, second_score) = self.best, self.runner_up
        kind, none_score = self.none_of_these
        return {
            "score": round(score, 3),
            "runner_up": {"intent": second, "score": round(second_score, 3)},
            "none_of_these": {"score": round(none_score, 3), "kind": kind, "label": none_label(kind) if kind else ""},
            "nearest": [neighbour.as_dict() for neighbour in self.nearest],
            "ranking": [{"intent": name, "score": round(score, 3)} for name, score in self.ranking[:limit]],
            "threshold": threshold,
            "margin": margin,
            "vectoriser": self.vectoriser,
        }


# The last text scored against an index in this context (a request's task), and its score: a turn scores the
# customer's message to route it and again for the offline model's moves (conversations.runtime), and a request never
# reuses another's. A match is frozen: it is shared, never changed. The message's vector is kept with a match made
# without its nearest examples (``match_text(text, nearest=0)``: the keyword check), ``None`` once they are in it.
_Vector = tuple[np.ndarray, np.ndarray]
_last_matched: contextvars.ContextVar[tuple[ExampleIndex, str, ExamplesMatch, _Vector | None] | None] = (
    contextvars.ContextVar("examples_matched", default=None)
)


@dataclass
class ExampleIndex:
    """A profile's examples, vectorised: rows grouped by class (``starts``: each class's first row), and what each
    class's score needs (see the module docstring): offline, the naive Bayes weights by feature; with embeddings,
    each class's centroid. The classes are the intents, then the ``background`` ones: "none of these" (small talk,
    off-topic, the profile's out-of-scope examples), which compete with the intents and are never routed to."""

    classes: tuple[str, ...]
    texts: tuple[str, ...]
    starts: np.ndarray
    matrix: Any  # scipy CSR (offline) or a dense float32 array (embeddings), one row per example
    vectoriser: Vectoriser
    background: int = 0  # how many of the classes, at the end, are "none of these"
    engine: str = NUMPY  # offline: what scores a message (NUMPY, COMPILED or STOCK; see :meth:`build`)
    _ends: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    _row_intent: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    _row_names: tuple[str, ...] = field(default=(), repr=False)  # each example's intent
    # Offline: the examples' rows (CSR arrays); per intent its summed vector (CSR) and total weight; by feature, the
    # intents that have it and ln(1 + their weight of it / α); per intent ln(its total + α · features).
    _rows: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    _sums: Any = field(default=None, repr=False)
    _totals: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64), repr=False)
    _by_feature: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    _lengths: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64), repr=False)
    # What bayes_decide reads but the message: per fitted word its n-gram block and its own word-block column times
    # the intents' logs, and the rest.
    _decide: tuple[Any, Any, Any, Any] | None = field(default=None, repr=False)
    _stock: StockBayes | None = field(default=None, repr=False)  # the stock path: scikit-learn's naive Bayes
    # NumPy: the examples' weights by feature, then row (the key feature × rows + row, ascending; the weights).
    _by_column: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    # Embeddings: per intent the norm of its examples' summed vector (and its inverse); per example its dot product
    # with it.
    _sum_norms: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64), repr=False)
    _sum_inverse: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64), repr=False)
    _own_dots: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64), repr=False)

    @classmethod
    def build(
        cls,
        examples: Sequence[tuple[str, Sequence[str]]],
        vectoriser: Vectoriser,
        background: Sequence[tuple[str, Sequence[str]]] = (),
        *,
        engine: str | None = None,
    ) -> ExampleIndex | None:
        """``examples``: (intent name, its examples) in the router's order; intents without examples are left
        out. ``background``: (label, texts) of "none of these" classes (:mod:`routing.background`: the shipped corpus
        and the profile's out-of-scope examples). ``None`` when no intent has an example.

        ``engine``, offline (:func:`offline_engine` when not given): :data:`NUMPY`, :data:`COMPILED` (the compiled
        loops of :mod:`routing.examples_kernel`) or :data:`STOCK` (scikit-learn's own vectorisers and naive Bayes,
        :mod:`routing.examples_stock`, which then stand in for ``vectoriser``). All three score alike (tested)."""
        names: list[str] = []
        texts: list[str] = []
        starts: list[int] = []
        kept = 0
        for place, (name, own) in enumerate([*examples, *background]):
            usable = [text for text in dict.fromkeys(own) if _A_WORD.search(text)]
            if usable:
                names.append(name)
                starts.append(len(texts))
                texts.extend(usable)
                kept += place >= len(examples)
        if len(names) == kept:
            return None
        engine = engine or offline_engine(len(names))
        if engine == STOCK and type(vectoriser) is TfidfVectoriser:  # a subclass stands in for embeddings (tests)
            vectoriser = StockVectoriser(vectoriser.ngram_range)
        matrix = vectoriser.fit(texts)
        index = cls(tuple(names), tuple(texts), np.asarray(starts, dtype=np.int64), matrix, vectoriser, kept, engine)
        index._ends = np.append(index.starts[1:], len(texts)).astype(np.int64)
        index._row_intent = np.repeat(np.arange(len(names)), index._ends - index.starts)
        index._row_names = tuple(names[k] for k in index._row_intent.tolist())
        if not index.offline:
            index._centroids_prepare()
        elif index.engine == STOCK:
            index._stock = StockBayes(matrix, index._row_intent, ALPHA)
        else:
            index._bayes_prepare()
            if index.engine == COMPILED:
                index._compiled_prepare()
            else:
                by_column = matrix.tocsc()
                by_column.sort_indices()
                columns = np.repeat(np.arange(matrix.shape[1], dtype=np.int64), np.diff(by_column.indptr))
                index._by_column = (columns * len(texts) + by_column.indices, by_column.data)
        return index

    @property
    def intents(self) -> tuple[str, ...]:
        """The intents' names, in the router's order (the classes but "none of these")."""
        return self.classes[: len(self.classes) - self.background]

    @property
    def offline(self) -> bool:
        """Sparse TF-IDF vectors scored by naive Bayes (else dense embeddings scored by centroid)."""
        return not isinstance(self.matrix, np.ndarray)

    def _bayes_prepare(self) -> None:
        """The naive Bayes weights: per intent its summed vector and total, by feature the intents that have it."""
        from scipy.sparse import csr_matrix

        matrix = self.matrix
        membership = csr_matrix(
            (np.ones(len(self.texts)), (self._row_intent, np.arange(len(self.texts)))),
            shape=(len(self.classes), len(self.texts)),
        )
        sums = (membership @ matrix.astype(np.float64)).tocsr()
        sums.sort_indices()
        self._sums = sums
        self._totals = np.asarray(sums.sum(axis=1), dtype=np.float64).ravel()
        self._lengths = np.log(self._totals + ALPHA * matrix.shape[1])
        by_feature = sums.tocsc()
        by_feature.sort_indices()
        self._by_feature = (
            by_feature.indptr.astype(np.int64),
            by_feature.indices.astype(np.int32),
            np.log1p(by_feature.data / ALPHA),
        )

    def _compiled_prepare(self) -> None:
        """What :func:`routing.examples_kernel.bayes_decide` reads but the message (and its lexicon)."""
        from scipy.sparse import csr_matrix

        import routing.examples_kernel  # noqa: F401 — numba, loaded (and compiled or read from its cache) here

        language_compiled_use()  # numba's memory is paid: language ID may use its compiled loop too
        matrix = self.matrix
        assert self._by_feature is not None
        self._rows = (matrix.indptr.astype(np.int64), matrix.indices.astype(np.int32), matrix.data)
        # Each fitted word's n-gram block, and its own word-block column, times every intent's logs (bayes_decide):
        # the word's column is in the intents that have the word, which have all its n-grams, so both products are
        # laid on the first's entries.
        vectoriser = self.vectoriser
        assert isinstance(vectoriser, TfidfVectoriser)
        starts, grams, counts = vectoriser._table
        words = len(starts) - 1
        logs = csr_matrix(self._by_feature[::-1], shape=(matrix.shape[1], len(self.classes)))
        weighted = csr_matrix(
            ((1.0 + np.log(counts)) * vectoriser._idf[grams], grams, starts), shape=(words, logs.shape[0])
        )
        products = (weighted @ logs).tocsr()
        products.sort_indices()
        own = np.flatnonzero(vectoriser._unigrams >= 0)
        columns = vectoriser._unigrams[own]
        own_products = (
            csr_matrix((vectoriser._idf[columns], (own, columns)), shape=(words, logs.shape[0])) @ logs
        ).tocoo()
        keys = np.repeat(np.arange(words, dtype=np.int64), np.diff(products.indptr)) * len(self.classes)
        keys += products.indices
        word_values = np.zeros(len(products.data))
        word_values[np.searchsorted(keys, own_products.row.astype(np.int64) * len(self.classes) + own_products.col)] = (
            own_products.data
        )
        # What bayes_decide reads of a word, laid out together (see routing.examples_kernel._bayes_tally): where its
        # products and its entries start; its entries — each n-gram, then its own word-block column — as (feature,
        # count, (1 + ln count) · idf, idf); its products as (intent, n-gram product, word-column product).
        entry_rows = np.concatenate([np.repeat(np.arange(words), np.diff(starts)), own])
        features = np.concatenate([grams, columns]).astype(np.float64)
        entry_counts = np.concatenate([counts, np.ones(len(own))])
        entry_idf = vectoriser._idf[features.astype(np.int64)]
        order = np.argsort(entry_rows, kind="stable")  # a word's n-grams, then its column
        entries = np.stack([features, entry_counts, (1.0 + np.log(entry_counts)) * entry_idf, entry_idf], axis=1)
        row_starts = np.stack(
            [
                products.indptr.astype(np.int64),
                np.concatenate([[0], np.cumsum(np.bincount(entry_rows, minlength=words))]).astype(np.int64),
            ],
            axis=1,
        )
        vectoriser.lexicon()
        self._decide = (
            (row_starts, np.ascontiguousarray(entries[order])),
            np.stack([products.indices.astype(np.float64), products.data, word_values], axis=1),
            (*self._by_feature, self._lengths, vectoriser._idf, vectoriser.chars),
            (*self._rows, self.starts, self._ends),
        )

    def _centroids_prepare(self) -> None:
        """Each example's dot product with the sum of its intent's examples (their sum's squared norm adds up)."""
        matrix = self.matrix.astype(np.float64)
        sums = np.add.reduceat(matrix, self.starts, axis=0)
        self._own_dots = np.einsum("ij,ij->i", matrix, sums[self._row_intent])
        self._sum_norms = np.sqrt(np.maximum(np.add.reduceat(self._own_dots, self.starts), 0.0))
        self._sum_inverse = np.divide(
            1.0, self._sum_norms, out=np.zeros_like(self._sum_norms), where=self._sum_norms > 0
        )

    def similarities(self, vector: Any) -> np.ndarray:
        """The cosine similarity of the message's vector with every example (offline: the mean of its two blocks')."""
        if not self.offline:
            return np.asarray(self.matrix @ np.asarray(vector, dtype=np.float32), dtype=np.float64)
        features, weights = vector
        if not len(features):
            return np.zeros(len(self.texts))
        return np.asarray(self.matrix[:, features] @ weights, dtype=np.float64).ravel() / 2

    def match_text(self, text: str, *, nearest: int = NEAREST, exclude: Excluded = None) -> ExamplesMatch:
        """:meth:`match` of a text, vectorised here (the offline vectoriser; embeddings are fetched by the caller).
        With the compiled loops, a text is scored from its words in one call
        (:func:`routing.examples_kernel.bayes_decide`). The same text asked again of the same index in the same
        context, with the default arguments, is answered from the last score (:data:`_last_matched`).

        ``nearest=0`` asks for the scores alone (the keyword check reads no example): NumPy's and scikit-learn's
        engines then find no nearest examples, and a later call for the same text in the same context adds them
        to the kept score without scoring the message again; the compiled loops, which find them in the same
        call, score as with the default. The match it answers may hold the nearest examples all the same."""
        if nearest not in (0, NEAREST) or exclude is not None:
            return self._match_text(text, nearest=nearest, exclude=exclude)
        last = _last_matched.get()
        if last is not None and last[0] is self and last[1] == text:
            matched, vector = last[2], last[3]
            if nearest and vector is not None:
                matched = self._with_nearest(matched, vector)
                _last_matched.set((self, text, matched, None))
            return matched
        if nearest or self.engine == COMPILED or not self.offline:
            matched, kept = self._match_text(text), None
        else:
            kept = self.vectoriser.vector(text)
            matched = self._matched(*self._bayes_match(kept, NO_FEATURES, 0))
        _last_matched.set((self, text, matched, kept))
        return matched

    def _with_nearest(self, matched: ExamplesMatch, vector: _Vector) -> ExamplesMatch:
        """``matched`` (scored with ``nearest=0``) with its best intent's :data:`NEAREST` examples nearest the
        message, as :meth:`match` finds them."""
        if not matched.ranking:
            return matched
        features, weights = vector
        best = self.classes.index(matched.best[0])
        near, near_scores = self._nearest(features, weights, best, NO_FEATURES, NEAREST)
        return replace(matched, nearest=self._neighbours(near, near_scores / 2))  # the mean of the two blocks'

    def _match_text(self, text: str, *, nearest: int = NEAREST, exclude: Excluded = None) -> ExamplesMatch:
        if self.engine != COMPILED or not self.offline or exclude is not None:
            return self.match(self.vectoriser.vector(text), nearest=nearest, exclude=exclude)
        from routing.examples_kernel import bayes_decide

        assert isinstance(self.vectoriser, TfidfVectoriser) and self._decide is not None
        words, products, by_feature, examples = self._decide
        intents = len(self.classes) - self.background
        top, probabilities, background, none_score, near, near_scores = bayes_decide(
            code_points(text),
            self.vectoriser._lexicon,
            words,
            products,
            by_feature,
            examples,
            min(RANKED, intents),
            intents,
            TEMPERATURE,
            nearest,
        )
        # The nearest examples' scores are the mean of the two blocks' cosines.
        return self._matched(top, probabilities, (background, none_score), near, near_scores / 2)

    def match(self, vector: Any, *, nearest: int = NEAREST, exclude: Excluded = None) -> ExamplesMatch:
        """Every intent's score (see the module docstring), best first, and the nearest examples. ``exclude``: example
        rows left out (calibration scores each example against the others but its near copies)."""
        rows = NO_FEATURES if exclude is None else np.unique(np.atleast_1d(np.asarray(exclude, dtype=np.int64)))
        if self.offline:
            return self._matched(*self._bayes_match(vector, rows, nearest))
        return self._matched(*self._centroid_match(np.asarray(vector, dtype=np.float64), rows, nearest))

    def _matched(
        self,
        top: np.ndarray,
        scores: np.ndarray,
        none: tuple[int, float],
        near: np.ndarray,
        near_scores: np.ndarray,
    ) -> ExamplesMatch:
        """The match from the kernels' answer: the ranked intents (class numbers and scores), "none of these" (the
        likeliest background class's number, -1 for none, and the background's score), the nearest examples."""
        classes = self.classes
        ranking = tuple((classes[k], score) for k, score in zip(top.tolist(), scores.tolist(), strict=True) if k >= 0)
        background, none_score = int(none[0]), float(none[1])
        return ExamplesMatch(
            ranking=ranking,
            nearest=self._neighbours(near, near_scores),
            vectoriser=self.vectoriser.name,
            none_of_these=(classes[background], none_score) if background >= 0 else ("", 0.0),
        )

    def _neighbours(self, near: np.ndarray, near_scores: np.ndarray) -> tuple[Neighbour, ...]:
        texts, row_names = self.texts, self._row_names
        return tuple(
            Neighbour(row_names[row], texts[row], score)
            for row, score in zip(near.tolist(), near_scores.tolist(), strict=True)
            if row >= 0
        )

    def _bayes_match(self, vector: tuple[np.ndarray, np.ndarray], rows: np.ndarray, nearest: int) -> tuple[Any, ...]:
        """Offline: the likeliest intents by naive Bayes, and the best one's ``nearest`` examples nearest the
        message."""
        features, weights = vector
        if not len(features):  # nothing known: no evidence for any intent
            return _NOTHING
        if self._stock is not None:
            scores = self._stock.scores(features, weights, rows)
        else:
            assert self._by_feature is not None
            if self.engine == COMPILED:
                from routing.examples_kernel import bayes_scores

                scores = bayes_scores(features, weights, *self._by_feature, self._lengths)
            else:
                scores = _bayes_scores(features, weights, self._by_feature, self._lengths)
            if len(rows):
                self._bayes_leave_out(scores, features, weights, rows)
        return self._bayes_rank(scores, features, weights, rows, nearest)

    def _bayes_rank(
        self, scores: np.ndarray, features: np.ndarray, weights: np.ndarray, rows: np.ndarray, nearest: int
    ) -> tuple[Any, ...]:
        """The likeliest intents from their log-likelihoods, and the best one's ``nearest`` examples nearest the
        message."""
        intents = len(self.classes) - self.background
        if self.engine == COMPILED:
            from routing.examples_kernel import nearest_examples, posterior_rank

            assert self._decide is not None
            top, probabilities, background, none_score = posterior_rank(
                scores, min(RANKED, intents), intents, TEMPERATURE
            )
            near, near_scores = nearest_examples(features, weights, self._decide[3], top[:1], rows, nearest)
        else:
            top, probabilities, background, none_score = _posterior_rank(scores, min(RANKED, intents), intents)
            near, near_scores = (
                self._nearest(features, weights, int(top[0]), rows, nearest) if nearest else (NO_FEATURES, NO_WEIGHTS)
            )
        return (
            top,
            probabilities,
            (background, none_score),
            near,
            near_scores / 2,
        )  # the mean of the two blocks' cosines

    def _nearest(
        self, features: np.ndarray, weights: np.ndarray, intent: int, rows: np.ndarray, nearest: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``nearest`` examples of ``intent`` most similar to the message (dot products), best first, ties to the
        lower row, none at 0 or below; rows in ``rows`` left out."""
        first, last = int(self.starts[intent]), int(self._ends[intent])
        if self._stock is not None:
            values = self._stock.nearest(features, weights, first, last)
        else:
            # The intent's rows are one run of each feature's rows: two searches per feature find it.
            assert self._by_column is not None
            keys, data = self._by_column
            height = len(self.texts)
            starts = np.searchsorted(keys, features * height + first)
            ends = np.searchsorted(keys, features * height + last)
            entries = index_ranges(starts, ends)
            values = np.bincount(
                keys[entries] % height - first, np.repeat(weights, ends - starts) * data[entries], last - first
            )
        if len(rows):
            values[rows[(rows >= first) & (rows < last)] - first] = 0.0
        candidates = np.flatnonzero(values > 0)
        near = candidates[np.argsort(-values[candidates], kind="stable")[:nearest]]
        return near + first, values[near]

    def _bayes_leave_out(self, scores: np.ndarray, features: np.ndarray, weights: np.ndarray, rows: np.ndarray) -> None:
        """Rescore the intents of the examples left out (``rows``) as if fitted without them: their weights leave the
        intent's counts of the message's features and its total (the vocabulary and IDF stay: calibration judges the
        rule, not the fit)."""
        owners = self._row_intent[rows]
        total = float(weights.sum())
        width = self.matrix.shape[1]
        for owner in np.unique(owners):
            own = rows[owners == owner]
            left = self.matrix[own]
            kept = self._sums[owner][:, features].toarray().ravel() - np.asarray(left[:, features].sum(axis=0)).ravel()
            remaining = max(float(self._totals[owner] - left.sum()), 0.0)
            scores[owner] = float(weights @ np.log1p(np.maximum(kept, 0.0) / ALPHA)) - total * np.log(
                remaining + ALPHA * width
            )

    def _centroid_match(self, vector: np.ndarray, rows: np.ndarray, nearest: int) -> tuple[Any, ...]:
        """Embeddings: each intent's score from its nearest example and its centroid (module docstring). Examples left
        out leave their intent's sum too: (sum·v − Σ r·v) / |sum − Σ r|, with
        |sum − Σ r|² = |sum|² − 2 Σ sum·r + Σ r·r' over pairs of the left-out rows."""
        similarity = self.matrix.astype(np.float64) @ vector
        inverse = self._sum_inverse
        if len(rows):
            similarity[rows] = 0.0
            inverse = inverse.copy()
            owners = self._row_intent[rows]
            for owner in np.unique(owners):
                own = rows[owners == owner]
                block = self.matrix[own].astype(np.float64)
                pairs = float((block @ block.T).sum())  # Σ r·r', each example with itself included (1 each)
                rest = self._sum_norms[owner] ** 2 - 2.0 * float(self._own_dots[own].sum()) + pairs
                inverse[owner] = 1.0 / np.sqrt(rest) if rest > 1e-9 else 0.0
        best = np.maximum.reduceat(np.maximum(similarity, 0.0), self.starts)
        scores = NEAREST_WEIGHT * best + (1.0 - NEAREST_WEIGHT) * np.add.reduceat(similarity, self.starts) * inverse
        intents = len(self.classes) - self.background
        top = np.argsort(-scores[:intents], kind="stable")[:RANKED]
        top = top[scores[top] > 0]
        none: tuple[int, float] = (-1, 0.0)
        if self.background:
            # A background class is scored by its nearest example alone: the centroid of thousands of unrelated
            # messages is near every message's common words, and would outscore a few examples' specific one.
            background = intents + int(np.argmax(best[intents:]))
            if best[background] > 0:
                none = (background, float(best[background]))
        candidates = np.arange(self.starts[top[0]], self._ends[top[0]]) if len(top) else NO_FEATURES
        candidates = candidates[similarity[candidates] > 0]
        near = candidates[np.argsort(-similarity[candidates], kind="stable")[:nearest]]
        return top, scores[top], none, near, similarity[near]


def offline_engine(classes: int) -> str:
    """What scores an offline index of ``classes`` classes (intents and "none of these"): scikit-learn's own code
    when ``STOCK_PATHS`` is on; the compiled loops from :data:`COMPILED_MIN_CLASSES` classes; NumPy below."""
    if stock_paths():
        return STOCK
    return COMPILED if classes >= COMPILED_MIN_CLASSES else NUMPY


def _bayes_scores(
    features: np.ndarray, weights: np.ndarray, by_feature: tuple[np.ndarray, ...], lengths: np.ndarray
) -> np.ndarray:
    """Every class's log-likelihood of the message, up to a constant shared by all of them, in NumPy
    (:func:`routing.examples_kernel.bayes_scores` says how): each of the message's features adds its weight times
    its row of ``logs`` to the classes that have it."""
    indptr, intents, logs = by_feature
    starts, ends = indptr[features], indptr[features + 1]
    entries = index_ranges(starts, ends)
    scores = np.bincount(intents[entries], np.repeat(weights, ends - starts) * logs[entries], len(lengths))
    return scores - weights.sum() * lengths


def _posterior_rank(scores: np.ndarray, ranked: int, intents: int) -> tuple[np.ndarray, np.ndarray, int, float]:
    """:func:`routing.examples_kernel.posterior_rank` in NumPy: the ``ranked`` likeliest of the first ``intents``
    classes (best first, ties to the lower index) with their posterior probabilities at :data:`TEMPERATURE`, the
    likeliest class after them (-1 when there is none) and their probability together."""
    scores = scores / TEMPERATURE
    shifted = scores - scores.max()
    shares = np.where(shifted > -40.0, np.exp(shifted), 0.0)  # below, less than 1e-17 of the best's
    total = shares.sum()
    top = np.argsort(-scores[:intents], kind="stable")[:ranked]
    if len(scores) == intents:
        return top, np.exp(shifted[top]) / total, -1, 0.0
    background = intents + int(np.argmax(scores[intents:]))
    return top, np.exp(shifted[top]) / total, background, float(shares[intents:].sum() / total)


def examples_compile(
    examples: tuple[tuple[str, tuple[str, ...]], ...], vectoriser: str = "offline", background: Background = ()
) -> ExampleIndex | None:
    """A profile's :class:`ExampleIndex` from its intents' examples and its ``background`` (:mod:`routing.background`;
    memoised: recompiling the snapshot after a change elsewhere does not vectorise unchanged examples again).
    ``vectoriser``: ``offline`` (the default) or ``embeddings``, which needs an endpoint (:mod:`common.embeddings`);
    with none configured, or when it cannot be reached while compiling, the offline vectoriser serves (and the next
    compile tries the endpoint again)."""
    if vectoriser == "embeddings":
        remote = embeddings_vectoriser()
        if remote is not None:
            try:
                return _embeddings_compile(examples, remote.endpoint, background)
            except EmbeddingsUnavailable as exc:
                logger.warning("examples tier: embeddings unavailable, the offline vectoriser serves: %s", exc)
    return _offline_compile(examples, background, stock_paths())


@lru_cache(maxsize=64)
def _offline_compile(
    examples: tuple[tuple[str, tuple[str, ...]], ...], background: Background, stock: bool
) -> ExampleIndex | None:
    """Memoised by the examples, the background and the stock-path switch (another switch is another index)."""
    return ExampleIndex.build(examples, TfidfVectoriser(), background)


@lru_cache(maxsize=16)
def _embeddings_compile(
    examples: tuple[tuple[str, tuple[str, ...]], ...], endpoint: Endpoint, background: Background
) -> ExampleIndex | None:
    """Memoised by the examples, the endpoint (base URL, model, key, timeout, the prefixes of a message and of an
    example) and the background: another endpoint is another index."""
    return ExampleIndex.build(examples, EmbeddingsVectoriser.of(endpoint), background)
