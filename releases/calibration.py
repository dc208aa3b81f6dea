"""Calibrating the examples tier: the threshold and margin a profile's examples tier decides with, and the stricter
bar for the intents that set a conversation state.

The samples a profile's tier is judged on:

* **replies and small talk** (:data:`SMALL_TALK`: greetings, thanks, a bare yes or no in Portuguese, English and
  Spanish) that nothing before the tier takes (the small-talk step reads most of them), which the tier should leave
  alone;
* **out of scope**: the profile's out-of-scope examples, and a spread of the shipped "none of these" corpus
  (:mod:`routing.background`), each left out in turn with its near copies — messages the tier should leave alone;
* its **saved routing tests** (:mod:`releases.routing_tests`) that reach the tier — no state policy, follow-up or
  keyword decides them. A test expecting an intent (and not another method) is a message the tier should route
  there; a test expecting the fallback (``method: fallback``, ``intent: fallback``, or the fallback specialist
  with no intent) one it should leave alone. A conversation test is left out: its message is decided after its
  earlier turns (a reply to a flow, a correction), not alone;
* its **examples, each left out in turn**: every example scored against the others (the same vocabulary and
  weights, its own row masked), a message the tier should route to its intent. Its near copies — examples sharing at
  least half their words with it (:data:`NEAR_COPY`) — are left out with it: a customer's new phrasing has no
  example that close, and with them in the index the figures promised 3–4 times fewer wrong routes than new
  phrasing then got. Profiles without saved tests are
  calibrated on these alone; with tests, both count. At most :data:`LEAVE_ONE_OUT_MAX` examples are used, spread
  evenly over the index.

Every (threshold, margin) on a grid — thresholds 0.05 … 0.99 by 0.01 and 0.995, 0.999; margins 0 … 0.95 by 0.01 — is
scored: a sample is *right* when the tier routes it to its intent or leaves a fallback sample alone, *wrong* when it
routes it to another intent (or routes a fallback sample), and *falls back* when it leaves alone a sample that has
an intent. A wrong route costs more than a fallback (the customer talks to the wrong specialist instead of a general
one). The chosen pair, in this order: breaks no more saved tests than the best pair does (they gate publishing);
leaves out-of-scope samples alone as the rule in force does, or :data:`OUT_OF_SCOPE_LEFT` of them when that rule
leaves more (calibrating never trades them away below that; when no pair on the grid can, the most that any can);
keeps wrong routes at or below :data:`MAX_WRONG_RATE` when some pair can (else has the fewest); maximises
``right − WRONG_COST × wrong``; and of equals, has the higher threshold, then the higher margin (the more careful
rule).

The result says, for the chosen rule and the one in force, the accuracy, the wrong routes, the fallbacks and the
out-of-scope samples left alone, in figures and in words (:meth:`Calibration.explanation`); a **reliability table**
— of the samples the chosen rule routes, how many are right at each score — with its expected calibration error,
which the route preview reads to say how often a decision at a score is right; the **state bar**: the lowest
score at which at most two in a hundred of the samples that would set a conversation state are out of scope or
wrongly routed; the **keywords that take
out-of-scope samples** (where an exclusion helps); the **cross-language captures**: keywords limited to no
language that take messages of another intent or of none, written in a language in which their own intent's examples
never use them (where limiting the keyword to its languages helps); and the **keyword check**: the lowest "none of
these" score, at least 0.9, at which none of the profile's own examples or saved tests with one keyword would have
it set aside — a lone keyword in another sense, in a message that reads as none of these, then leaves it to the
tier.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from common.language import LANGUAGES, detect_language
from common.text import normalize
from releases.routing_tests import Case
from routing.public import BACKGROUND_PREFIX, OUT_OF_SCOPE, ExampleIndex, ExamplesMatch, ProfileSpec

WRONG_COST = 4.0  # a wrong route counts as four fallbacks
MAX_WRONG_RATE = 0.03  # at most three samples in a hundred routed to the wrong intent, when a rule can keep to it
# Of the samples that would set a conversation state, at most two in a hundred may be ones that should not (a move that
# sets a state holds the customer in a flow: stricter than a route).
MAX_STATE_WRONG_RATE = 0.02
OUT_OF_SCOPE_LEFT = 0.95  # out-of-scope samples a rule leaves alone, at least, unless the rule in force left fewer
LEAVE_ONE_OUT_MAX = 2_000  # the intents' examples left out in turn, at most
CORPUS_SAMPLES = 600  # the shipped corpus's messages left out in turn, spread over it
NEAR_COPY = 0.5  # word overlap at which an example is a near copy of another (the paraphrase set's own rule)
THRESHOLDS = np.concatenate([np.round(np.arange(0.05, 0.991, 0.01), 2), [0.995, 0.999]])
MARGINS = np.round(np.arange(0.0, 0.951, 0.01), 2)
STATE_BARS = np.concatenate([np.round(np.arange(0.5, 0.991, 0.01), 2), [0.995, 0.999, 1.0]])
# The keyword check's bar (the "none of these" score at which a keyword is set aside): at least 0.9, whatever the
# samples say — a keyword is an editor's explicit rule.
KEYWORD_CHECK_BARS = np.concatenate([np.round(np.arange(0.9, 0.991, 0.01), 2), [0.995, 0.999, 1.0]])
# The reliability table's score ranges (a decision's score is at least the threshold).
RELIABILITY_EDGES = (0.0, 0.5, 0.7, 0.8, 0.9, 0.95, 0.99, 0.999, 1.0001)
NONE = ""  # the label of a sample the tier should leave alone
OUT_OF_SCOPE_SOURCES = ("small talk", "out of scope", "corpus")  # samples that belong to no intent
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
    source: str  # "test" (a saved routing test, by name), "example", "small talk", "out of scope" or "corpus"
    name: str
    best: str
    score: float
    gap: float

    @classmethod
    def of(cls, text: str, expected: str, source: str, name: str, match: ExamplesMatch) -> Sample:
        return cls(text, expected, source, name, match.best[0], match.best[1], match.gap)


@dataclass(frozen=True)
class Figures:
    """What a (threshold, margin) gives on the samples: of all of them, right, wrong and fallen back; of those that
    belong to no intent, how many it leaves alone (``out_of_scope_left`` of ``out_of_scope``)."""

    threshold: float
    margin: float
    accuracy: float
    wrong_rate: float
    fallback_rate: float
    right: int
    wrong: int
    fell_back: int
    out_of_scope: int = 0
    out_of_scope_left: int = 0
    out_of_scope_left_rate: float = 1.0


@dataclass(frozen=True)
class Reliability:
    """Of the samples a rule routes with a score in [low, high): how many, how many right, their mean score."""

    low: float
    high: float
    routed: int
    right: int
    mean_score: float

    @property
    def right_rate(self) -> float:
        return self.right / self.routed if self.routed else 0.0


@dataclass
class Calibration:
    chosen: Figures
    current: Figures
    samples: int
    from_tests: int
    from_examples: int
    from_out_of_scope: int = 0
    by_source: dict[str, Figures] = field(default_factory=dict)
    mistakes: list[dict[str, Any]] = field(default_factory=list)  # the chosen rule's wrong routes, first ones
    reliability: list[Reliability] = field(default_factory=list)  # the chosen rule's, by score
    calibration_error: float = 0.0  # expected calibration error of the chosen rule's routed samples
    state_threshold: float = 1.0  # the lowest bar at which ≤ 2 % of the samples setting a state are wrong
    current_state_threshold: float = 1.0
    # Keywords that take out-of-scope samples (the profile's and the corpus's) before the tier, by how many: where an
    # exclusion ("not in") would help.
    keyword_conflicts: list[dict[str, Any]] = field(default_factory=list)
    # Keywords limited to no language that take samples in a language their intent's examples do not use them in,
    # with the languages to limit them to (:func:`keyword_language_captures`).
    keyword_language_captures: list[dict[str, Any]] = field(default_factory=list)
    # The keyword check: the lowest bar at which no in-scope sample with a keyword is set aside, and how many of the
    # out-of-scope samples a keyword takes it sets aside.
    keyword_check: float = 1.0
    current_keyword_check: float = 1.0
    keyword_check_set_aside: int = 0

    def as_dict(self, *, at: dt.datetime | None = None, by: str = "") -> dict[str, Any]:
        """What the profile keeps (``examples_calibration``) and the admin shows."""
        return {
            "chosen": asdict(self.chosen),
            "current": asdict(self.current),
            "samples": self.samples,
            "from_tests": self.from_tests,
            "from_examples": self.from_examples,
            "from_out_of_scope": self.from_out_of_scope,
            "by_source": {source: asdict(figures) for source, figures in self.by_source.items()},
            "mistakes": self.mistakes,
            "reliability": reliability_table(self.reliability),
            "calibration_error": self.calibration_error,
            "state_threshold": self.state_threshold,
            "keyword_conflicts": self.keyword_conflicts,
            "keyword_language_captures": self.keyword_language_captures,
            "keyword_check": self.keyword_check,
            "keyword_check_set_aside": self.keyword_check_set_aside,
            "explanation": self.explanation(),
            "at": at.isoformat() if at else None,
            "by": by,
        }

    def trade_off(self) -> str:
        """The sentence an editor reads before accepting a rule that routes fewer samples right or sends more to the
        fallback than the rule in force: what it costs, in figures and in words, and what it buys ("" when it costs
        neither)."""
        new, old = self.chosen, self.current
        worse = new.accuracy < old.accuracy - 1e-9
        more_fallbacks = new.fallback_rate > old.fallback_rate + 1e-9
        if not (worse or more_fallbacks):
            return ""
        costs = []
        if worse:
            costs.append(
                "routes {} of the messages it was checked on right instead of {}".format(
                    *_percents(new.accuracy, old.accuracy)
                )
            )
        if more_fallbacks:
            costs.append(
                "sends {} to the fallback instead of {}".format(*_percents(new.fallback_rate, old.fallback_rate))
            )
        sentence = "With this rule the examples tier " + ", and ".join(costs)
        if more_fallbacks:
            sentence += (
                f": {_one_in(new.fallback_rate)} messages that no keyword decides will reach the fallback specialist "
                "rather than a guess"
            )
        gains = []
        if new.wrong_rate < old.wrong_rate - 1e-9:
            gains.append("fewer wrong routes ({} instead of {})".format(*_percents(new.wrong_rate, old.wrong_rate)))
        if new.out_of_scope and new.out_of_scope_left_rate > old.out_of_scope_left_rate + 1e-9:
            gains.append(
                "more messages that belong to no intent left alone ({} instead of {})".format(
                    *_percents(new.out_of_scope_left_rate, old.out_of_scope_left_rate)
                )
            )
        if gains:
            sentence += ", in exchange for " + " and ".join(gains)
        return sentence + "."

    def explanation(self) -> list[str]:
        """The trade-off in words: first what the chosen rule costs against the rule in force (:meth:`trade_off`),
        when it costs something, then :meth:`details`."""
        trade_off = self.trade_off()
        return [trade_off, *self.details()] if trade_off else self.details()

    def details(self) -> list[str]:
        """What the chosen rule does against the rule in force, and how far its scores can be read as how often a
        decision is right."""
        new, old = self.chosen, self.current
        lines = [
            f"Under the chosen rule the examples tier routes {_percent(new.accuracy)} of the samples right (in force: "
            f"{_percent(old.accuracy)}), sends {_percent(new.wrong_rate)} to a wrong intent (in force: "
            f"{_percent(old.wrong_rate)}) and leaves {_percent(new.fallback_rate)} that it could route to the "
            f"fallback (in force: {_percent(old.fallback_rate)}).",
        ]
        if new.out_of_scope:
            lines.append(
                f"Of {new.out_of_scope} messages that belong to no intent it leaves "
                f"{_percent(new.out_of_scope_left_rate)} alone (in force: {_percent(old.out_of_scope_left_rate)}); "
                f"calibrating keeps at least {_percent(OUT_OF_SCOPE_LEFT)} of them alone, or what the rule in force "
                "left when that was fewer."
            )
        if new.accuracy > old.accuracy + 1e-9:
            lines.append("It routes more messages right than the rule in force, within the same limits.")
        routed = sum(row.routed for row in self.reliability)
        if routed:
            lines.append(
                f"Its scores read as how often a decision is right: on the {routed} samples it routes, the average "
                f"gap between the score and the share right at that score is {self.calibration_error:.3f} "
                "(expected calibration error; 0 is perfectly calibrated)."
            )
        if self.keyword_conflicts:
            taken = sum(conflict["count"] for conflict in self.keyword_conflicts)
            lines.append(
                f"Keywords take {taken} messages that belong to no intent before the examples tier reads them (listed "
                'below): an exclusion on the keyword ("not in") leaves them alone.'
            )
        if self.keyword_language_captures:
            taken = sum(capture["count"] for capture in self.keyword_language_captures)
            lines.append(
                f"Keywords take {taken} messages written in a language in which their intent's examples never use them "
                "(listed below): limiting each keyword to the languages suggested leaves them to the other tiers."
            )
        if self.keyword_check < 1.0:
            lines.append(
                f"A keyword will not count when the examples read the whole message as none of these with a score of "
                f"{self.keyword_check:.3f} or more (in force: {self.current_keyword_check:.3f}): that sets aside "
                f"{self.keyword_check_set_aside} of the out-of-scope messages keywords take, and none of the profile's "
                "own examples or saved tests with a keyword."
            )
        if self.state_threshold != self.current_state_threshold:
            lines.append(
                f"Intents that set a conversation state need a score of {self.state_threshold:.3f} or more to set it "
                f"(in force: {self.current_state_threshold:.3f}): from there at most 2 in 100 of the samples that "
                "would set a state are out of scope or wrongly routed."
            )
        return lines


def _percent(rate: float) -> str:
    return f"{rate * 100:.1f} %"


def _percents(new: float, old: float) -> tuple[str, str]:
    """Two rates as whole percents ("75 %", "80 %"), with a decimal where whole ones would read the same."""
    digits = 0 if round(new * 100) != round(old * 100) else 1
    return f"{new * 100:.{digits}f} %", f"{old * 100:.{digits}f} %"


def _one_in(rate: float) -> str:
    """A share in words a reader pictures: "about 1 in 4", or "about 6 in 10" for more than a few in ten."""
    if rate < 0.45:
        return f"about 1 in {round(1 / rate)}"
    return f"about {round(rate * 10)} in 10"


SHORT_TEXT = 40  # characters of a message that name a sample
SOURCE_WORDS = {
    "example": "an example of the intent",
    "small talk": "small talk",
    "out of scope": "the profile's out-of-scope examples",
    "corpus": "the shipped set of messages that belong to no intent",
}


def sample_label(sample: Sample) -> str:
    """A sample as an editor recognises it, by intent and message: "support_request: 'Fui atendido muito mal…'"
    (a message that belongs to no intent: "none of these: 'boa tarde'")."""
    return f"{sample.expected or 'none of these'}: '{_shorten(sample.text)}'"


def sample_origin(sample: Sample) -> str:
    """Where a sample comes from, in words: a saved test by its name, an intent's example, small talk…"""
    if sample.source == "test":
        return f"saved test “{sample.name}”"
    return SOURCE_WORDS.get(sample.source, sample.source)


def _shorten(text: str, limit: int = SHORT_TEXT) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] or text[:limit]
    return cut.rstrip(" ,.;:") + "…"


def reliability_table(rows: Sequence[Reliability]) -> list[dict[str, Any]]:
    """The reliability table as plain data (what a version's document and the calibration page keep)."""
    return [
        {
            "low": row.low,
            "high": min(row.high, 1.0),
            "routed": row.routed,
            "right": row.right,
            "right_rate": round(row.right_rate, 4),
            "mean_score": round(row.mean_score, 4),
        }
        for row in rows
    ]


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


def _reaches_tier(spec: ProfileSpec, text: str, state: str = "", active_specialist: str = "") -> bool:
    router = spec.router
    decided = router.decide_before_examples(
        text,
        state=state or None,
        mode=spec.effective_mode,
        active_agent=active_specialist,
        active_intent="",
        followup_max_chars=spec.hybrid_followup_max_chars,
    )
    return decided is None


def _spread(rows: np.ndarray, most: int) -> np.ndarray:
    """At most ``most`` of ``rows``, spread evenly over them."""
    if len(rows) <= most:
        return rows
    return rows[np.linspace(0, len(rows) - 1, most).astype(np.int64)]


def calibration_samples(spec: ProfileSpec, cases: Sequence[Case]) -> list[Sample]:
    """The saved tests that reach the tier, replies and small talk, and the examples — the intents', the profile's
    out-of-scope ones and a spread of the shipped corpus — each left out in turn (see the module docstring)."""
    index: ExampleIndex | None = spec.router.examples
    if index is None:
        raise CalibrationError(f"{spec.agent_id}: the examples tier is off or no intent has examples.")
    samples = []
    for case in cases:
        if case.turns:  # decided after its turns: alone it says nothing of the tier
            continue
        expected = _expected(case, spec)
        if expected is not None and _reaches_tier(spec, case.message, case.state, case.active_specialist):
            samples.append(Sample.of(case.message, expected, "test", case.name, index.match_text(case.message)))
    for text in SMALL_TALK:
        if _reaches_tier(spec, text):  # a keyword's, or the small-talk step's, is not the tier's
            samples.append(Sample.of(text, NONE, "small talk", text, index.match_text(text)))
    owners_of = np.searchsorted(index.starts, np.arange(len(index.texts)), side="right") - 1
    intents = len(index.intents)
    rows = _spread(np.flatnonzero(owners_of < intents), LEAVE_ONE_OUT_MAX)
    own = np.flatnonzero(np.asarray([label == BACKGROUND_PREFIX + OUT_OF_SCOPE for label in index.classes])[owners_of])
    corpus = _spread(np.setdiff1d(np.flatnonzero(owners_of >= intents), own), CORPUS_SAMPLES)
    chosen = np.concatenate([rows, own, corpus])
    for row, left_out in zip(chosen, near_copies(index.texts, chosen), strict=True):
        text = index.texts[row]
        owner = int(owners_of[row])
        if owner < intents:
            expected, source, name = index.classes[owner], "example", f"example {row}"
        else:
            expected, source = NONE, "out of scope" if row in own else "corpus"
            name = f"{source} {row}"
        if source != "example" and not _reaches_tier(spec, text):
            continue  # small talk or a keyword decides it before the tier
        samples.append(Sample.of(text, expected, source, name, index.match_text(text, exclude=left_out)))
    return samples


def keyword_conflicts(spec: ProfileSpec, *, examples: int = 3) -> list[dict[str, Any]]:
    """The out-of-scope messages of the profile's background (its own out-of-scope examples and the shipped corpus)
    that a keyword takes, by intent and keyword, most first, with up to ``examples`` of them each (the profile's own
    first)."""
    index = spec.router.examples
    if index is None:
        return []
    owners = np.searchsorted(index.starts, np.arange(len(index.texts)), side="right") - 1
    own = np.asarray([label == BACKGROUND_PREFIX + OUT_OF_SCOPE for label in index.classes])[owners]
    taken: dict[tuple[str, str], list[str]] = {}
    for row in sorted(np.flatnonzero(owners >= len(index.intents)), key=lambda row: (not own[row], row)):
        text = index.texts[row]
        hits = spec.router.match(text)
        if hits:
            taken.setdefault((hits[0].intent.name, hits[0].keywords[0]), []).append(text)
    return [
        {"intent": intent, "keyword": keyword, "count": len(texts), "examples": texts[:examples]}
        for (intent, keyword), texts in sorted(taken.items(), key=lambda item: (-len(item[1]), item[0]))
    ]


def keyword_language_captures(
    spec: ProfileSpec, cases: Sequence[Case] = (), *, examples: int = 3
) -> list[dict[str, Any]]:
    """Keywords limited to no language that take a message of another intent (its examples, the saved tests that
    expect it) or of none (the profile's background) written in a language in which the keyword's own intent's
    examples never use it: by intent and keyword, most first, each with the messages' languages, up to ``examples``
    of them and ``suggested``, the languages its intent's examples use it in (those of all its examples when none
    holds it) — the limit to set. A message whose language cannot be told is no capture."""
    index = spec.router.examples
    if index is None:
        return []
    owners = np.searchsorted(index.starts, np.arange(len(index.texts)), side="right") - 1
    samples = [
        (index.texts[row], index.classes[owner] if owner < len(index.intents) else "")
        for row, owner in enumerate(owners)
    ]
    samples += [(case.message, str(case.expect.get("intent", ""))) for case in cases if not case.turns]
    used: dict[tuple[str, str], list[str]] = {}
    taken: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for text, owner in samples:
        hits = spec.router.match(text)
        if not hits or hits[0].intent.name == owner:
            continue
        intent = hits[0].intent
        limited = {keyword for keyword, languages in intent.keyword_languages if languages}
        for keyword in hits[0].keywords:
            if keyword in limited:
                continue
            if (intent.name, keyword) not in used:
                used[(intent.name, keyword)] = _languages_using(intent.examples, keyword)
            language = detect_language(text)
            if language is not None and language not in used[(intent.name, keyword)]:
                taken.setdefault((intent.name, keyword), []).append((text, language))
    return [
        {
            "intent": intent,
            "keyword": keyword,
            "count": len(found),
            "languages": [language for language in LANGUAGES if any(said == language for _text, said in found)],
            "suggested": used[(intent, keyword)],
            "examples": [text for text, _language in found[:examples]],
        }
        for (intent, keyword), found in sorted(taken.items(), key=lambda item: (-len(item[1]), item[0]))
    ]


def _languages_using(examples: Sequence[str], keyword: str) -> list[str]:
    """The languages of the ``examples`` that hold ``keyword`` (as whole words, normalised), in the platform's order;
    of all of them when none holds it."""
    padded = f" {normalize(keyword)} "
    holding = [example for example in examples if padded in f" {normalize(example)} "]
    told = {detect_language(example) for example in holding or examples}
    return [language for language in LANGUAGES if language in told]


def _one_keyword(router: Any, text: str) -> bool:
    """The message hits one keyword of one intent: what the keyword check may set aside."""
    hits = router.keyword_match(text).hits
    return len(hits) == 1 and len(hits[0].keywords) == 1


def _keyword_check(spec: ProfileSpec, cases: Sequence[Case]) -> tuple[float, int]:
    """The keyword check's bar (:data:`KEYWORD_CHECK_BARS`): the lowest at which no in-scope sample with one keyword —
    an intent's example (left out in turn with its near copies) or a saved test expecting a keyword decision — is set
    aside: none reads as none of these, and none whose keyword is its own intent's reads as not that intent, with at
    least the bar; and how many out-of-scope samples with a keyword (the background's, left out in turn) it sets
    aside."""
    router, index = spec.router, spec.router.examples
    if index is None or index.vectoriser.remote:
        return 1.0, 0
    owners = np.searchsorted(index.starts, np.arange(len(index.texts)), side="right") - 1
    with_keyword = np.asarray([_one_keyword(router, text) for text in index.texts], dtype=bool)
    inside = np.flatnonzero(with_keyword & (owners < len(index.intents)))
    outside = np.flatnonzero(with_keyword & (owners >= len(index.intents)))

    def set_aside_by(text: str, match: Any, owner: str) -> float:
        """How sure the examples are to set the sample's keyword aside: that it reads as none of these, or, when the
        keyword is ``owner``'s, as not ``owner``."""
        keyword_intent = router.keyword_match(text).hits[0].intent.name
        return match.elsewhere(owner) if keyword_intent == owner else match.none_of_these[1]

    def elsewhere(rows: np.ndarray) -> list[float]:
        """How sure the examples are that each out-of-scope sample is not its keyword's intent."""
        return [
            index.match_text(index.texts[row], exclude=left).elsewhere(
                router.keyword_match(index.texts[row]).hits[0].intent.name
            )
            for row, left in zip(rows, near_copies(index.texts, rows), strict=True)
        ]

    examples = [
        set_aside_by(index.texts[row], index.match_text(index.texts[row], exclude=left), index.intents[owners[row]])
        for row, left in zip(inside, near_copies(index.texts, inside), strict=True)
    ]
    tests = [
        set_aside_by(case.message, index.match_text(case.message), case.expect.get("intent", ""))
        for case in cases
        if not case.turns and case.expect.get("method") == "keyword" and _one_keyword(router, case.message)
    ]
    highest = max([*examples, *tests], default=0.0)
    bar = float(next((bar for bar in KEYWORD_CHECK_BARS if bar > highest + 1e-12), 1.0))
    return bar, sum(1 for score in elsewhere(outside) if score >= bar) if bar < 1.0 else 0


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
    wants = np.asarray([want != NONE for want in expected], dtype=bool)
    decided = (score[None, None, :] >= thresholds[:, None, None] - 1e-9) & (
        gap[None, None, :] >= margins[None, :, None] - 1e-9
    )
    right = (decided & hit).sum(axis=2) + (~decided & ~wants).sum(axis=2)
    wrong = (decided & ~hit).sum(axis=2)
    fell_back = (~decided & wants).sum(axis=2)
    out_left = (~decided & ~wants).sum(axis=2)
    return {"right": right, "wrong": wrong, "fell_back": fell_back, "out_left": out_left}


def _figures(samples: Sequence[Sample], threshold: float, margin: float) -> Figures:
    counts = _score(samples, np.asarray([threshold]), np.asarray([margin]))
    right, wrong, fell, out_left = (int(counts[key][0, 0]) for key in ("right", "wrong", "fell_back", "out_left"))
    total = max(1, len(samples))
    out = sum(1 for sample in samples if sample.expected == NONE)
    return Figures(
        threshold=round(float(threshold), 3),
        margin=round(float(margin), 2),
        accuracy=round(right / total, 4),
        wrong_rate=round(wrong / total, 4),
        fallback_rate=round(fell / total, 4),
        right=right,
        wrong=wrong,
        fell_back=fell,
        out_of_scope=out,
        out_of_scope_left=out_left,
        out_of_scope_left_rate=round(out_left / out, 4) if out else 1.0,
    )


def _reliability(samples: Sequence[Sample], threshold: float, margin: float) -> tuple[list[Reliability], float]:
    """Of the samples the rule routes, by score: how many and how many right; and the expected calibration error
    (the routed samples' mean gap between a range's mean score and its share right, weighed by the range's size)."""
    routed = [s for s in samples if s.score >= threshold - 1e-9 and s.gap >= margin - 1e-9]
    rows = []
    for low, high in itertools.pairwise(RELIABILITY_EDGES):
        inside = [s for s in routed if low <= s.score < high]
        if inside:
            right = sum(1 for s in inside if s.best == s.expected)
            rows.append(Reliability(low, high, len(inside), right, float(np.mean([s.score for s in inside]))))
    error = sum(row.routed * abs(row.right_rate - row.mean_score) for row in rows) / max(1, len(routed))
    return rows, round(float(error), 4)


def _state_threshold(spec: ProfileSpec, samples: Sequence[Sample], threshold: float, margin: float) -> float:
    """The lowest bar (at least ``threshold``) at which, of the samples routed under the rule at or above it to an
    intent that sets a state, at most :data:`MAX_STATE_WRONG_RATE` should not go there (out of scope, or another
    intent's). One stray sample among hundreds does not keep every move from setting a state; a few among a few do."""
    stateful = {intent.name for intent in spec.router.intents if intent.next_state}
    routed = [
        (s.score, s.best != s.expected)
        for s in samples
        if s.best in stateful and s.score >= threshold - 1e-9 and s.gap >= margin - 1e-9
    ]
    for bar in STATE_BARS:
        if bar < threshold - 1e-9:
            continue
        above = [wrong for score, wrong in routed if score >= bar - 1e-12]
        if sum(above) <= MAX_STATE_WRONG_RATE * len(above):
            return float(bar)
    return 1.0


def calibrate(spec: ProfileSpec, cases: Sequence[Case]) -> Calibration:
    """The threshold and margin that serve ``spec``'s samples best, and the state bar (see the module docstring)."""
    samples = calibration_samples(spec, cases)
    if not samples:
        raise CalibrationError(f"{spec.agent_id}: no sample to calibrate on.")
    router = spec.router
    current = _figures(samples, router.examples_threshold, router.examples_margin)
    counts = _score(samples, THRESHOLDS, MARGINS)
    tests = [sample for sample in samples if sample.source == "test"]
    # A saved test gates publishing: no rule that breaks more of them than the least any rule breaks.
    tests_wrong = _score(tests, THRESHOLDS, MARGINS)["wrong"] if tests else np.zeros_like(counts["wrong"])
    allowed = tests_wrong == tests_wrong.min()
    # Out-of-scope samples left alone: as many as the rule in force leaves, or OUT_OF_SCOPE_LEFT of them when it leaves
    # more (or the most any allowed rule leaves).
    target = int(np.ceil(OUT_OF_SCOPE_LEFT * current.out_of_scope))
    floor = min(current.out_of_scope_left, target, int(counts["out_left"][allowed].max()))
    allowed &= counts["out_left"] >= floor
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
    mistakes = [
        {
            "source": s.source,
            "name": s.name,
            "label": sample_label(s),
            "origin": sample_origin(s),
            "text": s.text,
            "expected": s.expected or "fallback",
            "got": s.best,
        }
        for s in samples
        if s.score >= threshold - 1e-9 and s.gap >= margin - 1e-9 and s.best != s.expected
    ][:10]
    reliability, error = _reliability(samples, threshold, margin)
    check, set_aside = _keyword_check(spec, cases)
    return Calibration(
        chosen=chosen,
        current=current,
        samples=len(samples),
        from_tests=len(tests),
        from_examples=sum(1 for s in samples if s.source == "example"),
        from_out_of_scope=sum(1 for s in samples if s.source in OUT_OF_SCOPE_SOURCES),
        by_source={
            source: _figures([s for s in samples if s.source == source], threshold, margin)
            for source in ("test", "example", *OUT_OF_SCOPE_SOURCES)
            if any(s.source == source for s in samples)
        },
        mistakes=mistakes,
        reliability=reliability,
        calibration_error=error,
        state_threshold=_state_threshold(spec, samples, threshold, margin),
        current_state_threshold=router.examples_state_threshold,
        keyword_conflicts=keyword_conflicts(spec),
        keyword_language_captures=keyword_language_captures(spec, cases),
        keyword_check=check,
        current_keyword_check=router.keyword_check,
        keyword_check_set_aside=set_aside,
    )


def calibration_save(profile: Any, result: Calibration, *, user: Any = None) -> None:
    """Write the chosen threshold, margin, state bar, keyword check and reliability table to the profile's draft, with
    the figures that chose them."""
    from django.utils import timezone

    profile.examples_threshold = result.chosen.threshold
    profile.examples_margin = result.chosen.margin
    profile.examples_state_threshold = result.state_threshold
    profile.examples_reliability = reliability_table(result.reliability)
    profile.examples_keyword_check = result.keyword_check
    by = getattr(user, "get_username", lambda: "")() if user is not None else "system"
    profile.examples_calibration = result.as_dict(at=timezone.now(), by=by)
    profile.save(
        update_fields=[
            "examples_threshold",
            "examples_margin",
            "examples_state_threshold",
            "examples_reliability",
            "examples_keyword_check",
            "examples_calibration",
            "updated_at",
        ]
    )
