"""The examples tier: route a message by its similarity to the intents' example utterances (W2 6/8).

Between the keywords and the LLM classifier (:mod:`routing.router`): when no keyword decided, the message is
compared with every enabled intent's examples; the closest intent wins when its score clears the profile's
threshold and beats the runner-up intent by the profile's margin. Both are chosen per profile by
:mod:`routing.calibration` from the profile's saved routing tests and its examples.

Pure data, no ORM, no settings. An :class:`ExampleIndex` is compiled once per profile version (with the
router) and then scores a message without touching the database:

* **Offline vectoriser** (the default, no downloaded weights): scikit-learn's TF-IDF over character n-grams
  inside word boundaries (``char_wb``, 4–5) of the normalised text (:func:`common.text.normalize`: lower case,
  no accents, no punctuation), sub-linear term frequency, L2-normalised. Character n-grams match inflections,
  typos and the shared roots of Portuguese and Spanish ("cobrança" / "cobranza" / "cobro"), which words do not.
  The vocabulary and scikit-learn's IDF weights are fitted when the index compiles, and so is every example word's
  product with the examples (:class:`_WordProducts`): a message is then scored by adding its words' products,
  exactly the similarities of scikit-learn's ``transform`` vector (a test checks it), because a decision has a
  budget of a couple of hundred microseconds.
* **Embeddings** (when the profile asks for them and an endpoint is configured): the examples and the message
  embedded by an OpenAI-compatible ``/v1/embeddings`` endpoint (:mod:`routing.embeddings`), cosine similarity.

An intent's score mixes two cosine similarities: with its nearest example (weight :data:`NEAREST_WEIGHT`) and
with the centroid of all its examples (the normalised sum of their vectors, the rest). The nearest example alone
lets one lucky shared word decide; the centroid rewards a message that shares something with many of the intent's
ways of asking, and ranks the intents more reliably (measured on the demo profiles' examples left out in turn and
their saved tests: 56 % → 70 % right under the calibrated rule, wrong routes 1.6 % → 1.2 %). A message is scored
against all examples at once, its similarities laid out on a grid with a column per intent (see
:class:`ExampleIndex`); the centroids cost nothing more, since a message's dot product with an intent's summed
examples is the sum of its similarities with them, so each intent's best and summed similarity are one pass down the
grid (:func:`routing.examples_kernel.grid_rank`). An example left out (calibration) is left out of its intent's
centroid too, exactly, from each example's dot product with its intent's sum, kept at build time.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol

import numpy as np

from common.text import normalize

logger = logging.getLogger(__name__)

_A_WORD = re.compile(r"[^\W_]")  # a text with a letter or digit has a word once normalised
NEAREST = 3  # examples shown with a decision
RANKED = 5  # intents ranked with a decision (the best, the runner-up and why the others lost)
WORD_CACHE = 50_000  # words whose n-grams a vectoriser memoises
NEAREST_WEIGHT = 0.3  # an intent's score: this much its nearest example's similarity, the rest its centroid's


class Vectoriser(Protocol):
    """Turns texts into L2-normalised vectors: the examples once (``fit``), each message (``vector``). A ``remote``
    one calls an endpoint per message: the router awaits its ``avector`` instead."""

    name: str
    remote: bool

    def fit(self, texts: Sequence[str]) -> Any: ...

    def vector(self, text: str) -> Any: ...


class TfidfCharVectoriser:
    """Character n-gram TF-IDF fitted on a profile's examples (see the module docstring).

    The n-grams are cut as scikit-learn's ``char_wb`` analyser cuts them, each distinct word once (memoised: a
    profile's examples and its customers repeat their words), numbered as first met; scikit-learn's
    ``TfidfTransformer`` weighs and normalises them. The result equals scikit-learn's
    ``TfidfVectorizer(analyzer="char_wb", ngram_range=(4, 5), preprocessor=normalize, sublinear_tf=True)`` up to the
    order of the features (``routing/tests/test_examples.py`` checks it).

    4–5-grams: on the demo profiles' examples left out in turn (alone, and with their near neighbours), 3–5-grams
    ranked no better, while they cost twice as much to compile and touch about three times as many examples per
    message (3-grams are shared by most words). No n-gram is dropped as too common: on the same samples that lost
    accuracy (an intent's own words are common among its ~200 examples), and the IDF weight already makes a common
    n-gram count little.
    """

    name = "tfidf-char"
    remote = False

    def __init__(self, ngram_range: tuple[int, int] = (4, 5)) -> None:
        self.ngram_range = ngram_range
        self.vocabulary: dict[str, int] = {}  # n-gram → column, numbered as first met
        self.idf: np.ndarray = np.zeros(0, np.float32)
        self._grams: dict[str, tuple[str, ...]] = {}
        self._words: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.fitted_words: dict[str, list[int]] = {}  # the examples' words and their n-grams' columns

    def sklearn(self) -> Any:
        """The scikit-learn vectoriser this one equals (for the test that checks it)."""
        from sklearn.feature_extraction.text import TfidfVectorizer

        return TfidfVectorizer(
            analyzer="char_wb",
            ngram_range=self.ngram_range,
            preprocessor=normalize,
            lowercase=False,
            sublinear_tf=True,
            dtype=np.float32,
        )

    def grams(self, word: str) -> tuple[str, ...]:
        """The n-grams of `` word `` as ``char_wb`` cuts them: a word shorter than an n-gram is one, once."""
        known = self._grams.get(word)
        if known is not None:
            return known
        padded = f" {word} "
        low, high = self.ngram_range
        cut: list[str] = []
        for size in range(low, high + 1):
            if len(padded) <= size:
                cut.append(padded)
                break
            cut.extend(padded[start : start + size] for start in range(len(padded) - size + 1))
        grams = tuple(cut)
        if len(self._grams) < WORD_CACHE:
            self._grams[word] = grams
        return grams

    def fit(self, texts: Sequence[str]) -> Any:
        """The examples' matrix (CSR, one L2-normalised row per text); keeps the vocabulary and IDF weights."""
        from scipy.sparse import csr_matrix
        from sklearn.feature_extraction.text import TfidfTransformer

        self._grams, self._words = {}, {}
        vocabulary: dict[str, int] = {}
        word_columns: dict[str, list[int]] = {}
        columns: list[int] = []
        indptr = np.zeros(len(texts) + 1, np.int64)
        for row, text in enumerate(texts):
            for word in normalize(text).split():
                known = word_columns.get(word)
                if known is None:
                    grams = self.grams(word)
                    for gram in grams:
                        if gram not in vocabulary:
                            vocabulary[gram] = len(vocabulary)
                    known = word_columns[word] = list(map(vocabulary.__getitem__, grams))
                columns.extend(known)
            indptr[row + 1] = len(columns)
        counts = csr_matrix(
            (np.ones(len(columns), np.float32), np.asarray(columns, dtype=np.int64), indptr),
            shape=(len(texts), len(vocabulary)),
        )
        counts.sum_duplicates()
        transformer = TfidfTransformer(sublinear_tf=True)
        matrix = transformer.fit_transform(counts).astype(np.float32)
        self.vocabulary = vocabulary
        self.idf = transformer.idf_.astype(np.float32)
        self.fitted_words = word_columns
        return matrix.tocsr()

    def word(self, word: str) -> tuple[np.ndarray, np.ndarray]:
        """One word's n-grams known to the vocabulary (their columns, ascending) and how often each occurs in it."""
        known = self._words.get(word)
        if known is not None:
            return known
        vocabulary = self.vocabulary
        found: dict[int, int] = {}
        for gram in self.grams(word):
            column = vocabulary.get(gram)
            if column is not None:
                found[column] = found.get(column, 0) + 1
        order = sorted(found)
        entry = (np.array(order, dtype=np.int64), np.array([found[column] for column in order], dtype=np.float32))
        if len(self._words) < WORD_CACHE:
            self._words[word] = entry
        return entry

    def vector(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """The message's TF-IDF vector as (feature indexes, weights), L2-normalised; empty when nothing is known."""
        words = normalize(text).split()
        if not words:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        parts = [self.word(word) for word in words]
        indexes = np.concatenate([part[0] for part in parts])
        counts = np.concatenate([part[1] for part in parts])
        if not len(indexes):
            return indexes, counts
        features, inverse = np.unique(indexes, return_inverse=True)
        tf = np.bincount(inverse, weights=counts).astype(np.float32)
        weights = (1.0 + np.log(tf)) * self.idf[features]
        norm = float(np.sqrt(np.dot(weights, weights)))
        return features, weights / norm if norm else weights


@dataclass(frozen=True)
class Neighbour:
    """One example near the message."""

    intent: str
    example: str
    score: float

    def as_dict(self) -> dict[str, Any]:
        return {"intent": self.intent, "example": self.example, "score": round(self.score, 3)}


@dataclass(frozen=True)
class ExamplesMatch:
    """How a message scored against the examples: every intent's best score, best first, and the nearest
    examples. :meth:`decides` says whether the best intent wins under a threshold and a margin."""

    ranking: tuple[tuple[str, float], ...]  # (intent, score: its nearest example and its centroid), best first
    nearest: tuple[Neighbour, ...]
    vectoriser: str

    @property
    def best(self) -> tuple[str, float]:
        return self.ranking[0] if self.ranking else ("", 0.0)

    @property
    def runner_up(self) -> tuple[str, float]:
        return self.ranking[1] if len(self.ranking) > 1 else ("", 0.0)

    @property
    def gap(self) -> float:
        return self.best[1] - self.runner_up[1]

    def decides(self, threshold: float, margin: float) -> bool:
        return bool(self.ranking) and self.best[1] >= threshold and self.gap >= margin

    def why(self, threshold: float, margin: float) -> str:
        """One sentence: why the best intent won, or why nothing did."""
        (intent, score), (second, second_score) = self.best, self.runner_up
        if not self.ranking or score <= 0:
            return "No example is similar to the message."
        if score < threshold:
            return f"Nearest intent {intent} scored {score:.2f}, below the threshold {threshold:.2f}."
        if self.gap < margin:
            return (
                f"{intent} ({score:.2f}) and {second} ({second_score:.2f}) are too close: the gap {self.gap:.2f} is "
                f"below the margin {margin:.2f}."
            )
        beaten = f", runner-up {second} {second_score:.2f}" if second else ""
        return f"Examples of {intent} are nearest (score {score:.2f} ≥ {threshold:.2f}{beaten})."

    def as_metadata(self, threshold: float, margin: float, *, limit: int = 5) -> dict[str, Any]:
        """What a decision records: the score, the runner-up, the nearest examples, the rule it was held to."""
        return {
            "score": round(self.best[1], 3),
            "runner_up": {"intent": self.runner_up[0], "score": round(self.runner_up[1], 3)},
            "nearest": [neighbour.as_dict() for neighbour in self.nearest],
            "ranking": [{"intent": name, "score": round(score, 3)} for name, score in self.ranking[:limit]],
            "threshold": threshold,
            "margin": margin,
            "vectoriser": self.vectoriser,
        }


class _WordProducts:
    """The offline TF-IDF vector of a message times every example, and the vector's norm (the similarities are their
    ratio), without building the vector.

    When the index compiles, every word of the examples is multiplied with the examples at once (one sparse
    product): a word's product is the few hundred examples it touches and its dot product with each. A message then
    adds its words' products (:func:`routing.examples_kernel.message_grid`, compiled) instead of reading every
    example that holds each of its n-grams. The sum is exact: a word said k times weighs its n-grams (1 + ln k) times
    as much when each occurs once in it (sub-linear term frequency); where an n-gram's weight in the whole message
    differs from the sum of what the words added — it occurs in several words, twice in a word said twice, or in a
    word no example has (which added nothing) — the n-gram's column adds the difference.
    """

    def __init__(self, vectoriser: TfidfCharVectoriser, matrix: Any, columns: Any, position: np.ndarray) -> None:
        from scipy.sparse import csr_matrix

        from routing.examples_kernel import message_grid

        self.vectoriser = vectoriser
        self.columns = columns  # the examples' matrix by feature (CSC), its rows the examples' cells on the grid
        self.cells = columns.shape[0]
        self.idf = vectoriser.idf.astype(np.float64)
        self.kernel = message_grid
        fitted = vectoriser.fitted_words
        self.ids = {word: n for n, word in enumerate(fitted)}
        lengths = np.fromiter((len(columns) for columns in fitted.values()), np.int64, len(fitted))
        grams = np.fromiter(itertools.chain.from_iterable(fitted.values()), np.int64, int(lengths.sum()))
        counts = csr_matrix(
            (np.ones(len(grams)), (np.repeat(np.arange(len(fitted)), lengths), grams)),
            shape=(len(fitted), matrix.shape[1]),
        )
        counts.sum_duplicates()
        weights = csr_matrix(
            ((1.0 + np.log(counts.data)) * self.idf[counts.indices], counts.indices, counts.indptr), shape=counts.shape
        )
        products = (weights @ matrix.T.astype(np.float64)).tocsr()
        self.rows, self.products, self.row_starts = position[products.indices], products.data, products.indptr
        self.features, self.counts, self.feature_starts = counts.indices.astype(np.int64), counts.data, counts.indptr

    def of(self, normalized: str) -> tuple[np.ndarray, float]:
        said: dict[str, int] = {}
        for word in normalized.split():
            said[word] = said.get(word, 0) + 1
        ids = self.ids
        known = [ids.get(word, -1) for word in said]
        extra_features, extra_counts = _NO_FEATURES, _NO_COUNTS
        if -1 in known:  # words no example has: their n-grams the vocabulary knows, counted as often as said
            unknown = [(self.vectoriser.word(word), times) for word, times in said.items() if word not in ids]
            extra_features = np.concatenate([features for (features, _), _ in unknown])
            extra_counts = np.concatenate([counts * times for (_, counts), times in unknown]).astype(np.float64)
        grid, norm = self.kernel(
            np.array(known, dtype=np.int64),
            np.array(list(said.values()), dtype=np.float64),
            self.row_starts,
            self.rows,
            self.products,
            self.feature_starts,
            self.features,
            self.counts,
            extra_features,
            extra_counts,
            self.idf,
            self.columns.indptr,
            self.columns.indices,
            self.columns.data,
            self.cells,
        )
        return grid, float(norm)


_NO_FEATURES = np.zeros(0, np.int64)
Excluded = int | Sequence[int] | np.ndarray | None  # example rows left out of a match
_NO_COUNTS = np.zeros(0, np.float64)


@dataclass
class ExampleIndex:
    """A profile's examples, vectorised: rows grouped by intent (``starts``: each intent's first row), and each
    intent's centroid (see the module docstring).

    A message's similarities are laid out on a grid, slot × column, each intent's examples filling one column (or a
    few, when one intent has many more examples than the others): every intent's summed and best similarity is then
    one reduction down the grid's columns, whatever the number of intents (``_position``: each example's cell; the
    cells no example fills hold 0, which neither a sum nor a best similarity, floored at 0, notices)."""

    intents: tuple[str, ...]
    texts: tuple[str, ...]
    starts: np.ndarray
    matrix: Any  # scipy CSR (offline) or a dense float32 array (embeddings), one normalised row per example
    vectoriser: Vectoriser
    _ends: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    _position: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)  # example → cell
    _slots: int = 0  # the grid's rows
    _column_bounds: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64), repr=False)  # per intent
    _cell_row: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)  # cell → example, -1
    _row_intent: list[int] = field(default_factory=list, repr=False)
    _columns: Any = field(default=None, repr=False)  # offline: the examples' matrix by feature, rows as cells
    # Per intent: the norm of its examples' summed vector (and its inverse); per example: its dot product with it.
    _sum_norms: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64), repr=False)
    _sum_inverse: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64), repr=False)
    _own_dots: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64), repr=False)
    _products: _WordProducts | None = field(default=None, repr=False)  # offline: a message's products

    @classmethod
    def build(cls, examples: Sequence[tuple[str, Sequence[str]]], vectoriser: Vectoriser) -> ExampleIndex | None:
        """``examples``: (intent name, its examples) in the router's order; intents without examples are left
        out. ``None`` when no intent has an example."""
        names: list[str] = []
        texts: list[str] = []
        starts: list[int] = []
        for name, own in examples:
            usable = [text for text in dict.fromkeys(own) if _A_WORD.search(text)]
            if usable:
                names.append(name)
                starts.append(len(texts))
                texts.extend(usable)
        if not texts:
            return None
        matrix = vectoriser.fit(texts)
        index = cls(tuple(names), tuple(texts), np.asarray(starts, dtype=np.int64), matrix, vectoriser)
        index._ends = np.append(index.starts[1:], len(texts))
        index._grid_lay_out()
        if not isinstance(matrix, np.ndarray):
            from scipy.sparse import csc_matrix

            by_feature = matrix.tocsc()  # a message reads only its own features' columns
            index._columns = csc_matrix(
                (by_feature.data, index._position[by_feature.indices], by_feature.indptr),
                shape=(index._cells, matrix.shape[1]),
            )
            if isinstance(vectoriser, TfidfCharVectoriser):
                index._products = _WordProducts(vectoriser, matrix, index._columns, index._position)
        index._own_dots = index._own_dots_compute()
        index._sum_norms = np.sqrt(np.maximum(np.add.reduceat(index._own_dots, index.starts), 0.0))
        index._sum_inverse = np.divide(
            1.0, index._sum_norms, out=np.zeros_like(index._sum_norms), where=index._sum_norms > 0
        )
        return index

    def _grid_lay_out(self) -> None:
        """Each example's cell: as many slots as the largest intent has examples, unless that would leave most cells
        empty; then as many as an intent has on average, and a larger intent takes several columns."""
        sizes = self._ends - self.starts
        slots = int(sizes.max())
        if len(sizes) * slots > 1.25 * len(self.texts):
            slots = int(np.ceil(len(self.texts) / len(sizes)))
        columns = -(-sizes // slots)  # per intent
        self._slots = slots
        self._column_bounds = np.concatenate([[0], np.cumsum(columns)]).astype(np.int64)
        owners = np.repeat(np.arange(len(sizes)), sizes)
        within = np.arange(len(self.texts)) - self.starts[owners]
        self._position = (within % slots) * int(columns.sum()) + self._column_bounds[owners] + within // slots
        self._cell_row = np.full(self._cells, -1, np.int64)
        self._cell_row[self._position] = np.arange(len(self.texts))
        self._row_intent = owners.tolist()

    @property
    def _cells(self) -> int:
        return self._slots * int(self._column_bounds[-1])

    def _own_dots_compute(self) -> np.ndarray:
        """Each example's dot product with the sum of its intent's examples (their sum's squared norm adds up)."""
        owners = np.searchsorted(self.starts, np.arange(len(self.texts)), side="right") - 1
        if isinstance(self.matrix, np.ndarray):
            sums = np.add.reduceat(self.matrix.astype(np.float64), self.starts, axis=0)
            return np.einsum("ij,ij->i", self.matrix.astype(np.float64), sums[owners])
        from scipy.sparse import csr_matrix

        membership = csr_matrix(
            (np.ones(len(owners), np.float64), (owners, np.arange(len(owners)))),
            shape=(len(self.intents), len(self.texts)),
        )
        sums = (membership @ self.matrix.astype(np.float64)).tocsr()
        sums.sort_indices()
        # Each example's entries looked up in its own intent's sum (both keyed by intent × feature, sorted).
        width = np.int64(self.matrix.shape[1])
        sum_keys = np.repeat(np.arange(len(self.intents), dtype=np.int64), np.diff(sums.indptr)) * width
        sum_keys += sums.indices
        entries = np.repeat(owners.astype(np.int64), np.diff(self.matrix.indptr)) * width + self.matrix.indices
        products = self.matrix.data * sums.data[np.searchsorted(sum_keys, entries)]
        rows = np.repeat(np.arange(len(self.texts)), np.diff(self.matrix.indptr))
        return np.bincount(rows, products, len(self.texts))

    def _grid(self, vector: Any) -> np.ndarray:
        """The message's similarity with every example, laid out on the grid."""
        if isinstance(self.matrix, np.ndarray):
            grid = np.zeros(self._cells, dtype=np.float64)
            grid[self._position] = self.matrix @ np.asarray(vector, dtype=np.float32)
            return grid
        features, weights = vector
        if not len(features):
            return np.zeros(self._cells, dtype=np.float64)
        return np.asarray(self._columns[:, features] @ weights, dtype=np.float64)

    def similarities(self, vector: Any) -> np.ndarray:
        """The cosine similarity of the message's vector with every example."""
        return self._grid(vector)[self._position]

    def text_similarities(self, text: str) -> np.ndarray:
        """The cosine similarity of a text with every example (offline: see :class:`_WordProducts`)."""
        if self._products is None:
            return self.similarities(self.vectoriser.vector(text))
        grid, norm = self._products.of(normalize(text))
        return grid[self._position] / norm if norm > 0 else grid[self._position]

    def match(self, vector: Any, *, nearest: int = NEAREST, exclude: Excluded = None) -> ExamplesMatch:
        """Every intent's score (see the module docstring), best first, and the nearest examples. ``exclude``: example
        rows left out (calibration scores each example against the others but its near copies)."""
        return self._match(self._grid(vector), 1.0, nearest, exclude)

    def match_text(self, text: str, *, nearest: int = NEAREST, exclude: Excluded = None) -> ExamplesMatch:
        """:meth:`match` of a text, scored here (the offline vectoriser; embeddings are fetched by the caller)."""
        if self._products is None:
            return self.match(self.vectoriser.vector(text), nearest=nearest, exclude=exclude)
        grid, norm = self._products.of(normalize(text))
        return self._match(grid, 1.0 / norm if norm > 0 else 0.0, nearest, exclude)

    def _match(self, grid: np.ndarray, scale: float, nearest: int, exclude: Excluded) -> ExamplesMatch:
        """The match from the grid of the message's (unnormalised: times ``scale``) similarities
        (:func:`routing.examples_kernel.grid_rank`). Examples left out (``exclude``, rows R of an intent) leave its
        sum too: (sum·v − Σ r·v) / |sum − Σ r|, with |sum − Σ r|² = |sum|² − 2 Σ sum·r + Σ r·r' over pairs of R."""
        from routing.examples_kernel import grid_rank

        inverse = self._sum_inverse
        if exclude is not None:
            rows = np.unique(np.atleast_1d(np.asarray(exclude, dtype=np.int64)))
            grid[self._position[rows]] = 0.0
            inverse = inverse.copy()
            owners = np.searchsorted(self.starts, rows, side="right") - 1
            for owner in np.unique(owners):
                own = rows[owners == owner]
                block = self.matrix[own]
                pairs = float((block @ block.T).sum())  # Σ r·r', each example with itself included (1 each)
                rest = self._sum_norms[owner] ** 2 - 2.0 * float(self._own_dots[own].sum()) + pairs
                inverse[owner] = 1.0 / np.sqrt(rest) if rest > 1e-9 else 0.0
        top, scores, near, near_scores = grid_rank(
            grid, self._slots, self._column_bounds, inverse, self._cell_row, scale, NEAREST_WEIGHT, RANKED, nearest
        )
        ranking = tuple(
            (self.intents[k], score)
            for k, score in zip(top.tolist(), scores.tolist(), strict=True)
            if k >= 0 and score > 0
        )
        neighbours = tuple(
            Neighbour(self.intents[self._row_intent[row]], self.texts[row], score)
            for row, score in zip(near.tolist(), near_scores.tolist(), strict=True)
            if row >= 0 and score > 0
        )
        return ExamplesMatch(ranking=ranking, nearest=neighbours, vectoriser=self.vectoriser.name)


def examples_compile(
    examples: tuple[tuple[str, tuple[str, ...]], ...], vectoriser: str = "offline"
) -> ExampleIndex | None:
    """A profile's :class:`ExampleIndex` from its intents' examples (memoised: recompiling the snapshot after a
    change elsewhere does not vectorise unchanged examples again). ``vectoriser``: ``offline`` (the default) or
    ``embeddings``, which needs an endpoint (:mod:`routing.embeddings`); with none configured, or when it cannot be
    reached while compiling, the offline vectoriser serves (and the next compile tries the endpoint again)."""
    if vectoriser == "embeddings":
        from routing.embeddings import EmbeddingsUnavailable, embeddings_vectoriser

        remote = embeddings_vectoriser()
        if remote is not None:
            try:
                return _embeddings_compile(examples, (remote.base_url, remote.model, remote.api_key, remote.timeout))
            except EmbeddingsUnavailable as exc:
                logger.warning("examples tier: embeddings unavailable, the offline vectoriser serves: %s", exc)
    return _offline_compile(examples)


@lru_cache(maxsize=64)
def _offline_compile(examples: tuple[tuple[str, tuple[str, ...]], ...]) -> ExampleIndex | None:
    return ExampleIndex.build(examples, TfidfCharVectoriser())


@lru_cache(maxsize=16)
def _embeddings_compile(
    examples: tuple[tuple[str, tuple[str, ...]], ...], endpoint: tuple[str, str, str, float]
) -> ExampleIndex | None:
    """Memoised by the examples and the endpoint (base URL, model, key, timeout): another endpoint is another index."""
    from routing.embeddings import EmbeddingsVectoriser

    base_url, model, api_key, timeout = endpoint
    return ExampleIndex.build(
        examples, EmbeddingsVectoriser(base_url=base_url, model=model, api_key=api_key, timeout=timeout)
    )
