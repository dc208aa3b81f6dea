"""Judges score an answer after the output guardrails; the review decides whether it stands.

Pure Python over plain data. Judges are looked up in :data:`JUDGES`;
:func:`judge_answer` runs the rule-based judge always and the LLM judge when the
profile's ``llm_judge`` is on; :func:`review_decision` turns their verdicts into
"accept", "replace with :data:`REVIEW_FALLBACK_ANSWER`" or — when the turn already changed something outside the
conversation — "note" (the answer stands, with :func:`review_note`). Settings are the
profile's judge settings (``agents.schemas.JUDGE_KEYS``): ``min_score``
(default 0.5), ``llm_judge`` (default off), ``replace_failed_answers`` (default on).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, ClassVar

from django.utils.translation import gettext_lazy

from common.i18n import say
from common.language import detect_language
from common.text import fold, normalize

REVIEW_FALLBACK_ANSWER = gettext_lazy(  # in the conversation's language (common.i18n.say)
    "Sorry, I could not prepare a reliable answer right now. Could you rephrase the question or ask for a person?"
)
DEFAULT_MIN_SCORE = 0.5
# What a failed answer gets in place of being replaced when the turn already changed something (a message sent, an
# order placed): the customer must not read "I could not" about what was done. In the customer's language.
REVIEW_NOTE = gettext_lazy(
    "Note: our automatic review could not confirm every detail of this answer; what was already carried out for you "
    "stays done."
)

# Judge statuses and check outcomes.
PASSED = "passed"
FAILED = "failed"
ERROR = "error"
SKIPPED = "skipped"
NOT_APPLICABLE = "not_applicable"

AskModel = Callable[[str], Awaitable[str]]


@dataclass(frozen=True)
class JudgeCase:
    """What a judge looks at.

    ``question`` and ``answer`` are the masked user message and the final answer;
    ``tool_results`` are the turn's tool calls, each ``{"tool", "status", "arguments",
    "result" | "error"}`` (a bare value counts as a successful result);
    ``boilerplate`` are the platform's own canned answers (error, blocked, fallback),
    which never count as answering.
    """

    question: str
    answer: str
    tool_results: tuple[Any, ...] = ()
    boilerplate: tuple[str, ...] = ()


@dataclass
class JudgeResult:
    """A judge's verdict. ``score`` is in [0, 1], or ``None`` when the judge could not
    score (status ``error`` or ``skipped``); ``checks`` maps a check's name to
    ``passed`` / ``failed`` / ``not_applicable``; ``details`` never hold personal data."""

    name: str
    status: str
    score: float | None = None
    passed: bool = False
    checks: dict[str, str] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "score": self.score,
            "passed": self.passed,
            "checks": self.checks,
            "details": self.details,
            "reason": self.reason,
        }


def min_score(settings: Mapping[str, Any] | None) -> float:
    return float((settings or {}).get("min_score", DEFAULT_MIN_SCORE))


class Judge:
    """Contract of a judge.

    ``await judge.evaluate(case, settings, ask=...)`` returns a :class:`JudgeResult`
    named :attr:`name`; ``passed`` is ``score >= min_score``. ``ask`` is an async
    callable sending a prompt to a model and returning its text, for judges that
    need one. A judge never raises for a bad answer, a bad model reply or a
    failing ``ask``: those become status ``error`` (cancellation still propagates).
    """

    name: ClassVar[str]

    async def evaluate(
        self, case: JudgeCase, settings: Mapping[str, Any] | None = None, *, ask: AskModel | None = None
    ) -> JudgeResult:
        raise NotImplementedError


# --- salient values: numbers, ids and dates, compared in a canonical form ---------------

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            "janeiro enero january jan",
            "fevereiro febrero february feb fev",
            "marco marzo march mar",
            "abril april apr abr",
            "maio mayo may mai",
            "junho junio june jun",
            "julho julio july jul",
            "agosto august aug ago",
            "setembro septiembre setiembre september sep sept set",
            "outubro octubre october oct out",
            "novembro noviembre november nov",
            "dezembro diciembre december dec dez dic",
        ),
        start=1,
    )
    for name in names.split()
}
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\b\.?"
_DATE_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)"), "ymd"),
    (re.compile(r"(?<![\d/])(\d{1,2})/(\d{1,2})(?:/(\d{2,4}))?(?![\d/])"), "dmy"),
    (re.compile(r"(?<!\d)(\d{4})-(\d{2})(?![\d-])"), "ym"),
    (re.compile(r"(?<![\d/])(\d{1,2})/(\d{4})(?![\d/])"), "my"),
    (re.compile(r"(?<!\d)(\d{1,2})(?:º|o)?\s+(?:de\s+)?" + _MONTH + r"(?:\s+(?:de\s+)?(\d{4}))?"), "d-month"),
    (re.compile(r"\b" + _MONTH + r"\s+(\d{1,2})(?!\d)(?:,?\s+(\d{4}))?"), "month-d"),
    (re.compile(r"\b" + _MONTH + r"(?:\s+de|\s*/)?\s+(\d{4})(?!\d)"), "month-y"),
)
# What each shape cannot match without: its separator, or a month's name (one search for the three shapes).
_SHAPE_MARKS = {"ymd": "-", "dmy": "/", "ym": "-", "my": "/"}
_NAMED_SHAPES = frozenset({"d-month", "month-d", "month-y"})
_MONTH_NAMED = re.compile(r"\b" + _MONTH)
_NUMBER = re.compile(r"(?<![\w])\d{1,3}(?:[.,]\d{3})+(?:[.,]\d+)?(?!\d)|(?<![\w])\d+(?:[.,]\d+)?(?!\d)")
_TOKEN = re.compile(r"[A-Za-z0-9][\w-]*[A-Za-z0-9]")
_DIGIT = re.compile(r"\d")
_ID = re.compile(r"^(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z0-9][\w-]{2,40}$|^\d{3,20}$")


def _fold(text: str) -> str:
    """Case and accents folded, punctuation kept (numbers and dates need it)."""
    return fold(text)


def _canonical(number: Decimal) -> str:
    return format(number.normalize(), "f")


def _number_readings(token: str) -> set[str]:
    """Every plausible value of a written number: ``289,90`` → 289.9; ``1.234`` → 1234 or 1.234."""
    commas, dots = token.count(","), token.count(".")
    candidates: list[str] = []
    if commas and dots:
        decimal_mark = "," if token.rfind(",") > token.rfind(".") else "."
        thousands = "." if decimal_mark == "," else ","
        candidates.append(token.replace(thousands, "").replace(decimal_mark, "."))
    elif commas + dots > 1:
        candidates.append(token.replace(",", "").replace(".", ""))
    elif commas + dots == 1:
        mark = "," if commas else "."
        candidates.append(token.replace(mark, "."))
        if len(token) - token.index(mark) - 1 == 3:
            candidates.append(token.replace(mark, ""))
    else:
        candidates.append(token)
    readings = set()
    for candidate in candidates:
        try:
            readings.add(_canonical(Decimal(candidate)))
        except InvalidOperation:
            continue
    return readings


def _is_salient_number(canonical: str) -> bool:
    # Single digits ("3 dias", "1 item") would ground almost any answer.
    return "." in canonical or len(canonical.lstrip("-")) >= 2


def _dates_in(text: str) -> tuple[set[tuple[str, int, int]], str]:
    """Dates found in folded ``text`` as ``("md", month, day)`` / ``("ym", year, month)``,
    and the text with them cut out (so their parts are not read as numbers)."""
    found: set[tuple[str, int, int]] = set()
    named: bool | None = None  # whether the text names a month, read once the first shape that needs one comes
    for pattern, shape in _DATE_PATTERNS:
        if shape in _NAMED_SHAPES:
            named = _MONTH_NAMED.search(text) is not None if named is None else named
            if not named:
                continue
        elif _SHAPE_MARKS[shape] not in text:
            continue  # its separator is not in the text

        def collect(match: re.Match[str], shape: str = shape) -> str:
            groups = match.groups()
            try:
                if shape == "ymd":
                    year, month, day = int(groups[0]), int(groups[1]), int(groups[2])
                    found.update({("md", month, day), ("ym", year, month)})
                elif shape == "dmy":
                    day, month = int(groups[0]), int(groups[1])
                    found.add(("md", month, day))
                    if groups[2] and len(groups[2]) == 4:
                        found.add(("ym", int(groups[2]), month))
                elif shape == "ym":
                    found.add(("ym", int(groups[0]), int(groups[1])))
                elif shape == "my":
                    found.add(("ym", int(groups[1]), int(groups[0])))
                elif shape == "d-month":
                    month = _MONTHS[groups[1]]
                    found.add(("md", month, int(groups[0])))
                    if groups[2]:
                        found.add(("ym", int(groups[2]), month))
                elif shape == "month-d":
                    month = _MONTHS[groups[0]]
                    found.add(("md", month, int(groups[1])))
                    if groups[2]:
                        found.add(("ym", int(groups[2]), month))
                else:
                    found.add(("ym", int(groups[1]), _MONTHS[groups[0]]))
            except (KeyError, ValueError):
                return match.group()
            return " "

        text = pattern.sub(collect, text)
    return {item for item in found if 1 <= (item[1] if item[0] == "md" else item[2]) <= 12}, text


def _values_in_text(text: str) -> set[tuple[Any, ...]]:
    """Dates, numbers (every reading) and ids written in free text."""
    folded = _fold(text)
    if not _DIGIT.search(folded):  # each of them holds a digit: most of a tool result's texts hold none
        return set()
    dates, rest = _dates_in(folded)
    values: set[tuple[Any, ...]] = set(dates)
    values |= {("id", normalize(token)) for token in _TOKEN.findall(text) if _ID.match(token)}
    for match in _NUMBER.finditer(rest):
        values |= {("number", reading) for reading in _number_readings(match.group())}
    return values


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _salient_values(value: Any) -> set[tuple[Any, ...]]:
    """Numbers, ids, dates and amounts inside a tool result, in canonical form."""
    found: set[tuple[Any, ...]] = set()
    value = _maybe_json(value)
    if isinstance(value, bool) or value is None:
        return found
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            return found
        canonical = _canonical(Decimal(repr(value)))
        if _is_salient_number(canonical):
            found.add(("number", canonical))
        return found
    if isinstance(value, str):
        text = value.strip()
        if _ID.match(text):
            found.add(("id", normalize(text)))
        found |= {item for item in _values_in_text(text) if item[0] != "number" or _is_salient_number(item[1])}
        return found
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, list | tuple):
        for item in value:
            found |= _salient_values(item)
    return found


def _answer_mentions(answer: str, values: Iterable[tuple[Any, ...]]) -> int:
    in_text = _values_in_text(answer)
    return sum(1 for value in values if value in in_text)


_OK_STATUSES = frozenset({"ok", "success", "succeeded", "completed", "done"})


def _successful_results(tool_results: Iterable[Any]) -> list[tuple[Any, Any]]:
    """``(result, arguments)`` of every tool call that succeeded."""
    results = []
    for item in tool_results:
        if isinstance(item, Mapping) and ({"result", "status", "error"} & set(item)):
            status = str(item.get("status") or "ok").lower()
            if item.get("error") or status not in _OK_STATUSES or item.get("result") is None:
                continue
            results.append((item["result"], item.get("arguments") or {}))
        elif item is not None:
            results.append((item, {}))
    return results


# --- language ------------------------------------------------------------------------

# Quoted text (straight, curly and angle quotes) is someone else's words, not the answer's language.
_QUOTED = re.compile(r'"[^"]*"|“[^”]*”|«[^»]*»')
# A bilingual answer's parts: sentences and parenthesised asides.
_PARTS = re.compile(r"[.!?;:()\n]+")
# Fewer words than this in a part are too few to tell its language apart from the whole's.
_PART_WORDS = 4
# The answer's language is read from its opening, its own words up to this many characters (the whole when that
# opening is not in the user's language): a reading costs its text's length, and an answer may run to thousands of
# characters. 900 texts of two to eight of the platform's own sentences (pt, es, en; 250 characters at the median)
# read the same from their first 60 characters as whole.
LANGUAGE_OPENING_CHARS = 100


def unquoted(text: str) -> str:
    """``text`` without what it quotes (straight, curly and angle quotes): the words it says itself."""
    return _QUOTED.sub(" ", text)


def _quoted_data(value: Any, text: str, found: set[str]) -> None:
    """Every key and text value inside a tool call (names, statuses, summaries) that ``text`` (case-folded)
    holds: data the answer quotes, not its prose."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            piece = item.casefold().strip()
            if len(piece) > 2 and piece in text:  # two letters or fewer ("de", "ok") would cut its own words
                found.add(piece)
        elif kind is dict or (kind not in _SCALARS and isinstance(item, Mapping)):
            stack.extend(item)
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)


_SCALARS = frozenset({int, float, bool, type(None)})


def _cut(text: str, piece: str) -> str:
    """``text`` without ``piece`` wherever it stands as whole words."""
    kept, start = [], 0
    while (found := text.find(piece, start)) >= 0:
        end = found + len(piece)
        whole = (found == 0 or not text[found - 1].isalnum()) and (end == len(text) or not text[end].isalnum())
        kept.append(text[start:found] + " " if whole else text[start:end])
        start = end
    kept.append(text[start:])
    return "".join(kept)


def _opening(text: str) -> str:
    """The first words of ``text`` within :data:`LANGUAGE_OPENING_CHARS` characters; the whole when shorter."""
    if len(text) <= LANGUAGE_OPENING_CHARS:
        return text
    return text[: LANGUAGE_OPENING_CHARS + 1].rsplit(" ", 1)[0]


def _own_words(answer: str, question: str, tool_results: Sequence[Any]) -> list[str]:
    """The answer's parts (sentences, asides), normalised, without what it quotes: quoted text, the user's
    message and the tool calls' text, wherever they stand whole in it."""
    text = unquoted(answer).casefold()
    quoted: set[str] = set()
    _quoted_data(question, text, quoted)
    for item in tool_results:
        if isinstance(item, Mapping) and {"tool", "result", "error"} & set(item):
            _quoted_data([item.get("tool"), item.get("arguments"), item.get("result"), item.get("error")], text, quoted)
        else:
            _quoted_data(item, text, quoted)
    # Longest first, so a summary goes whole before a shorter value inside it.
    for piece in sorted(quoted, key=len, reverse=True):
        text = _cut(text, piece)
    return [part for part in map(normalize, _PARTS.split(text)) if part]


# --- judges -------------------------------------------------------------------------------


def _boilerplate_only(answer: str, boilerplate: Sequence[str]) -> bool:
    remaining = f" {normalize(answer)} "
    for text in boilerplate:
        folded = normalize(text)
        if folded:
            remaining = remaining.replace(f" {folded} ", " ")
    return len(remaining.split()) < 3


class RuleBasedJudge(Judge):
    """The default judge: deterministic checks, score = share of applicable checks passed.

    * ``answered`` — the answer is not empty and not only the platform's boilerplate.
      When it fails, the other checks are not applicable and the score is 0.
    * ``grounded`` — when tools succeeded, the answer mentions at least one salient
      value of their results (a number, id, date or amount, compared in canonical
      form: ``289.9`` = ``289,90`` = ``R$ 289,90``; ``2025-06-10`` = ``10/06``), values
      the user or the tool arguments already gave not counting when others exist.
      Not applicable when no tool succeeded or the results hold no such value.
    * ``language_matches`` — the answer is in the user's language (pt, es, en, told by
      :func:`common.language.detect_language`), read without what it quotes: quoted text,
      the user's own message and the tool results' text, so an answer in another language
      that echoes the user's words fails; read from its opening (:data:`LANGUAGE_OPENING_CHARS`),
      and whole when the opening is not in the user's language. A bilingual answer with a sentence
      of its own in the user's language passes. Not applicable when either language cannot be told.
    """

    name = "rule_based"

    async def evaluate(
        self, case: JudgeCase, settings: Mapping[str, Any] | None = None, *, ask: AskModel | None = None
    ) -> JudgeResult:
        checks: dict[str, str] = {}
        details: dict[str, Any] = {}
        answer = case.answer.strip()
        if not answer or _boilerplate_only(answer, case.boilerplate):
            checks = {"answered": FAILED, "grounded": NOT_APPLICABLE, "language_matches": NOT_APPLICABLE}
            details["answered"] = {"reason": "empty" if not answer else "boilerplate"}
            return self._result(checks, details, settings, reason="The answer is empty or only a canned message.")
        checks["answered"] = PASSED
        checks["grounded"], details["grounded"] = self._grounded(case)
        checks["language_matches"], details["language_matches"] = self._language(case)
        failed = [name for name, outcome in checks.items() if outcome == FAILED]
        reason = f"Failed: {', '.join(failed)}." if failed else "All applicable checks passed."
        return self._result(checks, details, settings, reason=reason)

    def _result(
        self, checks: dict[str, str], details: dict[str, Any], settings: Mapping[str, Any] | None, *, reason: str
    ) -> JudgeResult:
        applicable = [outcome for outcome in checks.values() if outcome != NOT_APPLICABLE]
        score = round(sum(outcome == PASSED for outcome in applicable) / len(applicable), 3) if applicable else 0.0
        passed = checks.get("answered") == PASSED and score >= min_score(settings)
        return JudgeResult(
            name=self.name,
            status=PASSED if passed else FAILED,
            score=score,
            passed=passed,
            checks=checks,
            details=details,
            reason=reason,
        )

    @staticmethod
    def _grounded(case: JudgeCase) -> tuple[str, dict[str, Any]]:
        successful = _successful_results(case.tool_results)
        if not successful:
            reason = "no tool ran" if not case.tool_results else "no tool succeeded"
            return NOT_APPLICABLE, {"reason": reason}
        values: set[tuple[Any, ...]] = set()
        given: set[tuple[Any, ...]] = _salient_values(case.question)
        for result, arguments in successful:  # in call order
            # A tool's arguments were given, unless an earlier call returned them: a value one step hands the next (a
            # price sent on in a notification) is still the tools' finding, which the answer may be grounded on.
            given |= _salient_values(arguments) - values
            values |= _salient_values(result)
        given |= {("id", value[1]) for value in given if value[0] == "number"}
        new = values - given
        if new:
            values = new
        if not values:
            return NOT_APPLICABLE, {"reason": "tool results hold no numbers, ids or dates"}
        matched = _answer_mentions(case.answer, values)
        return (PASSED if matched else FAILED), {"salient_values": len(values), "mentioned": matched}

    @staticmethod
    def _language(case: JudgeCase) -> tuple[str, dict[str, Any]]:
        user = detect_language(case.question)
        if user is None:
            return NOT_APPLICABLE, {"user": None, "answer": None}
        parts = _own_words(case.answer, case.question, case.tool_results)
        whole = " ".join(parts)
        answer = detect_language(opening := _opening(whole))
        if answer != user and opening != whole:
            answer = detect_language(whole)
        details = {"user": user, "answer": answer}
        if answer is None:
            return NOT_APPLICABLE, details
        if user == answer:
            return PASSED, details
        # A bilingual answer passes when one of its own sentences is in the user's language.
        bilingual = any(len(part.split()) >= _PART_WORDS and detect_language(part) == user for part in parts)
        return (PASSED if bilingual else FAILED), details


LLM_JUDGE_PROMPT = (
    "You grade a customer-service assistant's answer. Judge whether it answers the user's message, "
    "is consistent with the tool results (when there are any), and is in the user's language. "
    'Reply with only a JSON object: {"score": <a number from 0 to 1>, "reason": "<one short sentence>"}.'
)


def parse_verdict(reply: str) -> tuple[float, str]:
    """The ``(score, reason)`` in a model's reply, wherever the JSON object sits in it.

    Raises :class:`ValueError` when there is no object with a numeric ``score`` in [0, 1].
    """
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", reply):
        try:
            value, _ = decoder.raw_decode(reply, match.start())
        except ValueError:
            continue
        if not isinstance(value, dict) or "score" not in value:
            continue
        score = value["score"]
        if isinstance(score, bool):
            raise ValueError("score must be a number")
        try:
            score = float(score)
        except (TypeError, ValueError):
            raise ValueError("score must be a number") from None
        if not (math.isfinite(score) and 0 <= score <= 1):
            raise ValueError("score must be between 0 and 1")
        reason = value.get("reason", "")
        return score, reason if isinstance(reason, str) else json.dumps(reason, ensure_ascii=False)
    raise ValueError("no JSON verdict with a score")


class LLMJudge(Judge):
    """Asks a model for a verdict ``{"score": 0..1, "reason": "..."}`` through the injected ``ask``.

    No ``ask`` → status ``skipped``. A reply without a valid verdict, an ``ask``
    that raises, or one slower than :attr:`timeout` seconds → status ``error``.
    The prompt carries the masked question, the answer and the tool results
    (cut to :attr:`max_tool_chars`).
    """

    name = "llm"
    timeout: float | None = 30.0
    max_tool_chars = 4000

    def prompt(self, case: JudgeCase) -> str:
        tools = json.dumps(list(case.tool_results), ensure_ascii=False, default=str)
        if len(tools) > self.max_tool_chars:
            tools = tools[: self.max_tool_chars] + "…"
        return (
            f"{LLM_JUDGE_PROMPT}\n\nUser message:\n{case.question}\n\n"
            f"Tool results (JSON):\n{tools if case.tool_results else '(none)'}\n\nAnswer:\n{case.answer}"
        )

    async def evaluate(
        self, case: JudgeCase, settings: Mapping[str, Any] | None = None, *, ask: AskModel | None = None
    ) -> JudgeResult:
        if ask is None:
            return JudgeResult(name=self.name, status=SKIPPED, reason="No model is configured for the LLM judge.")
        try:
            reply = await asyncio.wait_for(ask(self.prompt(case)), timeout=self.timeout)
        except TimeoutError:
            return JudgeResult(name=self.name, status=ERROR, reason="The LLM judge timed out.")
        except Exception as exc:  # noqa: BLE001 — a failing judge must not fail the turn
            return JudgeResult(name=self.name, status=ERROR, reason=f"The LLM judge failed: {type(exc).__name__}.")
        try:
            score, reason = parse_verdict(reply if isinstance(reply, str) else str(reply))
        except ValueError as exc:
            return JudgeResult(name=self.name, status=ERROR, reason=f"Unreadable verdict: {exc}.")
        passed = score >= min_score(settings)
        return JudgeResult(
            name=self.name, status=PASSED if passed else FAILED, score=round(score, 3), passed=passed, reason=reason
        )


JUDGES: dict[str, type[Judge]] = {
    RuleBasedJudge.name: RuleBasedJudge,
    LLMJudge.name: LLMJudge,
}


def configured_judges(settings: Mapping[str, Any] | None) -> list[str]:
    """The judges a profile runs: the rule-based one always, the LLM judge when ``llm_judge`` is on."""
    names = [RuleBasedJudge.name]
    if (settings or {}).get("llm_judge", False):
        names.append(LLMJudge.name)
    return names


async def judge_answer(
    *,
    question: str,
    answer: str,
    tool_results: Iterable[Any] = (),
    settings: Mapping[str, Any] | None = None,
    boilerplate: Iterable[str] = (),
    ask: AskModel | None = None,
) -> dict[str, dict[str, Any]]:
    """Run the configured judges and return ``{name: result.as_dict()}``. Never raises."""
    case = JudgeCase(question=question, answer=answer, tool_results=tuple(tool_results), boilerplate=tuple(boilerplate))
    results = {}
    for name in configured_judges(settings):
        result = await JUDGES[name]().evaluate(case, settings, ask=ask)
        results[name] = result.as_dict()
    return results


# --- review ------------------------------------------------------------------------------

ACCEPT = "accept"
REPLACE = "replace"
NOTE = "note"


def review_note(language: str | None) -> str:
    """The note a failed answer that stands gets (:data:`REVIEW_NOTE`), in ``language`` (pt, en, es)."""
    return say(language, REVIEW_NOTE)


def review_decision(
    judges_results: Mapping[str, Mapping[str, Any]],
    settings: Mapping[str, Any] | None = None,
    *,
    side_effects: Sequence[str] = (),
) -> dict[str, Any]:
    """Whether the answer stands: ``{"action": "accept" | "replace" | "note", "reason": ...}``.

    ``replace`` (show :data:`REVIEW_FALLBACK_ANSWER` instead) when the rule-based
    judge failed — or an LLM judge that gave a verdict failed — and
    ``replace_failed_answers`` is on (the default). An answer that failed only
    because it is already one of the platform's canned answers is accepted, as
    is everything when no judge gave a verdict. An answer the review would
    replace after the turn ran ``side_effects`` (tools that may have changed
    something, which succeeded) is never replaced: ``note`` keeps it and adds
    :func:`review_note` (``side_effects`` names them), since the fallback would
    tell the customer nothing was done about what was.
    """
    options = settings or {}
    failed = [
        name for name, result in judges_results.items() if result.get("status") == FAILED and not result.get("passed")
    ]
    if not failed:
        return {"action": ACCEPT, "reason": "The answer passed the judges."}
    names = ", ".join(failed)
    if not options.get("replace_failed_answers", True):
        return {"action": ACCEPT, "reason": f"Failed {names}; replacing failed answers is off for this profile."}
    rule = judges_results.get(RuleBasedJudge.name) or {}
    boilerplate = (rule.get("details") or {}).get("answered", {}).get("reason") == "boilerplate"
    if failed == [RuleBasedJudge.name] and boilerplate:
        return {"action": ACCEPT, "reason": "The answer is already one of the platform's safe messages."}
    if side_effects:
        done = ", ".join(side_effects)
        return {
            "action": NOTE,
            "reason": f"Failed {names}; not replaced, since the turn already ran {done}: it stands with a note.",
            "side_effects": list(side_effects),
        }
    return {"action": REPLACE, "reason": f"Failed {names}; replaced with the safe fallback answer."}
