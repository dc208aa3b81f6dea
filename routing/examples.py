"""The examples tier: route a message by its similarity to the intents' example utterances (W2 6/8).

Between the keywords and the LLM classifier (:mod:`routing.router`): when no keyword decided, the message is
compared with every enabled intent's examples; the closest intent wins when its score clears the profile's
threshold and beats the runner-up intent by the profile's margin. Both are chosen per profile by
:mod:`routing.calibration` from the profile's saved routing tests and its examples.

Pure data, no ORM, no settings. An :class:`ExampleIndex` is compiled once per profile version (with the
router) and then scores a message without touching the database:

* **Offline vectoriser** (the default, no downloaded weights): scikit-learn's TF-IDF over character n-grams
  inside word boundaries (``char_wb``, 3–5) of the normalised text (:func:`common.text.normalize`: lower case,
  no accents, no punctuation), sub-linear term frequency, L2-normalised. Character n-grams match inflections,
  typos and the shared roots of Portuguese and Spanish ("cobrança" / "cobranza" / "cobro"), which words do not.
  the vocabulary and scikit-learn's IDF weights are fitted when the index compiles; a message is then vectorised by
  :meth:`TfidfCharVectoriser.vector` — the same vector as scikit-learn's ``transform`` (a test checks it), with
  each word's n-grams memoised, because a decision has a budget of a few hundred microseconds.
* **Embeddings** (when the profile asks for them and an endpoint is configured): the examples and the message
  embedded by an OpenAI-compatible ``/v1/embeddings`` endpoint (:mod:`routing.embeddings`), cosine similarity.

An intent's score mixes two cosine similarities: with its nearest example (weight :data:`NEAREST_WEIGHT`) and
with the centroid of all its examples (the normalised sum of their vectors, the rest). The nearest example alone
lets one lucky shared word decide; the centroid rewards a message that shares something with many of the intent's
ways of asking, and ranks the intents more reliably (measured on the demo profiles' examples left out in turn and
their saved tests: 56 % → 70 % right under the calibrated rule, wrong routes 1.6 % → 1.2 %). A message is scored
against all examples at once: one product with the examples' matrix (offline: only the columns of the message's
n-grams); the centroids cost nothing more, since a message's dot product with an intent's summed examples is the sum
of its similarities with them (one ``add.reduceat`` and one ``maximum.reduceat`` over each intent's run of rows). An
example left out (calibration) is left out of its intent's centroid too, exactly, from each example's dot product with
its intent's sum, kept at build time.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol

import numpy as np

from common.text import normalize

logger = logging.getLogger(__name__)

NEAREST = 3  # examples shown with a decision
RANKED = 5  # intents ranked with a decision (the best, the runner-up and why the others lost)
WORD_CACHE = 50_000  # words whose n-grams a vectoriser memoises
MAX_DF_FLOOR = 64  # an n-gram is dropped as too common only when more examples than this hold it
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

    The n-grams are cut as scikit-learn's ``char_wb`` analyser cuts them, each word's once (memoised: a profile's
    examples and its customers repeat their words); scikit-learn's ``TfidfTransformer`` weighs and normalises
    them. N-grams found in more than ``max_df`` of the examples (at least :data:`MAX_DF_FLOOR` examples) are
    dropped: they tell no intent apart and would make every message read most of the index. The result equals
    scikit-learn's ``TfidfVectorizer(analyzer="char_wb", preprocessor=normalize, sublinear_tf=True, max_df=…)``
    (``routing/tests/test_examples.py`` checks it).
    """

    name = "tfidf-char"
    remote = False

    def __init__(self, ngram_range: tuple[int, int] = (3, 5), max_df: float = 0.05) -> None:
        self.ngram_range = ngram_range
        self.max_df = max_df
        self.vocabulary: dict[str, int] = {}
        self.idf: np.ndarray = np.zeros(0, np.float32)
        self._grams: dict[str, tuple[str, ...]] = {}
        self._words: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def max_df_count(self, documents: int) -> int:
        return max(MAX_DF_FLOOR, int(self.max_df * documents))

    def sklearn(self, documents: int) -> Any:
        """The scikit-learn vectoriser this one equals (for the test that checks it)."""
        from sklearn.feature_extraction.text import TfidfVectorizer

        return TfidfVectorizer(
            analyzer="char_wb",
            ngram_range=self.ngram_range,
            preprocessor=normalize,
            lowercase=False,
            sublinear_tf=True,
            max_df=self.max_df_count(documents),
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
        word_features: dict[str, np.ndarray] = {}
        rows: list[np.ndarray] = []
        for text in texts:
            features = []
            for word in normalize(text).split():
                known = word_features.get(word)
                if known is None:
                    grams = self.grams(word)
                    known = word_features[word] = np.fromiter(
                        (vocabulary.setdefault(gram, len(vocabulary)) for gram in grams), np.int64, len(grams)
                    )
                features.append(known)
            rows.append(np.concatenate(features) if features else np.zeros(0, np.int64))
        lengths = np.fromiter((len(row) for row in rows), np.int64, len(rows))
        indexes = np.concatenate(rows) if rows else np.zeros(0, np.int64)
        # Features in scikit-learn's order (sorted n-grams), those in too many examples out.
        counts = csr_matrix(
            (np.ones(len(indexes), np.float32), indexes, np.concatenate([[0], np.cumsum(lengths)])),
            shape=(len(texts), len(vocabulary)),
        )
        counts.sum_duplicates()
        frequent = np.bincount(counts.indices, minlength=len(vocabulary)) > self.max_df_count(len(texts))
        kept = sorted(gram for gram, index in vocabulary.items() if not frequent[index])
        self.vocabulary = {gram: index for index, gram in enumerate(kept)}
        renumber = np.full(len(vocabulary), -1, np.int64)
        renumber[[vocabulary[gram] for gram in kept]] = np.arange(len(kept))
        columns = renumber[counts.indices]
        keep = columns >= 0
        row_of = np.repeat(np.arange(len(texts)), np.diff(counts.indptr))
        counts = csr_matrix((counts.data[keep], (row_of[keep], columns[keep])), shape=(len(texts), len(kept)))
        transformer = TfidfTransformer(sublinear_tf=True)
        matrix = transformer.fit_transform(counts).astype(np.float32)
        self.idf = transformer.idf_.astype(np.float32)
        return matrix.tocsr()

    def _word(self, word: str) -> tuple[np.ndarray, np.ndarray]:
        """The vocabulary's n-grams of one word and how often each occurs in it."""
        known = self._words.get(word)
        if known is not None:
            return known
        counts: dict[int, int] = {}
        vocabulary = self.vocabulary
        for gram in self.grams(word):
            index = vocabulary.get(gram)
            if index is not None:
                counts[index] = counts.get(index, 0) + 1
        entry = (np.fromiter(counts, np.int64, len(counts)), np.fromiter(counts.values(), np.float32, len(counts)))
        if len(self._words) < WORD_CACHE:
            self._words[word] = entry
        return entry

    def vector(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """The message's TF-IDF vector as (feature indexes, weights), L2-normalised; empty when nothing is known."""
        words = normalize(text).split()
        if not words:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        parts = [self._word(word) for word in words]
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


def _top(values: np.ndarray, count: int) -> np.ndarray:
    """The indexes of the ``count`` largest values, largest first (ties: lower index first)."""
    if len(values) > count:
        part = np.argpartition(-values, count - 1)[:count]
        return part[np.lexsort((part, -values[part]))]
    return np.argsort(-values, kind="stable")


@dataclass
class ExampleIndex:
    """A profile's examples, vectorised: rows grouped by intent (``starts``: each intent's first row), and each
    intent's centroid (see the module docstring)."""

    intents: tuple[str, ...]
    texts: tuple[str, ...]
    starts: np.ndarray
    matrix: Any  # scipy CSR (offline) or a dense float32 array (embeddings), one normalised row per example
    vectoriser: Vectoriser
    _columns: Any = field(default=None, repr=False)
    # Per intent: the norm of its examples' summed vector; per example: its dot product with that sum.
    _sum_norms: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64), repr=False)
    _own_dots: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64), repr=False)

    @classmethod
    def build(cls, examples: Sequence[tuple[str, Sequence[str]]], vectoriser: Vectoriser) -> ExampleIndex | None:
        """``examples``: (intent name, its examples) in the router's order; intents without examples are left
        out. ``None`` when no intent has an example."""
        names: list[str] = []
        texts: list[str] = []
        starts: list[int] = []
        for name, own in examples:
            usable = [text for text in dict.fromkeys(own) if normalize(text)]
            if usable:
                names.append(name)
                starts.append(len(texts))
                texts.extend(usable)
        if not texts:
            return None
        matrix = vectoriser.fit(texts)
        index = cls(tuple(names), tuple(texts), np.asarray(starts, dtype=np.int64), matrix, vectoriser)
        if not isinstance(matrix, np.ndarray):
            index._columns = matrix.tocsc()  # by feature: a message reads only its own features' columns
        index._own_dots = index._own_dots_compute()
        index._sum_norms = np.sqrt(np.maximum(np.add.reduceat(index._own_dots, index.starts), 0.0))
        return index

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

    def similarities(self, vector: Any) -> np.ndarray:
        """The cosine similarity of the message's vector with every example."""
        if isinstance(self.matrix, np.ndarray):
            return self.matrix @ np.asarray(vector, dtype=np.float32)
        features, weights = vector
        if not len(features):
            return np.zeros(len(self.texts), dtype=np.float32)
        return np.asarray(self._columns[:, features] @ weights, dtype=np.float32)

    def centroid_scores(self, scores: np.ndarray, *, exclude: int | None = None) -> np.ndarray:
        """Every intent's centroid similarity from the message's similarities with the examples (``scores``, the
        left-out row's unmasked): sum·v is the sum of its examples' r·v, and the centroid is sum / |sum|. An example
        left out (``exclude``) leaves its intent's sum too: (sum·v − r·v) / |sum − r|, where
        |sum − r|² = |sum|² − 2 sum·r + 1.
        """
        dots = np.add.reduceat(scores.astype(np.float64), self.starts)
        norms = self._sum_norms.copy()
        if exclude is not None:
            owner = int(np.searchsorted(self.starts, exclude, side="right") - 1)
            dots[owner] -= float(scores[exclude])
            rest = norms[owner] ** 2 - 2.0 * float(self._own_dots[exclude]) + 1.0
            norms[owner] = np.sqrt(rest) if rest > 1e-9 else 0.0
        return np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)

    def match(self, vector: Any, *, nearest: int = NEAREST, exclude: int | None = None) -> ExamplesMatch:
        """Every intent's score (see the module docstring), best first, and the nearest examples. ``exclude``: an
        example row left out (leave-one-out calibration scores each example against the others)."""
        scores = self.similarities(vector)
        centroids = self.centroid_scores(scores, exclude=exclude)
        if exclude is not None:
            scores[exclude] = -1.0
        nearest_scores = np.maximum(np.maximum.reduceat(scores, self.starts), 0.0).astype(np.float64)
        per_intent = NEAREST_WEIGHT * nearest_scores + (1.0 - NEAREST_WEIGHT) * centroids
        order = _top(per_intent, RANKED)
        ranking = tuple((self.intents[i], float(per_intent[i])) for i in order if per_intent[i] > 0)
        # The nearest examples are among the best intents' own: read only their rows.
        ends = np.append(self.starts[1:], len(self.texts))
        rows = np.concatenate([np.arange(self.starts[i], ends[i]) for i in order[:nearest]])
        top = rows[_top(scores[rows], nearest)]
        owners = np.searchsorted(self.starts, top, side="right") - 1
        neighbours = tuple(
            Neighbour(self.intents[owner], self.texts[row], float(scores[row]))
            for row, owner in zip(top, owners, strict=True)
            if scores[row] > 0
        )
        return ExamplesMatch(ranking=ranking, nearest=neighbours, vectoriser=self.vectoriser.name)

    def match_text(self, text: str, *, nearest: int = NEAREST) -> ExamplesMatch:
        """:meth:`match` of a text, vectorised here (the offline vectoriser; embeddings are fetched by the caller)."""
        return self.match(self.vectoriser.vector(text), nearest=nearest)


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
