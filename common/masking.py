"""Masking personal data and secrets in JSON-like values: the reversible :class:`MaskVault` of a turn, and the
irreversible forms — :func:`redact` for a value seen by no vault (a log line), :func:`mask_secrets` for values under
secret-looking keys and bearer tokens.

Pure functions over plain data, no app loaded: the engine's guardrails (``conversations/guardrails.py``) mask with
them, and so do the log filters (``platform/logs.py``), which the logging configuration loads before any app.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from common.personal_data import Finding, find_personal_data, redact_label, value_identity

PLACEHOLDER_RE = re.compile(r"\[(CPF|CNPJ|EMAIL|PHONE|CARD)_(\d+)\]", re.IGNORECASE)


def _walk(obj: Any, on_string: Callable[[str], Any], *, hidden: Callable[[Any], bool] | None = None) -> Any:
    """Apply ``on_string`` to every string inside a JSON-like value, keeping its shape; ``hidden``: the mapping keys
    whose values are replaced with :data:`SECRET_MASK` whole.

    Iterative (an explicit stack): no nesting depth a client sends can raise ``RecursionError``.
    """
    if not isinstance(obj, _CONTAINERS):
        return _walk_leaf(obj, on_string)
    top = _walk_empty(obj)
    # A frame: the items of a container still to visit, its copy being built, and where that copy goes
    # (parent copy and key) once the container is done (a tuple is built as a list and frozen then).
    stack: list[tuple[Any, Iterator[tuple[Any, Any]], Any, Any, Any]] = [(obj, _walk_items(obj), top, None, None)]
    while stack:
        source, items, out, parent, key = stack[-1]
        for item_key, item in items:
            if hidden is not None and isinstance(out, dict) and hidden(item_key):
                out[item_key] = SECRET_MASK
                continue
            if isinstance(item, _CONTAINERS):
                child = _walk_empty(item)
                _walk_put(out, item_key, child)
                stack.append((item, _walk_items(item), child, out, item_key))
                break
            _walk_put(out, item_key, _walk_leaf(item, on_string))
        else:
            stack.pop()
            if isinstance(source, tuple) and parent is not None:
                parent[key] = tuple(out)
    return tuple(top) if isinstance(obj, tuple) else top


_CONTAINERS = (Mapping, list, tuple)


def _walk_empty(obj: Any) -> Any:
    return {} if isinstance(obj, Mapping) else []


def _walk_items(obj: Any) -> Iterator[tuple[Any, Any]]:
    return iter(obj.items()) if isinstance(obj, Mapping) else enumerate(obj)


def _walk_put(out: Any, key: Any, value: Any) -> None:
    if isinstance(out, dict):
        out[key] = value
    else:
        out.append(value)  # items come in order, so the index is the key


def _walk_leaf(obj: Any, on_string: Callable[[str], Any]) -> Any:
    if isinstance(obj, str):
        return on_string(obj)
    if isinstance(obj, int) and not isinstance(obj, bool) and abs(obj) >= 10**9:
        # A CPF, phone or card stored as a number; it becomes a string only if masked.
        text = str(obj)
        changed = on_string(text)
        return obj if changed == text else changed
    return obj


class MaskVault:
    """Reversible masking of personal data for one turn.

    Each distinct value gets one placeholder, numbered per kind in order of
    appearance (``[CPF_1]``, ``[EMAIL_1]``, ``[PHONE_2]``); different spellings of
    the same value share it. The vault keeps the originals in memory only: it is
    never stored, and a new turn starts a new vault.
    """

    def __init__(self) -> None:
        self._placeholders: dict[tuple[str, str], str] = {}
        self._originals: dict[str, tuple[str, str]] = {}
        self._numbers: Counter[str] = Counter()

    def __len__(self) -> int:
        return len(self._originals)

    def entries(self) -> list[tuple[str, str, str]]:
        """``(placeholder, kind, value)`` of every masked value, to hand the vault to a worker process."""
        return [(token, kind, value) for token, (kind, value) in self._originals.items()]

    @classmethod
    def from_entries(cls, entries: list[tuple[str, str, str]] | list[list[str]]) -> MaskVault:
        """The vault :meth:`entries` described (same placeholders, same originals)."""
        vault = cls()
        for token, kind, value in entries:
            vault._originals[token] = (kind, value)
            vault._placeholders[(kind, value_identity(kind, value))] = token
            vault._numbers[kind] += 1
        return vault

    def placeholder(self, kind: str, value: str) -> str:
        """The placeholder for ``value``, created on first sight."""
        key = (kind, value_identity(kind, value))
        if key not in self._placeholders:
            self._numbers[kind] += 1
            token = f"[{kind.upper()}_{self._numbers[kind]}]"
            self._placeholders[key] = token
            self._originals[token] = (kind, value)
        return self._placeholders[key]

    def original(self, placeholder: str) -> str | None:
        """The value behind ``placeholder``, or ``None`` when this vault did not make it."""
        entry = self._originals.get(placeholder.upper())
        return entry[1] if entry else None

    def mask_counting(self, text: str) -> tuple[str, dict[str, int]]:
        """``text`` with personal data replaced by placeholders, and how many of each kind were replaced."""
        counts: Counter[str] = Counter()

        def replace(finding: Finding) -> str:
            counts[finding.kind] += 1
            return self.placeholder(finding.kind, finding.value)

        return _replace_findings(text, replace), dict(counts)

    def mask(self, text: str) -> str:
        """``text`` with each piece of personal data replaced by its placeholder."""
        return self.mask_counting(text)[0]

    def mask_value(self, obj: Any) -> Any:
        """Mask every string inside a JSON-like value (tool arguments and results)."""
        return _walk(obj, self.mask)

    def unmask(self, obj: Any) -> Any:
        """Put the originals back for this vault's placeholders, in a string or recursively.

        Used on the arguments a model wrote with placeholders, just before the tool
        is called. Placeholders this vault did not make are left as they are.
        """

        def restore(text: str) -> str:
            return PLACEHOLDER_RE.sub(lambda m: self.original(m.group()) or m.group(), text)

        return _walk(obj, restore)

    def redact_placeholders(self, text: str) -> str:
        """Turn placeholders into redacted labels; one this vault did not make becomes ``[KIND]``."""

        def label(match: re.Match[str]) -> str:
            entry = self._originals.get(match.group().upper())
            return redact_label(*entry) if entry else f"[{match.group(1).upper()}]"

        return PLACEHOLDER_RE.sub(label, text)

    def redact(self, obj: Any) -> Any:
        """The storage form: placeholders and raw personal data become irreversible labels,
        and values under secret-looking keys are hidden (see :func:`mask_secrets`)."""
        return _walk(
            obj,
            lambda text: personal_data_redacted(self.redact_placeholders(_bearer_masked(text))),
            hidden=is_secret_key,
        )


def _replace_findings(text: str, replace: Callable[[Finding], str]) -> str:
    pieces: list[str] = []
    last = 0
    for finding in find_personal_data(text):
        pieces += [text[last : finding.start], replace(finding)]
        last = finding.end
    pieces.append(text[last:])
    return "".join(pieces)


def personal_data_redacted(text: str) -> str:
    """``text`` with each piece of personal data replaced by its irreversible label (``[CPF]``)."""
    return _replace_findings(text, lambda finding: redact_label(finding.kind, finding.value))


def redact(obj: Any) -> Any:
    """Redact personal data and secrets in a value seen by no vault (e.g. for a log line)."""
    return MaskVault().redact(obj)


# --- secrets ---------------------------------------------------------------------------

SECRET_MASK = "***"  # noqa: S105 — what a secret is replaced with, not a secret
_SECRET_WORDS = frozenset(
    {
        "password", "passwd", "pwd", "passphrase", "senha", "contrasena", "token", "secret", "authorization",
        "auth", "cvv", "cvc", "cvv2", "pin", "apikey", "credential", "credentials", "cookie", "privatekey",
        "accesskey", "otp",
    }
)  # fmt: skip
_KEY_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_BEARER = re.compile(r"\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{8,}")


@functools.lru_cache(maxsize=4096)  # the same few keys come back in every tool result
def is_secret_key(key: Any) -> bool:
    """Whether a mapping key names a secret: ``password``, ``access_token``, ``apiKey``, ``X-Api-Key``, ``cvv``…

    Matches whole words of the key, so ``max_tokens`` or ``author`` are not secrets.
    """
    if not isinstance(key, str):
        return False
    words = [word.lower() for word in _KEY_WORDS.findall(key)]
    pairs = (first + second for first, second in itertools.pairwise(words))
    return any(word in _SECRET_WORDS for word in (*words, *pairs, "".join(words)))


def mask_secrets(obj: Any) -> Any:
    """Hide the values under secret-looking keys (recursively) and bearer tokens inside strings."""
    if isinstance(obj, str):
        return _bearer_masked(obj)
    if isinstance(obj, Mapping):
        return {key: SECRET_MASK if is_secret_key(key) else mask_secrets(item) for key, item in obj.items()}
    if isinstance(obj, list):
        return [mask_secrets(item) for item in obj]
    if isinstance(obj, tuple):
        return tuple(mask_secrets(item) for item in obj)
    return obj


def _bearer_masked(text: str) -> str:
    return _BEARER.sub(lambda m: f"{m.group(1)} {SECRET_MASK}", text)
