"""The examples tier's inner loops, compiled (numba): a message's naive Bayes scores and its nearest examples
(:class:`routing.examples.ExampleIndex`).

Imported when the first offline example index of :data:`routing.examples.COMPILED_MIN_CLASSES` classes or more is
built (never with ``STOCK_PATHS`` on), so a process that serves only smaller profiles never loads numba (about
150 MiB; docs/decisions/numba-kernels.md). ``cache=True`` keeps the compiled code on disk (``NUMBA_CACHE_DIR``, set
by the settings); without a writable folder it compiles once per process (about a second).
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
def posterior_rank(scores: np.ndarray, ranked: int, intents: int, temperature: float) -> tuple:
    """The log-likelihoods ``scores`` of every class, divided by ``temperature``, normalised into posterior
    probabilities (a uniform prior): the
    ``ranked`` likeliest of the first ``intents`` classes (best first, ties to the lower index) with their
    probabilities, and of the classes after them — "none of these" — the likeliest one (-1 when there is none) and
    their probability together."""
    top = np.full(ranked, -1, np.int64)
    top_scores = np.full(ranked, -np.inf)
    scores = scores / temperature
    highest = -np.inf
    for k in range(len(scores)):
        highest = max(highest, scores[k])
    total = 0.0
    background = -1
    background_score = -np.inf
    background_total = 0.0
    for k in range(len(scores)):
        share = 0.0
        if scores[k] - highest > -40.0:  # below, less than 1e-17 of the best's
            share = np.exp(scores[k] - highest)
        total += share
        if k >= intents:
            background_total += share
            if scores[k] > background_score:
                background, background_score = k, scores[k]
            continue
        place = ranked
        while place > 0 and (top[place - 1] < 0 or scores[k] > top_scores[place - 1]):
            place -= 1
        if place < ranked:
            _insert(top, top_scores, place, k, scores[k])
    probabilities = np.zeros(ranked)
    for place in range(ranked):
        if top[place] >= 0:
            probabilities[place] = np.exp(top_scores[place] - highest) / total
    return top, probabilities, background, background_total / total


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


_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_SPACE = 32


@njit(cache=True, nogil=True)
def _hash(codes: np.ndarray, start: int, end: int) -> np.uint64:
    """FNV-1a of the code points ``codes[start:end]``."""
    value = _FNV_OFFSET
    for i in range(start, end):
        value = (value ^ np.uint64(codes[i])) * _FNV_PRIME
    return value


@njit(cache=True, nogil=True)
def lexicon_table(codes: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """A lexicon's open-addressing table of the strings ``codes[starts[e]:starts[e + 1]]`` (code points), each found
    back by :func:`_lexicon_find` as its number ``e``. A slot holds a string's hash, its number (-1: empty), where its
    code points start and how many there are: one read finds a string, a second checks its code points."""
    entries = len(starts) - 1
    slots = np.full((_table_size(entries), 4), -1, np.int64)
    mask = len(slots) - 1
    for entry in range(entries):
        value = _hash(codes, starts[entry], starts[entry + 1])
        slot = np.int64(value & np.uint64(mask))
        while slots[slot, 1] != -1:
            slot = (slot + 1) & mask
        slots[slot, 0] = np.int64(value)
        slots[slot, 1] = entry
        slots[slot, 2] = starts[entry]
        slots[slot, 3] = starts[entry + 1] - starts[entry]
    return slots


@njit(cache=True, nogil=True)
def _lexicon_find(lexicon: tuple, text: np.ndarray, start: int, end: int) -> int:
    """The number of the string ``text[start:end]`` in ``lexicon`` (the :func:`lexicon_table` of ``codes``, and
    ``codes``), -1 if absent."""
    slots, codes = lexicon
    value = _hash(text, start, end)
    key = np.int64(value)
    mask = len(slots) - 1
    slot = np.int64(value & np.uint64(mask))
    length = end - start
    while slots[slot, 1] >= 0:
        if slots[slot, 0] == key and slots[slot, 3] == length:
            offset = slots[slot, 2] - start
            same = True
            for i in range(start, end):
                if codes[offset + i] != text[i]:
                    same = False
                    break
            if same:
                return slots[slot, 1]
        slot = (slot + 1) & mask
    return -1


@njit(cache=True, nogil=True)
def pair_table(keys: np.ndarray) -> np.ndarray:
    """An open-addressing table of the pairs of words' keys (first word's row × words + second's): a slot's pair
    number, -1 empty. :func:`_pair_find` reads it."""
    table = np.full(_table_size(len(keys)), -1, np.int64)
    mask = len(table) - 1
    for pair in range(len(keys)):
        slot = (keys[pair] * 0x9E3779B1) & mask
        while table[slot] != -1:
            slot = (slot + 1) & mask
        table[slot] = pair
    return table


@njit(cache=True, nogil=True)
def _pair_find(pairs: tuple, key: int) -> int:
    """The word-block column of the pair ``key`` (see :func:`pair_table`), -1 if the examples do not have it."""
    table, keys, columns = pairs
    mask = len(table) - 1
    slot = (key * 0x9E3779B1) & mask
    while table[slot] != -1:
        if keys[table[slot]] == key:
            return columns[table[slot]]
        slot = (slot + 1) & mask
    return -1


@njit(cache=True, nogil=True)
def text_parts(text: np.ndarray, lexicon: tuple) -> tuple:
    """A normalised text (its code points) as the scoring loops take it (:func:`message_vector`,
    :func:`_bayes_tally`): (rows, extra_features, extra_counts) — its words in the fitted table, once per time said;
    then the n-grams the vocabulary knows of each word no example has (``char_wb``: the word padded with a space
    each side, each n-gram of ``low``–``high`` characters, a padded word no longer than an n-gram whole, once), and
    the pairs of consecutive words of two letters or more that the examples have (columns from ``chars``), each
    once per occurrence. A word of one letter is in no pair and breaks none; an unknown longer word breaks the pair.

    ``lexicon``: (words, grams, pairs, fitted, low, high, chars): the fitted words and the n-grams as
    :func:`_lexicon_find` reads them, the pairs as :func:`_pair_find` does (table, keys, columns), and how many words
    were fitted."""
    words, grams, pairs, fitted, low, high, chars = lexicon
    n = len(text)
    rows = np.empty(n // 2 + 1, np.int64)
    extra = np.empty(2 * n + 4 * (n // 2 + 1) + 1, np.int64)
    padded = np.empty(n + 2, np.uint32)
    found = 0
    others = 0
    pair_columns = np.empty(n // 2 + 1, np.int64)
    paired = 0
    previous = -1  # the last word of two letters or more, when the examples have it
    i = 0
    while i < n:
        while i < n and text[i] == _SPACE:
            i += 1
        start = i
        while i < n and text[i] != _SPACE:
            i += 1
        if i == start:
            break
        row = _lexicon_find(words, text, start, i)
        if row < 0:
            length = i - start + 2
            padded[0] = _SPACE
            padded[1 : length - 1] = text[start:i]
            padded[length - 1] = _SPACE
            for size in range(low, high + 1):
                if length <= size:
                    column = _lexicon_find(grams, padded, 0, length)
                    if column >= 0:
                        extra[others] = column
                        others += 1
                    break
                for at in range(length - size + 1):
                    column = _lexicon_find(grams, padded, at, at + size)
                    if column >= 0:
                        extra[others] = column
                        others += 1
            if i - start > 1:
                previous = -1
            continue
        rows[found] = row
        found += 1
        if i - start == 1:
            continue
        if previous >= 0:
            column = _pair_find(pairs, previous * fitted + row)
            if column >= 0:
                pair_columns[paired] = chars + column
                paired += 1
        previous = row
    extra[others : others + paired] = pair_columns[:paired]
    others += paired
    return rows[:found], extra[:others], np.ones(others)


@njit(cache=True, nogil=True)
def _bayes_tally(message: tuple, words: tuple, products: np.ndarray, by_feature: tuple) -> tuple:
    """:func:`bayes_scores` of a message from its words, and its vector in a hash table (``keys``: its features, -1
    empty; ``values``: their weights) with how many features it has. ``message``: (rows, extra_features,
    extra_counts); ``words``: (row_starts, entries): per fitted word where its products and its entries start
    (columns 0 and 1); an entry per feature of the word — each of its n-grams, then its own word-block column (none
    for a word of one letter) — as (feature, how often it occurs in the word, (1 + ln that) · idf, idf); ``products``:
    per fitted word and intent (intent, n-gram product, word-column product); ``by_feature``: (indptr, intents, logs,
    lengths) as in :func:`bayes_scores`, then every feature's idf and ``chars``. What a word needs is laid out
    together, so that a word costs few reads from memory.

    ``rows``: the message's words in the fitted table, once per time said (see :func:`message_vector`);
    ``extra_features`` (``extra_counts`` times): the n-grams of words no example has and pairs of words (columns from
    ``chars``). A fitted word's n-gram block adds up, when the index compiled, to one product per intent (Σ over its
    n-grams of (1 + ln count) · idf · logs; and its own word-block column's idf · logs, on the same entries): a
    message adds its words' products, scaled by 1 + ln k for a word said k times. That is exact for the word's own
    column, and for its n-grams where each occurs in one of the message's words, as most do. Where an n-gram's weight
    in the whole message, (1 + ln tf) · idf, differs from what its words added (an n-gram in several words, or twice
    in a word said twice), and for every other feature, the feature's own column adds the rest. A word the intents
    share has one entry per intent, where its n-grams have one each.
    """
    rows, extra_features, extra_counts = message
    row_starts, entries = words
    indptr, intents, logs, lengths, idf, chars = by_feature
    order = np.argsort(rows)
    total = len(extra_features) + len(rows)
    for i in range(len(rows)):
        total += row_starts[rows[i] + 1, 1] - row_starts[rows[i], 1]
    keys = np.full(_table_size(total), -1, np.int64)
    # Per slot, side by side: the feature's term frequency, the weight its words' products added, its idf.
    cells = np.zeros((len(keys), 3))
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
        for j in range(row_starts[row, 0], row_starts[row + 1, 0]):
            intent = int(products[j, 0])
            char_scores[intent] += products[j, 1] * scale
            word_scores[intent] += products[j, 2] * scale
        for j in range(row_starts[row, 1], row_starts[row + 1, 1]):
            slot = _slot(keys, int(entries[j, 0]))
            cells[slot, 0] += entries[j, 1] * said
            cells[slot, 1] += entries[j, 2] * scale
            cells[slot, 2] = entries[j, 3]
    for j in range(len(extra_features)):
        slot = _slot(keys, extra_features[j])
        cells[slot, 0] += extra_counts[j]
        cells[slot, 2] = idf[extra_features[j]]
    values = np.zeros(len(keys))
    squares = np.zeros(2)
    sums = np.zeros(2)
    m = 0
    for slot in range(len(keys)):
        feature = keys[slot]
        if feature < 0:
            continue
        weight = (1.0 + np.log(cells[slot, 0])) * cells[slot, 2]
        block = 1 if feature >= chars else 0
        squares[block] += weight * weight
        sums[block] += weight
        values[slot] = weight
        m += 1
        rest = weight - cells[slot, 1]
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
    text: np.ndarray,
    lexicon: tuple,
    words: tuple,
    products: np.ndarray,
    by_feature: tuple,
    examples: tuple,
    ranked: int,
    intents: int,
    temperature: float,
    nearest: int,
) -> tuple:
    """A message's match in one call, from its normalised text's code points (:func:`text_parts` with ``lexicon``,
    then :func:`_bayes_tally`): the ``ranked`` likeliest of the first ``intents`` classes with their posterior
    probabilities at ``temperature`` and the "none of these" classes' likeliest and their probability together
    (:func:`posterior_rank`), and the best intent's ``nearest`` examples nearest it, with their dot products
    (:func:`nearest_examples`, on the same hash table). Nothing ranked when no feature is known. ``examples``: the
    examples' CSR matrix and each class's rows (indptr, indices, data, starts, ends)."""
    scores, keys, values, known = _bayes_tally(text_parts(text, lexicon), words, products, by_feature)
    if known == 0:
        return np.full(0, -1, np.int64), np.zeros(0), -1, 0.0, np.full(0, -1, np.int64), np.zeros(0)
    top, probabilities, background, none = posterior_rank(scores, ranked, intents, temperature)
    near, near_scores = _nearest_in(keys, values, examples, top[:1], _NONE, nearest)
    return top, probabilities, background, none, near, near_scores
