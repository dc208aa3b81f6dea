"""The examples tier's offline scoring on scikit-learn's own code: the stock path (``STOCK_PATHS``) of what
:mod:`routing.examples` computes itself.

:func:`stock_vectorisers` are the two ``TfidfVectorizer`` whose vectors the offline vectoriser's two blocks equal
(character n-grams inside word boundaries, and words with pairs of words; each block L2-normalised);
:class:`StockVectoriser` fits and applies them; :class:`StockBayes` is ``MultinomialNB`` over the examples' vectors,
whose joint log-likelihoods are the scores the tier tempers and normalises. Slower than the tier's own path, and
``MultinomialNB`` keeps two dense arrays of classes × features: for profiles of tens of intents, not thousands
(docs/decisions/numba-kernels.md).

scikit-learn is imported by the first index built here, never by a process that does not switch the stock path on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from common.text import normalize


def stock_vectorisers(ngram_range: tuple[int, int]) -> tuple[Any, Any]:
    """scikit-learn's vectorisers of the offline tier's two blocks: ``char_wb`` n-grams of ``ngram_range``, and words
    of two letters or more with their pairs; over :func:`common.text.normalize`, sub-linear term frequency."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    common = {"preprocessor": normalize, "lowercase": False, "sublinear_tf": True, "dtype": np.float32}
    return (
        TfidfVectorizer(analyzer="char_wb", ngram_range=ngram_range, **common),
        TfidfVectorizer(analyzer="word", ngram_range=(1, 2), **common),
    )


class StockVectoriser:
    """The offline vectoriser as scikit-learn computes it (:func:`stock_vectorisers`): columns ``0 … chars - 1`` the
    n-grams, the rest the words and pairs, each block numbered in scikit-learn's (sorted) order."""

    name = "tfidf"
    remote = False

    def __init__(self, ngram_range: tuple[int, int] = (4, 5)) -> None:
        self.ngram_range = ngram_range
        self.chars = 0
        self._vectorisers: tuple[Any, ...] = ()

    def fit(self, texts: Sequence[str]) -> Any:
        """The examples' matrix (CSR, float32, one row per text)."""
        from scipy.sparse import hstack

        vectorisers = stock_vectorisers(self.ngram_range)
        matrix = hstack([vectoriser.fit_transform(texts) for vectoriser in vectorisers], format="csr")
        matrix.sort_indices()
        self.chars, self._vectorisers = len(vectorisers[0].vocabulary_), vectorisers
        return matrix

    def vector(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """The message's vector as (feature indexes ascending, weights)."""
        from scipy.sparse import hstack

        row = hstack([vectoriser.transform([text]) for vectoriser in self._vectorisers], format="csr")
        row.sort_indices()
        return row.indices.astype(np.int64), row.data.astype(np.float64)


class StockBayes:
    """scikit-learn's ``MultinomialNB(alpha, fit_prior=False)`` fitted on the examples' ``matrix``, each row labelled
    by its class number (``labels``: 0 … classes - 1, every class with a row)."""

    def __init__(self, matrix: Any, labels: np.ndarray, alpha: float) -> None:
        self.matrix, self.labels, self.alpha = matrix, labels, alpha
        self.classes = np.arange(int(labels.max()) + 1)
        self.model = self._fit(np.arange(len(labels)))

    def _fit(self, rows: np.ndarray) -> Any:
        from sklearn.naive_bayes import MultinomialNB

        # partial_fit names every class: a class whose rows are all left out keeps its place (no counts).
        return MultinomialNB(alpha=self.alpha, fit_prior=False).partial_fit(
            self.matrix[rows], self.labels[rows], classes=self.classes
        )

    def scores(self, features: np.ndarray, weights: np.ndarray, left_out: np.ndarray) -> np.ndarray:
        """Every class's joint log-likelihood of the message (``features``, ``weights``); with ``left_out`` rows, of
        a model fitted without them."""
        from scipy.sparse import csr_matrix

        model = self.model if not len(left_out) else self._fit(np.setdiff1d(np.arange(len(self.labels)), left_out))
        message = csr_matrix((weights, features, [0, len(features)]), shape=(1, self.matrix.shape[1]))
        return np.asarray(model.predict_joint_log_proba(message)[0], dtype=np.float64)

    def nearest(self, features: np.ndarray, weights: np.ndarray, first: int, last: int) -> np.ndarray:
        """The dot products of the rows ``first … last - 1`` with the message (SciPy's sparse product)."""
        from scipy.sparse import csr_matrix

        message = csr_matrix((weights, features, [0, len(features)]), shape=(1, self.matrix.shape[1]))
        return np.asarray((self.matrix[first:last] @ message.T).toarray(), dtype=np.float64).ravel()
