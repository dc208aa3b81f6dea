"""The examples tier's inner loop, compiled (numba): a message's similarities with every example, from its words'
products computed when the index compiled (:class:`routing.examples._WordProducts`).

Imported when the first offline example index is built, so a process that never routes by examples never loads
numba. ``cache=True`` keeps the compiled code next to this file; without a writable folder it compiles once per
process (about a second).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def message_grid(
    words: np.ndarray,
    times: np.ndarray,
    row_starts: np.ndarray,
    rows: np.ndarray,
    products: np.ndarray,
    feature_starts: np.ndarray,
    features: np.ndarray,
    counts: np.ndarray,
    extra_features: np.ndarray,
    extra_counts: np.ndarray,
    idf: np.ndarray,
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    cells: int,
) -> tuple[np.ndarray, float]:
    """The message's TF-IDF vector times every example (on the grid's cells) and the vector's norm.

    ``words[i]`` (-1: a word no example has) was said ``times[i]`` times; a known word adds its product scaled by
    1 + ln k, exact when each of its n-grams occurs once in it and in no other word of the message. The n-grams of the
    unknown words (``extra_features``, counted ``extra_counts`` times in the message) added nothing. Every n-gram's
    weight in the whole message, (1 + ln tf) · idf with tf summed over the words, is then compared with what the
    words added; where they differ, the n-gram's column adds the difference.
    """
    grid = np.zeros(cells)
    total = len(extra_features)
    for i in range(len(words)):
        if words[i] >= 0:
            total += feature_starts[words[i] + 1] - feature_starts[words[i]]
    said = np.empty(total, np.int64)
    tf = np.empty(total)
    added = np.empty(total)
    n = 0
    for i in range(len(words)):
        word = words[i]
        if word < 0:
            continue
        scale = 1.0 + np.log(times[i])
        for j in range(row_starts[word], row_starts[word + 1]):
            grid[rows[j]] += products[j] * scale
        for j in range(feature_starts[word], feature_starts[word + 1]):
            said[n] = features[j]
            tf[n] = counts[j] * times[i]
            added[n] = (1.0 + np.log(counts[j])) * idf[features[j]] * scale
            n += 1
    for j in range(len(extra_features)):
        said[n] = extra_features[j]
        tf[n] = extra_counts[j]
        added[n] = 0.0
        n += 1
    order = np.argsort(said)
    square = 0.0
    i = 0
    while i < n:
        feature = said[order[i]]
        frequency = 0.0
        summed = 0.0
        j = i
        while j < n and said[order[j]] == feature:
            frequency += tf[order[j]]
            summed += added[order[j]]
            j += 1
        weight = (1.0 + np.log(frequency)) * idf[feature]
        square += weight * weight
        difference = weight - summed
        if abs(difference) > 1e-12:
            for q in range(indptr[feature], indptr[feature + 1]):
                grid[indices[q]] += data[q] * difference
        i = j
    return grid, np.sqrt(square)


@njit(cache=True, nogil=True)
def grid_rank(
    grid: np.ndarray,
    slots: int,
    column_first: np.ndarray,
    inverse: np.ndarray,
    cell_row: np.ndarray,
    scale: float,
    nearest_weight: float,
    ranked: int,
    nearest: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The best intents and the nearest examples, from the grid of a message's similarities (times ``scale``).

    Down each intent's columns, the sum of its cells and the best of them (floored at 0); its score is
    ``nearest_weight`` × the best + the rest × the sum times ``inverse`` (1 / the norm of its examples' sum): the
    nearest example's cosine and the centroid's. Returns the ``ranked`` best intents (best first, ties to the lower
    index; -1 when fewer) with their scores, and the ``nearest`` best examples among the first ``nearest`` intents'
    (rows, best first, ties to the lower row) with their similarities.
    """
    intents = len(column_first) - 1
    columns = column_first[intents]
    column_sums = np.zeros(columns)
    column_best = np.zeros(columns)
    for slot in range(slots):  # the grid row by row, as it lies in memory
        cells = grid[slot * columns : (slot + 1) * columns]
        for column in range(columns):
            value = cells[column]
            column_sums[column] += value
            column_best[column] = max(column_best[column], value)
    sums = np.zeros(intents)
    best = np.zeros(intents)
    for k in range(intents):
        for column in range(column_first[k], column_first[k + 1]):
            sums[k] += column_sums[column]
            best[k] = max(best[k], column_best[column])
    top = np.full(ranked, -1, np.int64)
    top_scores = np.zeros(ranked)
    for k in range(intents):
        score = (nearest_weight * best[k] + (1.0 - nearest_weight) * sums[k] * inverse[k]) * scale
        place = ranked
        while place > 0 and (top[place - 1] < 0 or score > top_scores[place - 1]):
            place -= 1
        if place < ranked:
            _insert(top, top_scores, place, k, score)
    near = np.full(nearest, -1, np.int64)
    near_scores = np.zeros(nearest)
    for r in range(min(nearest, ranked)):
        k = top[r]
        if k < 0:
            break
        for column in range(column_first[k], column_first[k + 1]):
            for slot in range(slots):
                cell = slot * columns + column
                row = cell_row[cell]
                if row < 0:
                    continue
                value = grid[cell] * scale
                place = nearest
                while place > 0 and (
                    near[place - 1] < 0
                    or value > near_scores[place - 1]
                    or (value == near_scores[place - 1] and row < near[place - 1])
                ):
                    place -= 1
                if place < nearest:
                    _insert(near, near_scores, place, row, value)
    return top, top_scores, near, near_scores


@njit(cache=True, nogil=True)
def _insert(items: np.ndarray, scores: np.ndarray, place: int, item: int, score: float) -> None:
    """Put ``item`` at ``place`` of a best-first list, moving the ones after it down (the last falls off)."""
    for moved in range(len(items) - 1, place, -1):
        items[moved] = items[moved - 1]
        scores[moved] = scores[moved - 1]
    items[place] = item
    scores[place] = score
