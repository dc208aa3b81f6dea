"""Calibrating the examples tier (W2 6/8): the threshold and margin a profile's examples tier decides with.

The samples a profile's tier is judged on:

* **small talk** (:data:`SMALL_TALK`: greetings, thanks, a bare yes or no in Portuguese, English and Spanish) that
  no keyword takes, which the tier should leave alone. They count as samples, not as a gate like the saved tests:
  one or two common words share n-grams with many examples, and on the demo profiles leaving every one of them
  alone took thresholds that left 60 % of the examples unrouted;
* its **saved routing tests** (:mod:`routing.routing_tests`) that reach the tier — no state policy, follow-up or
  keyword decides them. A test expecting an intent (and not another method) is a message the tier should route
  there; a test expecting the fallback (``method: fallback``, ``intent: fallback``, or the fallback specialist
  with no intent) one it should leave alone;
* its **examples, each left out in turn**: every example scored against the others (the same vocabulary and
  weights, its own row masked), a message the tier should route to its intent. Its near copies — examples sharing at
  least half their words with it (:data:`NEAR_COPY`) — are left out with it: a customer's new phrasing has no
  example that close, and with them in the index the figures promised 3–4 times fewer wrong routes than new
  phrasing then got. Profiles without saved tests are
  calibrated on these alone; with tests, both count. At most :data:`LEAVE_ONE_OUT_MAX` examples are used, spread
  evenly over the index.

Every (threshold, margin) on a grid — thresholds 0.05 … 0.99, margins 0 … 0.95, by 0.01 — is scored: a sample is
*right* when the tier routes it to its intent or leaves a fallback sample alone, *wrong* when it routes it to
another intent (or routes a fallback sample), and *falls back* when it leaves alone a sample that has an intent.
A wrong route costs more than a fallback (the customer talks to the wrong specialist instead of a general one).
The chosen pair, in this order: breaks no more saved tests than the best pair does (they gate publishing); keeps
wrong routes at or below :data:`MAX_WRONG_RATE` when some pair can (else has the fewest); maximises
``right − WRONG_COST × wrong``; and of equals, has the higher threshold, then the higher margin (the more careful
rule). The result says the accuracy, wrong-route and fallback rates it gives, and those of the
settings in force, so an editor sees what changes before saving it to the draft.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from common.text import normalize
from routing.examples import ExampleIndex, ExamplesMatch
from routing.routing_tests import Case
from routing.snapshot import ProfileSpec

WRONG_COST = 3.0  # a wrong route counts as three fallbacks
MAX_WRONG_RATE = 0.05  # at most one sample in twenty routed to the wrong intent, when a rule can keep to it
LEAVE_ONE_OUT_MAX = 2_000
NEAR_COPY = 0.5  # word overlap at which an example is a near copy of another (the paraphrase set's own rule)
THRESHOLDS = np.round(np.arange(0.05, 0.991, 0.01), 2)
MARGINS = np.round(np.arange(0.0, 0.951, 0.01), 2)
NONE = ""  # the label of a sample the tier should leave alone
# Greetings, thanks and bare yes/no/ok in the platform's three languages: no routing intent should take one (a reply
# such as "sim, pode" is the state policy's or the permission step's to read, with the conversation's context).
# Every profile's rule is judged on leaving them alone (see the module docstring).
SMALL_TALK = (
    "bom dia", "boa tarde", "boa noite", "oi", "olá, tudo bem?", "obrigado", "obrigada", "valeu", "ok", "beleza",
    "sim", "sim, pode", "pode sim", "não", "não, obrigado",
    "hello", "hi there", "good morning", "thanks", "thank you", "ok thanks", "yes", "yes please", "sure", "no",
    "hola", "buenos días", "buenas tardes", "gracias", "muchas gracias", "sí", "sí, claro", "vale", "no, gracias",
)  # fmt: skip


class CalibrationError(ValueError):
    """The profile cannot be calibrated (its examples tier is off or has no examples)."""


@dataclass(frozen=True)
class Sample:
    """One message the tier is judged on: what it should give (``expected``, NONE: nothing) and what it scored."""

    text: str
    expected: str
    source: str  # "test" (a saved routing test, by name) or "example"
    name: str
    best: str
    score: float
    gap: float

    @classmethod
    def of(cls, text: str, expected: str, source: str, name: str, match: ExamplesMatch) -> Sample:
        return cls(text, expected, source, name, match.best[0], match.best[1], match.gap)


@dataclass(frozen=True)
class Figures:
    """What a (threshold, margin) gives on the samples."""

    threshold: float
    margin: float
    accuracy: float
    wrong_rate: float
    fallback_rate: float
    right: int
    wrong: int
    fell_back: int


@dataclass
class Calibration:
    chosen: Figures
    current: Figures
    samples: int
    from_tests: int
    from_examples: int
    by_source: dict[str, Figures] = field(default_factory=dict)
    mistakes: list[dict[str, Any]] = field(default_factory=list)  # the chosen rule's wrong routes, first ones

    def as_dict(self, *, at: dt.datetime | None = None, by: str = "") -> dict[str, Any]:
        """What the profile keeps (``examples_calibration``) and the admin shows."""
        return {
            "chosen": asdict(self.chosen),
            "current": asdict(self.current),
            "samples": self.samples,
            "from_tests": self.from_tests,
            "from_examples": self.from_examples,
            "by_source": {source: asdict(figures) for source, figures in self.by_source.items()},
            "mistakes": self.mistakes,
            "at": at.isoformat() if at else None,
            "by": by,
        }


def _expected(case: Case, spec: ProfileSpec) -> str | None:
    """What the tier should give for a saved test that reaches it: an intent, NONE, or None (not the tier's)."""
    expect = case.expect
    method, intent, agent = expect.get("method", ""), expect.get("intent", ""), expect.get("agent", "")
    if method == "fallback" or intent == "fallback":
        return NONE
    if method not in ("", "examples"):
        return None  # expects the classifier, a state, a goal…: not the tier's to judge
    if intent:
        return intent if intent in spec.router.intents_by_name else None
    if agent and agent == spec.fallback_agent:
        return NONE
    return None


def _reaches_tier(spec: ProfileSpec, case: Case) -> bool:
    router = spec.router
    decided = router.decide_before_examples(
        case.message,
        state=case.state or None,
        mode=spec.effective_mode,
        active_agent=case.active_specialist,
        active_intent="",
        followup_max_chars=spec.hybrid_followup_max_chars,
    )
    return decided is None


def calibration_samples(spec: ProfileSpec, cases: Sequence[Case]) -> list[Sample]:
    """The saved tests that reach the tier and the examples left out in turn (see the module docstring)."""
    index: ExampleIndex | None = spec.router.examples
    if index is None:
        raise CalibrationError(f"{spec.agent_id}: the examples tier is off or no intent has examples.")
    samples = []
    for case in cases:
        expected = _expected(case, spec)
        if expected is not None and _reaches_tier(spec, case):
            samples.append(Sample.of(case.message, expected, "test", case.name, index.match_text(case.message)))
    for text in SMALL_TALK:
        if not spec.router.match(text):  # a keyword's is not the tier's
            samples.append(Sample.of(text, NONE, "small talk", text, index.match_text(text)))
    rows = np.arange(len(index.texts))
    if len(rows) > LEAVE_ONE_OUT_MAX:
        rows = np.linspace(0, len(rows) - 1, LEAVE_ONE_OUT_MAX).astype(np.int64)
    owners = np.searchsorted(index.starts, rows, side="right") - 1
    copies = near_copies(index.texts, rows)
    for row, owner, left_out in zip(rows, owners, copies, strict=True):
        text = index.texts[row]
        match = index.match_text(text, exclude=left_out)
        samples.append(Sample.of(text, index.intents[owner], "example", f"example {row}", match))
    return samples


def words(text: str) -> set[str]:
    """A text's distinct normalised words."""
    return set(normalize(text).split())


def near_copies(texts: Sequence[str], rows: np.ndarray) -> list[np.ndarray]:
    """For each of ``rows``, the examples left out with it: itself and every example sharing at least
    :data:`NEAR_COPY` of their words with it (Jaccard), as new phrasing shares none."""
    from scipy.sparse import csr_matrix

    vocabulary: dict[str, int] = {}
    columns: list[int] = []
    indptr = [0]
    for text in texts:
        columns.extend(vocabulary.setdefault(word, len(vocabulary)) for word in words(text))
        indptr.append(len(columns))
    present = csr_matrix((np.ones(len(columns)), columns, indptr), shape=(len(texts), max(1, len(vocabulary))))
    sizes = np.diff(present.indptr)
    shared = (present[rows] @ present.T).tocsr()  # words in common, for the pairs that have any
    copies = []
    for line, row in enumerate(rows):
        others = shared.indices[shared.indptr[line] : shared.indptr[line + 1]]
        common = shared.data[shared.indptr[line] : shared.indptr[line + 1]]
        near = others[common >= NEAR_COPY * (sizes[row] + sizes[others] - common)]
        copies.append(np.union1d(near, [row]).astype(np.int64))
    return copies


def _score(samples: Sequence[Sample], thresholds: np.ndarray, margins: np.ndarray) -> dict[str, np.ndarray]:
    """Counts per (threshold, margin) on the grid: arrays of shape (len(thresholds), len(margins))."""
    score = np.asarray([sample.score for sample in samples], dtype=np.float64)
    gap = np.asarray([sample.gap for sample in samples], dtype=np.float64)
    expected = [sample.expected for sample in samples]
    hit = np.asarray([sample.best == want and want != NONE for sample, want in zip(samples, expected, strict=True)])
    wants = np.asarray([want != NONE for want in expected])
    decided = (score[None, None, :] >= thresholds[:, None, None] - 1e-9) & (
        gap[None, None, :] >= margins[None, :, None] - 1e-9
    )
    right = (decided & hit).sum(axis=2) + (~decided & ~wants).sum(axis=2)
    wrong = (decided & ~hit).sum(axis=2)
    fell_back = (~decided & wants).sum(axis=2)
    return {"right": right, "wrong": wrong, "fell_back": fell_back}


def _figures(samples: Sequence[Sample], threshold: float, margin: float) -> Figures:
    counts = _score(samples, np.asarray([threshold]), np.asarray([margin]))
    right, wrong, fell = (int(counts[key][0, 0]) for key in ("right", "wrong", "fell_back"))
    total = max(1, len(samples))
    return Figures(
        threshold=round(float(threshold), 2),
        margin=round(float(margin), 2),
        accuracy=round(right / total, 4),
        wrong_rate=round(wrong / total, 4),
        fallback_rate=round(fell / total, 4),
        right=right,
        wrong=wrong,
        fell_back=fell,
    )


def calibrate(spec: ProfileSpec, cases: Sequence[Case]) -> Calibration:
    """The threshold and margin that serve ``spec``'s samples best (see the module docstring)."""
    samples = calibration_samples(spec, cases)
    if not samples:
        raise CalibrationError(f"{spec.agent_id}: no sample to calibrate on.")
    counts = _score(samples, THRESHOLDS, MARGINS)
    tests = [sample for sample in samples if sample.source == "test"]
    # A saved test gates publishing: no rule that breaks more of them than the least any rule breaks.
    tests_wrong = _score(tests, THRESHOLDS, MARGINS)["wrong"] if tests else np.zeros_like(counts["wrong"])
    allowed = tests_wrong == tests_wrong.min()
    # Then the wrong-route ceiling, when some rule keeps to it; else the fewest wrong routes.
    wrong_rate = counts["wrong"] / len(samples)
    within = allowed & (wrong_rate <= MAX_WRONG_RATE + 1e-9)
    allowed = within if within.any() else allowed & (wrong_rate == wrong_rate[allowed].min())
    utility = np.where(allowed, counts["right"] - WRONG_COST * counts["wrong"], -np.inf)
    best = utility.max()
    # The most careful of the best: highest threshold, then highest margin.
    candidates = np.argwhere(utility == best)
    t_index, m_index = max(candidates.tolist(), key=lambda pair: (pair[0], pair[1]))
    threshold, margin = float(THRESHOLDS[t_index]), float(MARGINS[m_index])
    chosen = _figures(samples, threshold, margin)
    router = spec.router
    mistakes = [
        {"source": s.source, "name": s.name, "text": s.text, "expected": s.expected or "fallback", "got": s.best}
        for s in samples
        if s.score >= threshold - 1e-9 and s.gap >= margin - 1e-9 and s.best != s.expected
    ][:10]
    return Calibration(
        chosen=chosen,
        current=_figures(samples, router.examples_threshold, router.examples_margin),
        samples=len(samples),
        from_tests=sum(1 for s in samples if s.source == "test"),
        from_examples=sum(1 for s in samples if s.source == "example"),
        by_source={
            source: _figures([s for s in samples if s.source == source], threshold, margin)
            for source in ("test", "small talk", "example")
            if any(s.source == source for s in samples)
        },
        mistakes=mistakes,
    )


def calibration_save(profile: Any, result: Calibration, *, user: Any = None) -> None:
    """Write the chosen threshold and margin to the profile's draft, with the figures that chose them."""
    from django.utils import timezone

    profile.examples_threshold = result.chosen.threshold
    profile.examples_margin = result.chosen.margin
    by = getattr(user, "get_username", lambda: "")() if user is not None else "system"
    profile.examples_calibration = result.as_dict(at=timezone.now(), by=by)
    profile.save(update_fields=["examples_threshold", "examples_margin", "examples_calibration", "updated_at"])
