"""The examples tier's inner loops, compiled (numba): a message's naive Bayes scores and its nearest examples
(:class:`routing.examples.ExampleIndex`).

Imported when the first offline example index is built, so a process that never routes by examples never loads
numba. ``cache=True`` keeps the compiled code on disk (``NUMBA_CACHE_DIR``, set by the settings); without a writable
folder it compiles once per process (about a second).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def bayes_scores(
    features: np.ndarray,
    weights: np.ndarray,
    indptr: np.ndarray,
    intents: np.ndarray,
    logs: np.ndarray,
    lengths: np.ndarray,
) -> np.ndarray:
    """Every intent's log-likelihood of the message, up to a constant shared by all of them.

    The message's vector (``features``, ``weights``) against the intents' smoothed feature distributions, by feature:
    ``intents[indptr[f]:indptr[f + 1]]`` hold feature f, with ``logs`` = ln(1 + their weight of it / α); ``lengths``
    = ln(an intent's total weight + α · the number of features). Multinomial naive Bayes's
    Σ_f w_f · ln((n_cf + α) / (n_c + α V)) is then Σ_f w_f · logs_cf − (Σ_f w_f) · lengths_c + (Σ_f w_f) · ln α, and
    the last term is the same for every intent.
    """
    scores = np.zeros(len(lengths))
    total = 0.0
    for i in range(len(features)):
        feature = features[i]
        weight = weights[i]
        total += weight
        for j in range(indptr[feature], indptr[feature + 1]):
            scores[intents[j]] += weight * logs[j]
    for k in range(len(lengths)):
        scores[k] -= total * lengths[k]
    return scores


@njit(cache=True, nogil=True)
def posterior_rank(scores: np.ndarray, ranked: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``ranked`` likeliest intents (best first, ties to the lower index) and their posterior probabilities, the
    log-likelihoods ``scores`` normalised over all intents (a uniform prior)."""
    top = np.full(ranked, -1, np.int64)
    top_scores = np.full(ranked, -np.inf)
    highest = -np.inf
    for k in range(len(scores)):
        highest = max(highest, scores[k])
    total = 0.0
    for k in range(len(scores)):
        if scores[k] - highest > -40.0:  # below, less than 1e-17 of the best's
            total += np.exp(scores[k] - highest)
        place = ranked
        while place > 0 and (top[place - 1] < 0 or scores[k] > top_scores[place - 1]):
            place -= 1
        if place < ranked:
            _insert(top, top_scores, place, k, scores[k])
    probabilities = np.zeros(ranked)
    for place in range(ranked):
        if top[place] >= 0:
            probabilities[place] = np.exp(top_scores[place] - highest) / total
    return top, probabilities


@njit(cache=True, nogil=True)
def nearest_examples(
    features: np.ndarray, weights: np.ndarray, examples: tuple, intents: np.ndarray, excluded: np.ndarray, nearest: int
) -> tuple:
    """The ``nearest`` examples of the given ``intents`` most similar to the message (dot products of the examples'
    rows with the message's vector), best first, ties to the lower row; rows in ``excluded`` (sorted) are skipped.
    ``examples``: the examples' CSR matrix and each intent's rows (indptr, indices, data, starts, ends). The message's
    features go in a hash table once, and each of an example's few dozen features is looked up in it."""
    keys = np.full(_table_size(len(features)), -1, np.int64)
    values = np.zeros(len(keys))
    for i in range(len(features)):
        values[_slot(keys, features[i])] = weights[i]
    return _nearest_in(keys, values, examples, intents, excluded, nearest)


@njit(cache=True, nogil=True)
def _nearest_in(
    keys: np.ndarray, values: np.ndarray, examples: tuple, intents: np.ndarray, excluded: np.ndarray, nearest: int
) -> tuple:
    """:func:`nearest_examples` with the message's vector in a hash table (``keys``: features, -1 empty; ``values``:
    their weights)."""
    indptr, indices, data, starts, ends = examples
    mask = len(keys) - 1
    near = np.full(nearest, -1, np.int64)
    near_scores = np.zeros(nearest)
    for k in intents:
        if k < 0:
            continue
        for row in range(starts[k], ends[k]):
            if len(excluded) and excluded[np.searchsorted(excluded, row) % len(excluded)] == row:
                continue
            value = 0.0
            for j in range(indptr[row], indptr[row + 1]):
                feature = indices[j]
                slot = (feature * 0x9E3779B1) & mask
                while keys[slot] != feature and keys[slot] != -1:
                    slot = (slot + 1) & mask
                if keys[slot] == feature:
                    value += values[slot] * data[j]
            if value <= 0.0:
                continue
            place = nearest
            while place > 0 and (
                near[place - 1] < 0
                or value > near_scores[place - 1]
                or (value == near_scores[place - 1] and row < near[place - 1])
            ):
                place -= 1
            if place < nearest:
                _insert(near, near_scores, place, row, value)
    return near, near_scores


@njit(cache=True, nogil=True)
def _insert(items: np.ndarray, scores: np.ndarray, place: int, item: int, score: float) -> None:
    """Put ``item`` at ``place`` of a best-first list, moving the ones after it down (the last falls off)."""
    for moved in range(len(items) - 1, place, -1):
        items[moved] = items[moved - 1]
        scores[moved] = scores[moved - 1]
    items[place] = item
    scores[place] = score


@njit(cache=True, nogil=True)
def message_vector(
    words: np.ndarray,
    word_starts: np.ndarray,
    word_features: np.ndarray,
    word_counts: np.ndarray,
    unigrams: np.ndarray,
    extra_features: np.ndarray,
    extra_counts: np.ndarray,
    idf: np.ndarray,
    chars: int,
) -> tuple[np.ndarray, np.ndarray]:
    """A message's TF-IDF vector (features ascending, weights), each block L2-normalised on its own (the n-grams,
    columns below ``chars``, and the words). ``words``: the message's words in the fitted table, once per time said
    (word w's features ``word_features[word_starts[w]:word_starts[w + 1]]``, occurring ``word_counts`` times in it,
    and its word-block column ``unigrams[w]``, -1 for a word of one letter); ``extra_features`` (``extra_counts``
    times) are the rest: the n-grams of words no example has, and pairs of words. A feature's term frequency is
    summed over the whole message, then sub-linear."""
    total = len(extra_features) + len(words)
    for i in range(len(words)):
        total += word_starts[words[i] + 1] - word_starts[words[i]]
    said = np.empty(total, np.int64)
    tf = np.empty(total)
    n = 0
    for i in range(len(words)):
        for j in range(word_starts[words[i]], word_starts[words[i] + 1]):
            said[n] = word_features[j]
            tf[n] = word_counts[j]
            n += 1
        if unigrams[words[i]] >= 0:
            said[n] = unigrams[words[i]]
            tf[n] = 1.0
            n += 1
    for j in range(len(extra_features)):
        said[n] = extra_features[j]
        tf[n] = extra_counts[j]
        n += 1
    order = np.argsort(said[:n])
    features = np.empty(n, np.int64)
    weights = np.empty(n)
    squares = np.zeros(2)
    m = 0
    i = 0
    while i < n:
        feature = said[order[i]]
        frequency = 0.0
        while i < n and said[order[i]] == feature:
            frequency += tf[order[i]]
            i += 1
        weight = (1.0 + np.log(frequency)) * idf[feature]
        features[m] = feature
        weights[m] = weight
        squares[1 if feature >= chars else 0] += weight * weight
        m += 1
    norms = np.sqrt(squares)
    for k in range(m):
        norm = norms[1 if features[k] >= chars else 0]
        if norm > 0:
            weights[k] /= norm
    return features[:m], weights[:m]


_NONE = np.zeros(0, np.int64)  # no row left out


@njit(cache=True, nogil=True)
def _table_size(entries: int) -> int:
    """An open-addressing table's size for ``entries`` keys: a power of two, at most half full."""
    size = 16
    while size < 2 * entries:
        size *= 2
    return size


@njit(cache=True, nogil=True)
def _slot(keys: np.ndarray, key: int) -> int:
    """The slot of ``key`` in the open-addressing table ``keys`` (-1: empty), claiming an empty one if absent."""
    mask = len(keys) - 1
    slot = (key * 0x9E3779B1) & mask
    while keys[slot] != key and keys[slot] != -1:
        slot = (slot + 1) & mask
    keys[slot] = key
    return slot


@njit(cache=True, nogil=True)
def _bayes_tally(message: tuple, words: tuple, products: tuple, by_feature: tuple) -> tuple:
    """:func:`bayes_scores` of a message from its words, and its vector in a hash table (``keys``: its features, -1
    empty; ``values``: their weights) with how many features it has. ``message``: (rows, extra_features,
    extra_counts); ``words``: the fitted table (word_starts, word_features, word_counts, unigrams, idf, chars);
    ``products``: (product_starts, product_intents, product_values, product_words); ``by_feature``: (indptr,
    intents, logs, lengths), as in :func:`bayes_scores`.

    ``rows``: the message's words in the fitted table, once per time said (see :func:`message_vector`);
    ``extra_features`` (``extra_counts`` times): the n-grams of words no example has and pairs of words (columns from
    ``chars``). A fitted word's n-gram block adds up, when the index compiled, to one product per intent
    (``product_values``: Σ over its n-grams of (1 + ln count) · idf · logs; ``product_words``: its own word-block
    column's idf · logs, on the same entries): a message adds its words' products, scaled by 1 + ln k for a word said
    k times. That is exact for the word's own column, and for its n-grams where each occurs in one of the message's
    words, as most do. Where an n-gram's weight in the whole message, (1 + ln tf) · idf, differs from what its words
    added (an n-gram in several words, or twice in a word said twice), and for every other feature, the feature's own
    column adds the rest. A word the intents share has one entry per intent, where its n-grams have one each.
    """
    rows, extra_features, extra_counts = message
    word_starts, word_features, word_counts, unigrams, idf, chars = words
    product_starts, product_intents, product_values, product_words = products
    indptr, intents, logs, lengths = by_feature
    order = np.argsort(rows)
    total = len(extra_features) + len(rows)
    for i in range(len(rows)):
        total += word_starts[rows[i] + 1] - word_starts[rows[i]]
    keys = np.full(_table_size(total), -1, np.int64)
    tf = np.zeros(len(keys))
    added = np.zeros(len(keys))
    char_scores = np.zeros(len(lengths))
    word_scores = np.zeros(len(lengths))
    i = 0
    while i < len(order):
        row = rows[order[i]]
        said = 0
        while i < len(order) and rows[order[i]] == row:
            said += 1
            i += 1
        scale = 1.0 + np.log(said)
        for j in range(product_starts[row], product_starts[row + 1]):
            char_scores[product_intents[j]] += product_values[j] * scale
            word_scores[product_intents[j]] += product_words[j] * scale
        if unigrams[row] >= 0:
            slot = _slot(keys, unigrams[row])
            tf[slot] += said
            added[slot] += idf[unigrams[row]] * scale
        for j in range(word_starts[row], word_starts[row + 1]):
            slot = _slot(keys, word_features[j])
            tf[slot] += word_counts[j] * said
            added[slot] += (1.0 + np.log(word_counts[j])) * idf[word_features[j]] * scale
    for j in range(len(extra_features)):
        slot = _slot(keys, extra_features[j])
        tf[slot] += extra_counts[j]
    values = np.zeros(len(keys))
    squares = np.zeros(2)
    sums = np.zeros(2)
    m = 0
    for slot in range(len(keys)):
        feature = keys[slot]
        if feature < 0:
            continue
        weight = (1.0 + np.log(tf[slot])) * idf[feature]
        block = 1 if feature >= chars else 0
        squares[block] += weight * weight
        sums[block] += weight
        values[slot] = weight
        m += 1
        rest = weight - added[slot]
        if abs(rest) > 1e-12 * weight:
            target = word_scores if block else char_scores
            for j in range(indptr[feature], indptr[feature + 1]):
                target[intents[j]] += rest * logs[j]
    norms = np.sqrt(squares)
    inverse = np.zeros(2)
    for block in range(2):
        if norms[block] > 0:
            inverse[block] = 1.0 / norms[block]
    for slot in range(len(keys)):
        if keys[slot] >= 0:
            values[slot] *= inverse[1 if keys[slot] >= chars else 0]
    total_weight = sums[0] * inverse[0] + sums[1] * inverse[1]
    scores = np.empty(len(lengths))
    for k in range(len(lengths)):
        scores[k] = char_scores[k] * inverse[0] + word_scores[k] * inverse[1] - total_weight * lengths[k]
    return scores, keys, values, m


@njit(cache=True, nogil=True)
def bayes_decide(
    message: tuple, words: tuple, products: tuple, by_feature: tuple, examples: tuple, ranked: int, nearest: int
) -> tuple:
    """A message's match in one call, from its words (:func:`_bayes_tally`): the ``ranked`` likeliest intents with
    their posterior probabilities (:func:`posterior_rank`) and the best one's ``nearest`` examples nearest it, with
    their dot products (:func:`nearest_examples`, on the same hash table). Nothing ranked when no feature is known.
    ``examples``: the examples' CSR matrix and each intent's rows (indptr, indices, data, starts, ends)."""
    scores, keys, values, known = _bayes_tally(message, words, products, by_feature)
    if known == 0:
        return np.full(0, -1, np.int64), np.zeros(0), np.full(0, -1, np.int64), np.zeros(0)
    top, probabilities = posterior_rank(scores, ranked)
    near, near_scores = _nearest_in(keys, values, examples, top[:1], _NONE, nearest)
    return top, probabilities, near, near_scores
