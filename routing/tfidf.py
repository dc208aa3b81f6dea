"""The examples tier's offline vectoriser (:class:`routing.examples.ExampleIndex`): the TF-IDF vector of a
normalised text over character n-grams inside word boundaries and words and pairs of words, each block
L2-normalised as scikit-learn's ``TfidfVectorizer`` makes it (the figures are :mod:`routing.examples`').
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from common.text import normalize
from routing.examples_stock import stock_vectorisers

NO_FEATURES = np.zeros(0, np.int64)
NO_WEIGHTS = np.zeros(0, np.float64)


class TfidfVectoriser:
    """TF-IDF of a profile's examples over character n-grams and words (see :mod:`routing.examples`).

    Columns ``0 … chars - 1`` are the character n-grams, cut as scikit-learn's ``char_wb`` analyser cuts them, each
    distinct word once (memoised: a profile's examples and its customers repeat their words); the rest are the words
    of two letters or more and the pairs of consecutive ones, as scikit-learn's word analyser takes them. Each numbered
    as first met; scikit-learn's ``TfidfTransformer`` weighs them (sub-linear term frequency) and each block is
    L2-normalised on its own. Each block equals scikit-learn's ``TfidfVectorizer`` of :meth:`sklearn` up to the order
    of the features (``routing/tests/test_examples.py`` checks it).

    4–5-grams: on the demo profiles' examples left out in turn (alone, and with their near neighbours), 3–5-grams
    ranked no better, while they cost twice as much to compile and touch about three times as many examples per
    message (3-grams are shared by most words). No feature is dropped as too common: on the same samples that lost
    accuracy (an intent's own words are common among its ~200 examples), and the IDF weight already makes a common
    one count little.
    """

    name = "tfidf"
    remote = False

    def __init__(self, ngram_range: tuple[int, int] = (4, 5)) -> None:
        self.ngram_range = ngram_range
        self.vocabulary: dict[str, int] = {}  # n-gram → column, numbered as first met
        self.words: dict[str, int] = {}  # word or "word word" → column (after the n-grams')
        self.chars = 0  # the n-grams' columns: 0 … chars - 1
        self.idf: np.ndarray = np.zeros(0, np.float32)
        self._rows: dict[str, int] = {}  # the examples' words → their rows in the table of the words' n-grams
        self._pairs: np.ndarray = np.zeros((0, 3), np.int64)  # each pair of words' rows and its word-block column
        # The examples' words, n-grams and pairs of words, as the compiled loops find a text's features in them
        # (routing.examples_kernel.text_parts); made by the first compiled scorer that needs them (lexicon()).
        self._lexicon: tuple[Any, ...] = ()
        # The examples' words: each one's row in a table (CSR) of its n-grams' columns and how often each occurs in it.
        self._table: tuple[np.ndarray, np.ndarray, np.ndarray] = (np.zeros(1, np.int64), NO_FEATURES, NO_WEIGHTS)
        # The few words holding an n-gram more than once ("banana"): each one's row → those n-grams' columns, as many
        # times as each occurs in it beyond the first (vector() counts the table's n-grams once each).
        self._repeated: dict[int, list[int]] = {}
        self._idf: np.ndarray = NO_WEIGHTS
        self._unigrams: np.ndarray = NO_FEATURES  # per fitted word, its word-block column (-1: a word of one letter)

    def sklearn(self) -> tuple[Any, Any]:
        """The scikit-learn vectorisers this one's two blocks equal (for the test that checks it)."""
        return stock_vectorisers(self.ngram_range)

    def grams(self, word: str) -> tuple[str, ...]:
        """The n-grams of `` word `` as ``char_wb`` cuts them: a word shorter than an n-gram is one, once."""
        padded = f" {word} "
        low, high = self.ngram_range
        cut: list[str] = []
        for size in range(low, high + 1):
            if len(padded) <= size:
                cut.append(padded)
                break
            cut.extend(padded[start : start + size] for start in range(len(padded) - size + 1))
        return tuple(cut)

    def fit(self, texts: Sequence[str]) -> Any:
        """The examples' matrix (CSR, one row per text, each block L2-normalised); keeps the vocabularies and IDF.

        Each distinct word is cut into n-grams once (a table of the words' n-grams); a text's n-gram counts are then
        the product of its words with that table. The word block counts words of two letters or more and pairs of
        consecutive ones (scikit-learn's default token pattern and ``ngram_range=(1, 2)``)."""
        from scipy.sparse import csr_matrix, hstack

        vocabulary: dict[str, int] = {}  # n-gram → column
        rows: dict[str, int] = {}  # word → its row in the table of the words' n-grams
        word_grams: list[int] = []  # the words' n-grams' columns, word after word
        word_indptr = [0]
        said: list[int] = []  # the texts' words (rows), text after text
        terms: dict[str, int] = {}  # word or pair → column of the word block
        term_columns: list[int] = []
        pairs: list[int] = []  # each pair's words' rows and its column, pair after pair
        said_indptr = np.zeros(len(texts) + 1, np.int64)
        term_indptr = np.zeros(len(texts) + 1, np.int64)
        for text_row, text in enumerate(texts):
            words = normalize(text).split()
            for word in words:
                if word not in rows:
                    rows[word] = len(rows)
                    grams = self.grams(word)
                    for gram in grams:
                        vocabulary.setdefault(gram, len(vocabulary))
                    word_grams.extend(map(vocabulary.__getitem__, grams))
                    word_indptr.append(len(word_grams))
            said.extend(map(rows.__getitem__, words))
            tokens = [word for word in words if len(word) > 1]
            term_columns.extend(terms.setdefault(token, len(terms)) for token in tokens)
            for first, second in itertools.pairwise(tokens):
                pair = f"{first} {second}"
                column = terms.get(pair)
                if column is None:
                    column = terms[pair] = len(terms)
                    pairs.extend((rows[first], rows[second], column))
                term_columns.append(column)
            said_indptr[text_row + 1] = len(said)
            term_indptr[text_row + 1] = len(term_columns)
        chars = len(vocabulary)
        table = csr_matrix(
            (np.ones(len(word_grams)), np.asarray(word_grams, np.int64), np.asarray(word_indptr, np.int64)),
            shape=(len(rows), chars),
        )
        table.sum_duplicates()  # each word's n-grams ascending, with how often each occurs in it
        occurrences = csr_matrix(
            (np.ones(len(said)), np.asarray(said, np.int64), said_indptr), shape=(len(texts), len(rows))
        )
        counts = hstack(
            [
                (occurrences @ table).astype(np.float32),
                csr_matrix(
                    (np.ones(len(term_columns), np.float32), np.asarray(term_columns, np.int64), term_indptr),
                    shape=(len(texts), len(terms)),
                ),
            ],
            format="csr",
        )
        counts.sum_duplicates()
        matrix, idf = _tfidf(counts)
        matrix.sort_indices()
        self.vocabulary, self.words, self.chars = vocabulary, terms, chars
        self.idf = idf.astype(np.float32)
        self._idf = idf.astype(np.float64)
        self._table = (table.indptr.astype(np.int64), table.indices.astype(np.int32), table.data)
        repeated = np.flatnonzero(table.data > 1)
        self._repeated = {}
        for entry, row in zip(
            repeated.tolist(), (np.searchsorted(table.indptr, repeated, side="right") - 1).tolist(), strict=True
        ):
            self._repeated.setdefault(row, []).extend([int(table.indices[entry])] * (int(table.data[entry]) - 1))
        self._unigrams = np.array([chars + terms[word] if len(word) > 1 else -1 for word in rows], dtype=np.int64)
        self._rows, self._pairs = rows, np.asarray(pairs, np.int64).reshape(-1, 3)
        self._lexicon = ()
        _normalise_blocks(matrix, chars)
        return matrix

    def lexicon(self) -> tuple[Any, ...]:
        """The examples' words, n-grams and pairs as the compiled loops find a text's features in them (made once)."""
        if not self._lexicon:
            self._lexicon = _lexicon(list(self._rows), self.vocabulary, self._pairs, self)
        return self._lexicon

    def parts(self, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A text's words as the compiled loops take them (:func:`routing.examples_kernel.text_parts`): its words in
        the fitted table (rows, once per time said: each brings its n-grams and its own word-block column), then the
        other features, once per occurrence — the n-grams of words no example has, and the pairs of words the
        examples have."""
        from routing.examples_kernel import text_parts

        return text_parts(code_points(text), self.lexicon())

    def vector(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """The message's TF-IDF vector as (feature indexes ascending, weights), each block L2-normalised; empty when
        nothing is known. The features counted over the fitted tables, weighed in NumPy (what
        :func:`routing.examples_kernel.message_vector` computes in one compiled call): a fitted word brings its row of
        n-grams, a word no example has the n-grams the vocabulary knows of it; the word block takes the words of two
        letters or more and the pairs of consecutive ones that the examples have."""
        words = normalize(text).split()
        rows, vocabulary, chars = self._rows, self.vocabulary, self.chars
        starts, grams, _ = self._table
        # Each feature's count, counted by a Counter: a message has a few dozen features, and NumPy's sort, gathers
        # and bincount over them cost more than counting them (whole numbers, the same in any order). A fitted word
        # brings its n-grams once each, and again as often as the few it holds more than once (``_repeated``).
        found: list[int] = []
        for word in words:
            row = rows.get(word)
            if row is not None:
                first, last = int(starts[row]), int(starts[row + 1])
                found += grams[first:last].tolist()
                if row in self._repeated:
                    found += self._repeated[row]
                continue
            found += [column for column in map(vocabulary.get, self.grams(word)) if column is not None]
        tokens = [word for word in words if len(word) > 1]
        terms = [*tokens, *(f"{first} {second}" for first, second in itertools.pairwise(tokens))]
        found += [chars + column for column in map(self.words.get, terms) if column is not None]
        frequency = Counter(found)
        if not frequency:
            return NO_FEATURES, NO_WEIGHTS
        ordered = sorted(frequency)
        features = np.array(ordered, np.int64)
        weights = (1.0 + np.log(np.array([frequency[column] for column in ordered]))) * self._idf[features]
        split = bisect.bisect_left(ordered, chars)  # the n-gram block, then the word block
        for block in (weights[:split], weights[split:]):
            norm = np.sqrt(np.dot(block, block))
            if norm > 0:
                block /= norm
        return features, weights


def index_ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The indexes ``starts[i]`` … ``ends[i] - 1`` of every i, end to end (a CSR's entries of some rows)."""
    lengths = ends - starts
    offsets = np.cumsum(lengths) - lengths
    return np.arange(int(lengths.sum()), dtype=np.int64) + np.repeat(starts - offsets, lengths)


def _tfidf(counts: Any) -> tuple[Any, np.ndarray]:
    """scikit-learn's ``TfidfTransformer(sublinear_tf=True, norm=None).fit_transform(counts)`` and its ``idf_``, the
    same operations in the same order and precision (``counts``: CSR, float32, duplicates summed): tf is
    1 + ln(count), idf ln((1 + n) / (1 + df)) + 1. Written out so that a process builds its index without importing
    scikit-learn, which holds about 47 MiB resident in every web and Celery process (docs/benchmarks.md, "Memory per
    process"); the examples tests hold the result to scikit-learn's vectorisers."""
    df = np.bincount(counts.indices, minlength=counts.shape[1]).astype(counts.dtype)
    df += 1.0
    idf = np.full_like(df, fill_value=counts.shape[0] + 1, dtype=counts.dtype)
    idf /= df
    np.log(idf, out=idf)
    idf += 1.0
    matrix = counts.copy()
    np.log(matrix.data, matrix.data)
    matrix.data += 1.0
    matrix.data *= idf[matrix.indices]
    return matrix, idf


def _normalise_blocks(matrix: Any, chars: int) -> None:
    """L2-normalise each row's n-gram block and word block on their own, in place (CSR)."""
    rows = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
    words = matrix.indices >= chars
    squares = matrix.data.astype(np.float64) ** 2
    norms = np.sqrt(
        np.stack(
            [
                np.bincount(rows[~words], squares[~words], matrix.shape[0]),
                np.bincount(rows[words], squares[words], matrix.shape[0]),
            ]
        )
    )
    divisor = norms[words.astype(np.int64), rows]
    matrix.data /= np.where(divisor > 0, divisor, 1.0).astype(np.float32)


def code_points(text: str) -> np.ndarray:
    """A text, normalised (:func:`common.text.normalize`), as its code points: what the compiled loops read."""
    return np.frombuffer(normalize(text).encode("utf-32-le", "surrogatepass"), np.uint32)


def _strings(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings as the compiled loops store them: their code points end to end, and where each starts (and ends)."""
    lengths = np.fromiter(map(len, strings), np.int64, len(strings))
    codes = np.frombuffer("".join(strings).encode("utf-32-le", "surrogatepass"), np.uint32)
    return codes, np.concatenate([np.zeros(1, np.int64), np.cumsum(lengths)])


def _lexicon(
    words: list[str], grams: dict[str, int], pairs: np.ndarray, vectoriser: TfidfVectoriser
) -> tuple[Any, ...]:
    """What :func:`routing.examples_kernel.text_parts` finds a text's features in: the examples' words (numbered as
    their rows), their n-grams (numbered as their columns: ``grams`` is in column order) and their pairs of words
    (``pairs``: the two words' rows and the pair's column, keyed by the rows)."""
    from routing.examples_kernel import lexicon_table, pair_table

    lexicons = []
    for strings in (words, list(grams)):
        codes, starts = _strings(strings)
        lexicons.append((lexicon_table(codes, starts), codes))
    keys = pairs[:, 0] * len(words) + pairs[:, 1]
    pair_lexicon = (pair_table(keys), keys, pairs[:, 2].copy())
    return (*lexicons, pair_lexicon, len(words), *vectoriser.ngram_range, vectoriser.chars)
