"""Regular expressions that editors and outsiders write (a goal entity's ``pattern``, from the admin, a goals file
or an MCP server's manifest), matched against customers' messages: compiled by RE2 (google-re2), never by Python's
``re``. RE2 reads a text in time linear in its length whatever the pattern — ``^(?P<value>(a+)+)$`` on 60 a's and a
"!" is read once, where Python's backtracking tries 2 ** 60 ways — and bounds the memory a pattern compiles to.

What RE2 does not have: backreferences (``\\1``, ``(?P=name)``) and lookarounds (``(?=…)``, ``(?!…)``, ``(?<=…)``,
``(?<!…)``); a pattern with one is refused where it is written (:func:`pattern_problem`). ``\\w`` and ``\\W`` read
letters of any script, as Python's do (RE2's are ASCII: :func:`_python_words` writes them as ``\\pL\\pN_``);
``\\b``, ``\\d`` and ``\\s`` are ASCII. Named groups (``(?P<value>…)``) are as in Python, a name once per pattern.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is reported to whoever wrote it, not to the process's stderr

WHY = "RE2 reads patterns in linear time and has no backreferences or lookarounds"


def pattern_problem(pattern: str) -> str:
    """Why RE2 cannot compile ``pattern``, in words (``RE2 cannot compile it: invalid perl operator: (?=``), or ""
    when it can."""
    try:
        re2.compile(_python_words(pattern), options=_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        said = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        return f"RE2 cannot compile it: {said} ({WHY})"
    return ""


@lru_cache(maxsize=512)
def pattern_compiled(pattern: str) -> Any | None:
    """``pattern`` compiled by RE2 (``finditer``, ``search``, ``groupdict`` as Python's), or ``None`` when RE2
    cannot compile it (:func:`pattern_problem` says why). Memoised: the same patterns serve every message."""
    try:
        return re2.compile(_python_words(pattern), options=_OPTIONS)
    except re2.error:
        return None


_WORD = r"\pL\pN_"


def _python_words(pattern: str) -> str:
    """``pattern`` with ``\\w`` (and ``\\W`` outside a class) as Python reads them: a manifest written for Python's
    ``re`` reads "Atlântida" whole, where RE2's ASCII ``\\w`` stops at "Atl". Escapes are kept as they are, and
    a class (``[…]``, a POSIX ``[:alpha:]`` inside it) is followed to its end."""
    out: list[str] = []
    index, in_class = 0, False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            escaped = pattern[index + 1]
            if escaped == "w":
                out.append(_WORD if in_class else f"[{_WORD}]")
            elif escaped == "W" and not in_class:
                out.append(f"[^{_WORD}]")
            else:
                out.append(pattern[index : index + 2])
            index += 2
            continue
        if in_class and pattern.startswith("[:", index) and pattern.find(":]", index + 2) > 0:
            end = pattern.find(":]", index + 2) + 2
            out.append(pattern[index:end])
            index = end
            continue
        out.append(char)
        index += 1
        if char == "[" and not in_class:
            in_class = True
            for literal in ("^", "]"):  # "[^" negates; a "]" first in a class is itself
                if pattern.startswith(literal, index):
                    out.append(literal)
                    index += 1
        elif char == "]" and in_class:
            in_class = False
    return "".join(out)
