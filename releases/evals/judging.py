"""A turn's ``judge: {rubric, min_score}``, scored: by the profile's model where one is configured, else by a
deterministic judge; a judge that errs or answers what cannot be read fails the check, never passes it.

* **The model** (:func:`agents.llm.judge_asker`: the profile's endpoint and model, or the platform's): asked with
  the rubric, the customer's message, the tools' results and the answer, it replies ``{"score": 0..1, "reason"}``
  (:func:`conversations.judges.parse_verdict`). A time-out, an error or a reply without a readable score is a failed
  check that says so.
* **Offline** (no model configured), :class:`RubricRules`, deterministic: the rule-based judge's checks
  (:class:`conversations.judges.RuleBasedJudge`: the answer says something of its own, mentions a value the tools
  found when they found any, is in the customer's language), plus ``quoted`` — every phrase the rubric quotes
  (``"…"``, ``“…”``, ``'…'``) is in the answer, case and accents folded (a must: a missing one fails the verdict
  whatever the score) — and ``words`` — when the rubric and the answer
  are in the same language, at least half the rubric's content words (five letters or more) are in the answer. The
  score is the share of the applicable checks that pass (0 when the answer says nothing). Its limits: it does not
  read meaning — a rubric in another language than the answer, with nothing quoted, is met by any grounded answer
  in the customer's language, and a negation ("does not ask for anything else") is not understood. Quote what an
  answer must say for the offline judge to check it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from agents.public import judge_asker, llm_configured
from common.language import detect_language
from common.text import normalize
from conversations.public import FAILED, NOT_APPLICABLE, PASSED, JudgeCase, JudgeResult, LLMJudge, RuleBasedJudge
from releases.evals.checks import folded
from routing.public import Judge, ProfileSpec

MODEL, OFFLINE = "model", "offline"
RUBRIC_PROMPT = (
    "You grade a customer-service assistant's answer against a rubric the business wrote. Read the customer's "
    "message, the tool results (when there are any) and the answer, and score how well the answer meets the rubric, "
    'from 0 (not at all) to 1 (fully). Reply with only a JSON object: {"score": <a number from 0 to 1>, "reason": '
    '"<one short sentence>"}.'
)
_QUOTED = re.compile(r'"([^"]+)"|“([^”]+)”|(?<!\w)\'([^\']+)\'(?!\w)')
_CONTENT_WORD_CHARS = 5
_WORDS_SHARE = 0.5


@dataclass(frozen=True)
class Verdict:
    """A judge's verdict on one answer: which judge (``model`` or ``offline``), the score (``None`` when it could
    not score), why, and whether it met ``min_score``."""

    judge: str
    score: float | None
    reason: str
    passed: bool
    checks: Mapping[str, str] | None = None

    def as_dict(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"judge": self.judge, "score": self.score, "reason": self.reason, "passed": self.passed}
        if self.checks:
            shown["checks"] = dict(self.checks)
        return shown


class RubricModelJudge(LLMJudge):
    """The LLM judge asked with the business's rubric in place of the platform's own criteria."""

    def __init__(self, rubric: str) -> None:
        self.rubric = rubric

    def prompt(self, case: JudgeCase) -> str:
        _, _, read = super().prompt(case).partition("\n\n")  # the message, tool results and answer, as it shows them
        return f"{RUBRIC_PROMPT}\n\nRubric:\n{self.rubric}\n\n{read}"


class RubricRules(RuleBasedJudge):
    """The offline judge (see the module): the rule-based judge's checks, plus the rubric's quoted phrases and, in
    the answer's language, its content words."""

    name: ClassVar[str] = "rubric_rules"

    def __init__(self, rubric: str) -> None:
        self.rubric = rubric

    async def evaluate(
        self, case: JudgeCase, settings: Mapping[str, Any] | None = None, *, ask: Any = None
    ) -> JudgeResult:
        ruled = await super().evaluate(case, settings)
        checks = dict(ruled.checks)
        if checks.get("answered") != PASSED:
            return self._result(checks, dict(ruled.details), settings, reason=ruled.reason)
        answer = folded(case.answer)
        quoted = [folded("".join(match)) for match in _QUOTED.findall(self.rubric)]
        checks["quoted"] = NOT_APPLICABLE
        if quoted:
            checks["quoted"] = PASSED if all(phrase in answer for phrase in quoted) else FAILED
        checks["words"] = self._words(case.answer)
        failed = [name for name, outcome in checks.items() if outcome == FAILED]
        reason = f"Failed: {', '.join(failed)}." if failed else "All applicable checks passed."
        result = self._result(checks, dict(ruled.details), settings, reason=reason)
        if checks["quoted"] == FAILED:  # what the rubric quotes is a must, whatever the other checks score
            result.passed, result.status = False, FAILED
        return result

    def _words(self, answer: str) -> str:
        language = detect_language(self.rubric)
        if language is None or language != detect_language(answer):
            return NOT_APPLICABLE
        wanted = {word for word in normalize(self.rubric).split() if len(word) >= _CONTENT_WORD_CHARS}
        if not wanted:
            return NOT_APPLICABLE
        found = wanted & set(normalize(answer).split())
        return PASSED if len(found) >= _WORDS_SHARE * len(wanted) else FAILED


async def answer_judged(
    *, profile: ProfileSpec, judge: Judge, question: str, answer: str, tools: Sequence[Mapping[str, Any]] = ()
) -> Verdict:
    """``answer`` to ``question`` scored against ``judge``'s rubric (see the module), ``tools`` the turn's tool
    results as the conversation store keeps them (masked); never raises for a judge that fails: that is a verdict
    that did not pass."""
    case = JudgeCase(question=question, answer=answer, tool_results=tuple(tools))
    settings = {"min_score": judge.min_score}
    if llm_configured(profile):
        result = await RubricModelJudge(judge.rubric).evaluate(case, settings, ask=judge_asker(profile))
        return Verdict(MODEL, result.score, result.reason, result.passed and result.score is not None)
    result = await RubricRules(judge.rubric).evaluate(case, settings)
    return Verdict(OFFLINE, result.score, result.reason, result.passed, result.checks)
