"""Language identification's inner loop, compiled (numba): py3langid's naive Bayes over byte n-grams
(:func:`common.language.detect_language`).

py3langid walks its automaton over the text's bytes in Python and scores with NumPy: about 12 µs for a short
message in a loop, but 100–200 µs in a server, where every call finds the automaton's table (39 MB) and NumPy's
machinery out of the caches; a chat turn asks three times (the model, and the judge for the question and the
answer). Here the walk, the counts, the scores and their normalisation are one compiled call (docs/benchmarks.md).
It scores only in a process that has loaded numba for the examples tier
(:func:`common.language.language_compiled_use`), never with ``STOCK_PATHS`` on: loading numba costs more memory than
it saves time (docs/decisions/numba-kernels.md).
``cache=True`` keeps the compiled code on disk (``NUMBA_CACHE_DIR``, set by the settings).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def language_probabilities(
    data: np.ndarray,
    nextmove: np.ndarray,
    rowbase: np.ndarray,
    output: np.ndarray,
    ptc: np.ndarray,
    pc: np.ndarray,
) -> tuple[int, float]:
    """The likeliest language's column and its probability, for the UTF-8 bytes ``data``.

    The automaton (``nextmove``, ``rowbase``: a state's row of 256 moves, ``output``: the feature a state completes,
    or -1) finds the text's n-gram features; each feature's count c weighs ln(1 + c) against its row of ``ptc`` (the
    languages' log-probabilities), plus the priors ``pc``; the scores, divided by √(bytes) as py3langid calibrates
    them, are normalised into probabilities (a softmax). With no feature every language is equally likely.
    """
    found = np.empty(len(data), dtype=np.int64)
    count = 0
    state = 0
    for letter in data:
        state = nextmove[rowbase[state] + letter]
        feature = output[state]
        if feature >= 0:
            found[count] = feature
            count += 1
    languages = pc.shape[0]
    scores = np.zeros(languages, dtype=np.float32)
    if count:
        features = np.sort(found[:count])
        start = 0
        for i in range(1, count + 1):
            if i == count or features[i] != features[start]:
                weight = np.float32(math.log1p(i - start))
                for c in range(languages):
                    scores[c] += weight * ptc[features[start], c]
                start = i
        for c in range(languages):
            scores[c] += pc[c]
    scale = np.float32(1.0 / math.sqrt(max(len(data), 1)))
    best = 0
    for c in range(languages):
        scores[c] *= scale
        if scores[c] > scores[best]:
            best = c
    top = scores[best]
    total = np.float32(0.0)
    for c in range(languages):
        scores[c] = np.exp(scores[c] - top)
        total += scores[c]
    return best, float(scores[best] / total)
