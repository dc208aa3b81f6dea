"""Guardrails around a model: personal-data masking, input checks and output checks.

Pure functions and small classes over plain data — no ORM, no settings. The
graph hands them the profile's guardrail settings (``agents.schemas.GUARDRAIL_KEYS``)
and a :class:`MaskVault` that lives for one turn.

Personal data (CPF, CNPJ, e-mail, phone, payment card) is found by
:func:`find_personal_data`. A :class:`MaskVault` swaps each distinct value for a
stable placeholder (``[CPF_1]``) before text reaches a model, log or trace, and
swaps it back (:meth:`MaskVault.unmask`) only where a real value is needed — the
arguments of a tool call. :meth:`MaskVault.redact` gives the irreversible form
kept in storage (``[CPF]``, ``[CARD ••••1111]``).

Guardrails are looked up in :data:`INPUT_GUARDRAILS` and :data:`OUTPUT_GUARDRAILS`
and run in that order by :func:`run_input_guardrails` and
:func:`run_output_guardrails`.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

# The masking is in common too (the log filters use it before any app is loaded); its names stay importable from here.
from common.masking import (  # noqa: F401
    PLACEHOLDER_RE,
    SECRET_MASK,
    MaskVault,
    is_secret_key,
    mask_secrets,
    personal_data_redacted,
    redact,
)

# Personal data is found in common (the field history reads it too); its names stay importable from here.
from common.personal_data import (  # noqa: F401
    CARD,
    CNPJ,
    CPF,
    DETECTORS,
    EMAIL,
    PHONE,
    Finding,
    cnpj_is_valid,
    cpf_is_valid,
    find_personal_data,
    identifier_pseudonym,
    redact_label,
    value_identity,
)
from common.text import normalize

# --- guardrail results --------------------------------------------------------------

PASS = "pass"  # noqa: S105 — an action name
BLOCK = "block"
SANITIZE = "sanitize"
DEFAULT_MAX_INPUT_CHARS = 4000


@dataclass
class GuardrailResult:
    """What one guardrail found. ``details`` hold counts and limits, never personal data;
    ``replacement`` (for ``sanitize``) is the text that goes on, and is not part of :meth:`as_dict`."""

    name: str
    passed: bool
    action: str = PASS
    details: dict[str, Any] = field(default_factory=dict)
    replacement: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "action": self.action, "details": self.details}


def _tidy(text: str) -> str:
    """Close the gaps left where something was cut out."""
    text = re.sub(r"[ \t]{2,}", " ", text)
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    text = re.sub(r" +([,.;:!?])", r"\1", text)
    return text.strip()


# --- input guardrails ------------------------------------------------------------------


class InputGuardrail:
    """Contract of an input guardrail.

    ``check(text, settings=..., vault=...)`` looks at the user's message as left by
    the guardrails before it and returns a :class:`GuardrailResult` named
    :attr:`name`: ``pass``; ``block`` (``passed`` is false and the message must not
    reach a model); or ``sanitize`` with ``replacement``, the text the next
    guardrail and the model see. ``settings`` is the profile's guardrail settings
    (keys of ``agents.schemas.GUARDRAIL_KEYS``, any of them absent). It never
    raises for text or settings the schema accepts, and its ``details`` never
    contain the user's personal data.
    """

    name: ClassVar[str]

    def check(self, text: str, *, settings: Mapping[str, Any], vault: MaskVault) -> GuardrailResult:
        raise NotImplementedError


class SizeLimit(InputGuardrail):
    """Blocks a message longer than ``max_input_chars``."""

    name = "size_limit"

    def check(self, text: str, *, settings: Mapping[str, Any], vault: MaskVault) -> GuardrailResult:
        limit = settings.get("max_input_chars", DEFAULT_MAX_INPUT_CHARS)
        passed = len(text) <= limit
        return GuardrailResult(
            self.name, passed, PASS if passed else BLOCK, details={"limit": limit, "length": len(text)}
        )


class BlockedTerms(InputGuardrail):
    """Blocks a message containing one of ``blocked_terms`` as whole words, case and accents folded
    (``"golpe"`` matches ``"GOLPE!"`` but not ``"golpeado"``)."""

    name = "blocked_terms"

    def check(self, text: str, *, settings: Mapping[str, Any], vault: MaskVault) -> GuardrailResult:
        normalized = f" {normalize(text)} "
        hits = []
        for term in settings.get("blocked_terms") or ():
            folded = normalize(term)
            if folded and f" {folded} " in normalized:
                hits.append(term)
        return GuardrailResult(self.name, not hits, BLOCK if hits else PASS, details={"hits": len(hits), "terms": hits})


class PersonalData(InputGuardrail):
    """Masks personal data through the vault (unless ``mask_personal_data`` is false).
    Never blocks; reports how many values of each kind it masked, never the values."""

    name = "personal_data"

    def check(self, text: str, *, settings: Mapping[str, Any], vault: MaskVault) -> GuardrailResult:
        if not settings.get("mask_personal_data", True):
            return GuardrailResult(self.name, True, PASS, details={"enabled": False})
        masked, counts = vault.mask_counting(text)
        details = {"enabled": True, "masked": counts, "total": sum(counts.values())}
        if not counts:
            return GuardrailResult(self.name, True, PASS, details=details)
        return GuardrailResult(self.name, True, SANITIZE, details=details, replacement=masked)


INPUT_GUARDRAILS: dict[str, type[InputGuardrail]] = {
    SizeLimit.name: SizeLimit,
    BlockedTerms.name: BlockedTerms,
    PersonalData.name: PersonalData,
}


@dataclass
class InputReport:
    """The outcome of the input guardrails.

    ``text_for_model`` is what any model, log or trace may see (masked);
    ``text_to_store`` is what the stored user message keeps: the original only when
    the profile's ``store_original_input`` allows it, else the redacted text.
    """

    text_for_model: str
    blocked: bool
    checks: list[dict[str, Any]]
    text_to_store: str = ""

    @property
    def passed(self) -> bool:
        return not self.blocked

    def as_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "blocked": self.blocked, "checks": self.checks}


def run_input_guardrails(
    text: str,
    settings: Mapping[str, Any] | None,
    vault: MaskVault,
    *,
    default_max_input_chars: int = DEFAULT_MAX_INPUT_CHARS,
) -> InputReport:
    """Run every input guardrail in registry order over ``text``.

    All of them run even after one blocks, so a blocked message is still masked
    before it is stored. ``default_max_input_chars`` applies when the profile sets
    no ``max_input_chars``.
    """
    options = {"max_input_chars": default_max_input_chars, **(settings or {})}
    current = text
    blocked = False
    checks = []
    for guardrail_class in INPUT_GUARDRAILS.values():
        result = guardrail_class().check(current, settings=options, vault=vault)
        blocked = blocked or result.action == BLOCK
        if result.action == SANITIZE and result.replacement is not None:
            current = result.replacement
        checks.append(result.as_dict())
    stored = text if options.get("store_original_input", False) else vault.redact(current)
    return InputReport(text_for_model=current, blocked=blocked, checks=checks, text_to_store=stored)


# --- output guardrails -----------------------------------------------------------------


class OutputGuardrail:
    """Contract of an output guardrail.

    ``check(answer, vault=..., tool_results=..., settings=...)`` looks at the
    answer as left by the guardrails before it and returns a
    :class:`GuardrailResult` named :attr:`name`: ``pass``, or ``sanitize`` (``passed``
    false) with ``replacement``, the answer cleaned of what it must not show —
    possibly empty, which the judge then treats as unanswered. ``tool_results`` are
    the turn's tool results (``[{"tool", "status", "result", ...}]`` or bare values).
    It never raises, and its ``details`` are counts, never personal data.
    """

    name: ClassVar[str]

    def check(
        self, answer: str, *, vault: MaskVault, tool_results: Sequence[Any], settings: Mapping[str, Any]
    ) -> GuardrailResult:
        raise NotImplementedError


_JSON_FENCE_LANGUAGES = frozenset({"json", "jsonc", "json5", "javascript", "js"})
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_DECODER = json.JSONDecoder()
# Only a bracket opening a record or a list of records/strings can start a dump; prose
# brackets ("[1]", "[CPF_1]") are not even tried, and a pathological text is tried a bounded number of times.
_DUMP_START = re.compile(r"[{\[](?=\s*[\"'{\[])")
_MAX_DECODE_ATTEMPTS = 200


def _looks_like_dump(value: Any) -> bool:
    """A mapping with keys, or a list holding records or strings (not a footnote like ``[1]``)."""
    if isinstance(value, dict):
        return bool(value)
    if isinstance(value, list):
        return any(isinstance(item, dict | list | str) for item in value)
    return False


def _balanced_end(text: str, start: int) -> int | None:
    """Where the bracket opened at ``start`` closes, skipping quoted strings."""
    pairs = {"{": "}", "[": "]"}
    stack: list[str] = []
    quote = ""
    index = start
    while index < len(text) and index - start < 20_000:
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in pairs:
            stack.append(pairs[char])
        elif char in "}]":
            if not stack or stack.pop() != char:
                return None
            if not stack:
                return index + 1
        index += 1
    return None


def _decode_at(text: str, start: int) -> tuple[Any, int] | None:
    """A JSON value — or a Python literal such as ``{'a': None}`` — starting at ``start``."""
    try:
        return _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError):
        pass
    end = _balanced_end(text, start)
    if end is None:
        return None
    try:
        return ast.literal_eval(text[start:end]), end
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _keys(value: Any) -> set[str]:
    if isinstance(value, Mapping):
        found = {str(key) for key in value}
        for item in value.values():
            found |= _keys(item)
        return found
    if isinstance(value, list | tuple):
        return set().union(*(_keys(item) for item in value)) if value else set()
    return set()


class NoRawToolJson(OutputGuardrail):
    """An answer must be prose: raw JSON (or Python-literal) dumps and fenced JSON blocks are cut out."""

    name = "no_raw_tool_json"

    def check(
        self, answer: str, *, vault: MaskVault, tool_results: Sequence[Any], settings: Mapping[str, Any]
    ) -> GuardrailResult:
        removed: list[Any] = []

        def fence(match: re.Match[str]) -> str:
            language, body = match.group(1).lower(), match.group(2).strip()
            decoded = _decode_at(body, 0) if body[:1] in "{[" else None
            if language in _JSON_FENCE_LANGUAGES or (decoded and _looks_like_dump(decoded[0])):
                removed.append(decoded[0] if decoded else None)
                return "\n"
            return match.group()

        text = _FENCE.sub(fence, answer) if "```" in answer else answer
        pieces: list[str] = []
        last = 0
        attempts = 0
        # A dump opens with a bracket: a text without one (most answers) is not scanned for one, a regular
        # expression's walk over every character (5 µs on a 300-character answer) where a look for each is a memchr.
        for opening in _DUMP_START.finditer(text) if "{" in text or "[" in text else ():
            index = opening.start()
            if index < last or attempts >= _MAX_DECODE_ATTEMPTS:
                continue
            attempts += 1
            decoded = _decode_at(text, index)
            if decoded and _looks_like_dump(decoded[0]):
                pieces.append(text[last:index])
                removed.append(decoded[0])
                last = decoded[1]
        pieces.append(text[last:])
        if not removed:
            return GuardrailResult(self.name, True)
        tool_keys = _keys([item.get("result") if isinstance(item, Mapping) else item for item in tool_results])
        from_tools = sum(1 for dump in removed if _keys(dump) & tool_keys)
        return GuardrailResult(
            self.name,
            False,
            SANITIZE,
            details={"removed": len(removed), "matching_tool_results": from_tools},
            replacement=_tidy("".join(pieces)),
        )


_EXCEPTION_NAME = r"(?:[A-Z]\w*(?:Error|Exception|Timeout|Exit|Interrupt|Warning|Fault)|Exception)\b"
_TRACEBACK = re.compile(
    r"Traceback \(most recent call last\):[^\n]*(?:\n[ \t]+[^\n]*)*(?:\n[A-Za-z_][\w.]*(?::[^\n]*)?(?=\n|\Z))?\n?"
)
_FRAME = re.compile(r'^[ \t]*File "[^"\n]+", line \d+[^\n]*(?:\n[ \t]+(?!File ")[^\n]*)?\n?', re.MULTILINE)
_EXCEPTION = re.compile(rf"\b(?:[a-z_]\w*\.)*{_EXCEPTION_NAME}(?:: [^\n]*|\([^\n]*?\))|<class '[\w.]+'>")
# What each of the three cannot match without: an answer holding none of these (most answers) is not scanned by them.
# The exceptions' pattern tries a dotted name at every word's start (about 25 µs on a 300-character answer); a look
# for each of these strings, about 2 µs in all.
_STACK_TRACE_CUES = (
    "Traceback (most recent call last):",
    'File "',
    *("Error", "Exception", "Timeout", "Exit", "Interrupt", "Warning", "Fault"),
    "<class '",
)


class NoStackTrace(OutputGuardrail):
    """No Python internals in an answer: tracebacks, ``File "...", line N`` frames and
    exception dumps (``KeyError: 'x'``, ``httpx.ConnectError(...)``) are cut out."""

    name = "no_stack_trace"

    def check(
        self, answer: str, *, vault: MaskVault, tool_results: Sequence[Any], settings: Mapping[str, Any]
    ) -> GuardrailResult:
        if not any(cue in answer for cue in _STACK_TRACE_CUES):
            return GuardrailResult(self.name, True)
        text, tracebacks = _TRACEBACK.subn("", answer)
        text, frames = _FRAME.subn("", text)
        text, exceptions = _EXCEPTION.subn("", text)
        if not (tracebacks or frames or exceptions):
            return GuardrailResult(self.name, True)
        return GuardrailResult(
            self.name,
            False,
            SANITIZE,
            details={"tracebacks": tracebacks, "frames": frames, "exceptions": exceptions},
            replacement=_tidy(text),
        )


class NoMaskedData(OutputGuardrail):
    """An answer shows neither placeholders (``[CPF_1]``) nor raw personal data: both become
    redacted labels (``[CPF]``, ``[CARD ••••1111]``). With ``mask_personal_data`` off,
    only placeholders are looked for."""

    name = "no_masked_data"

    def check(
        self, answer: str, *, vault: MaskVault, tool_results: Sequence[Any], settings: Mapping[str, Any]
    ) -> GuardrailResult:
        placeholders = len(PLACEHOLDER_RE.findall(answer))
        scan = settings.get("mask_personal_data", True)
        found = Counter(finding.kind for finding in find_personal_data(answer)) if scan else Counter()
        if not placeholders and not found:
            return GuardrailResult(self.name, True)
        return GuardrailResult(
            self.name,
            False,
            SANITIZE,
            details={"placeholders": placeholders, "personal_data": dict(found)},
            replacement=mask_answer(answer, vault, scan=scan),
        )


def mask_answer(answer: str, vault: MaskVault, *, scan: bool = True) -> str:
    """What :class:`NoMaskedData` leaves of an answer: placeholders, and raw personal data unless ``scan`` is
    false, become redacted labels."""
    cleaned = vault.redact_placeholders(answer)
    return personal_data_redacted(cleaned) if scan else cleaned


# The longest stretch a pattern written with spaces can span (an international phone: 46 characters), rounded up.
_SPACED_SPAN = 64
# A space after one of these may sit inside a card or phone number ("4111 1111", "(11) 98765-4321").
_INSIDE_A_NUMBER = frozenset("0123456789)")


class StreamMasker:
    """:class:`NoMaskedData`'s masking over an answer that arrives in pieces (a model's streamed tokens).

    :meth:`push` takes the next piece and returns the masked text that may leave now; :meth:`flush`, at the
    end, returns the rest. Everything returned, joined, equals :func:`mask_answer` of everything pushed, so a
    streaming client sees exactly the masked answer, never a raw value or a placeholder, not even in part. It
    holds back only the tail a pattern may still complete: the last run of characters without a space (an
    e-mail, a placeholder, a number), the groups before it of a number written with spaces (a card, a phone:
    at most :data:`_SPACED_SPAN` characters), and any candidate match reaching into them.

    Only what was not yet committed is kept: a whitespace that no pattern can cross ends the text that can
    still change, so the work per piece stays small however long the answer.
    """

    def __init__(self, vault: MaskVault, settings: Mapping[str, Any] | None = None) -> None:
        self._vault = vault
        self._scan = bool((settings or {}).get("mask_personal_data", True))
        self._raw = ""  # the pushed text since the last commit
        self._sent = ""  # the masked text of a prefix of _raw already returned

    def push(self, text: str) -> str:
        self._raw += text
        return self._release(self._held_from())

    def flush(self) -> str:
        rest = self._release(len(self._raw))
        self._raw = self._sent = ""
        return rest

    def _mask(self, text: str) -> str:
        return mask_answer(text, self._vault, scan=self._scan)

    def _held_from(self) -> int:
        """Where the tail that may still change starts."""
        raw, end = self._raw, len(self._raw)
        start = end
        while start and not raw[start - 1].isspace():
            start -= 1
        while start >= 2 and raw[start - 1] == " " and raw[start - 2] in _INSIDE_A_NUMBER:
            group = start - 1
            while group and not raw[group - 1].isspace():
                group -= 1
            if end - group > _SPACED_SPAN:
                start = max(group, end - _SPACED_SPAN)
                break
            start = group
        patterns = (PLACEHOLDER_RE, *(pattern for _, pattern, _ in DETECTORS))
        moved = True
        while moved:  # a candidate (valid or not) reaching into the tail may still change: hold it whole
            moved = False
            for pattern in patterns:
                for match in pattern.finditer(raw, 0, end):
                    if match.start() < start < match.end():
                        start, moved = match.start(), True
        return start

    def _release(self, cut: int) -> str:
        masked = self._mask(self._raw[:cut])
        if not masked.startswith(self._sent):  # the hold above makes this impossible; never send a correction
            return ""
        released, self._sent = masked[len(self._sent) :], masked
        # Commit up to the last whitespace no pattern can cross: the text before it is final.
        commit = cut
        while commit and not (
            self._raw[commit - 1].isspace()
            and not (self._raw[commit - 1] == " " and commit >= 2 and self._raw[commit - 2] in _INSIDE_A_NUMBER)
        ):
            commit -= 1
        if commit:
            head = self._mask(self._raw[:commit])
            if self._sent.startswith(head):
                self._raw, self._sent = self._raw[commit:], self._sent[len(head) :]
        return released


OUTPUT_GUARDRAILS: dict[str, type[OutputGuardrail]] = {
    NoRawToolJson.name: NoRawToolJson,
    NoStackTrace.name: NoStackTrace,
    NoMaskedData.name: NoMaskedData,
}


@dataclass
class OutputReport:
    """The outcome of the output guardrails: the answer to show and store, and the checks."""

    answer: str
    passed: bool
    checks: list[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "checks": self.checks}


@dataclass
class TurnGuardrails:
    """The guardrails' part of one turn (``turn.guardrails``): the vault that masks the customer's personal data,
    the message as the specialists read it (masked) and as it is stored, whether it was blocked, and the input and
    output reports (``metadata["guardrails"]``)."""

    vault: MaskVault = field(default_factory=MaskVault)
    sanitized_text: str = ""
    text_to_store: str = ""
    blocked: bool = False
    report: dict[str, Any] = field(default_factory=dict)


def run_output_guardrails(
    answer: str,
    vault: MaskVault,
    tool_results: Iterable[Any] = (),
    *,
    settings: Mapping[str, Any] | None = None,
) -> OutputReport:
    """Run every output guardrail in registry order; each sanitises the answer the next one sees."""
    results = list(tool_results)
    options = dict(settings or {})
    current = answer
    checks = []
    for guardrail_class in OUTPUT_GUARDRAILS.values():
        result = guardrail_class().check(current, vault=vault, tool_results=results, settings=options)
        if result.action == SANITIZE and result.replacement is not None:
            current = result.replacement
        checks.append(result.as_dict())
    return OutputReport(answer=current, passed=all(check["passed"] for check in checks), checks=checks)
