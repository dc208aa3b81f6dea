"""YAML text → plain values that remember their line numbers.

PyYAML's ``safe_load`` forgets where a value came from, so files are composed
into nodes (:func:`yaml.compose`) and turned into plain Python values here,
keeping the line of every mapping key and sequence item. A :class:`Node` is a
value plus its place (file and path), so every later check can report
``agents.yaml:12: agents[0].specialists[1].tools[0]: ...``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor

from releases.configio.messages import (
    ERROR_ALIASES,
    ERROR_COMPLEX_KEY,
    ERROR_DUPLICATE_KEY,
    ERROR_EMPTY_FILE,
    ERROR_TOO_DEEP,
    ERROR_TOO_LARGE,
    ERROR_YAML_SYNTAX,
)

Path = tuple[str | int, ...]

MAX_DEPTH = 40
MAX_TEXT_CHARS = 2 * 1024 * 1024  # as the admin takes an upload (releases.admin.config.MAX_FILE_BYTES)
# What a file's aliases may repeat, all its aliases together: a shared list of tools or a prompt written once and
# named a few times is far within it; a "billion laughs" (342 bytes that repeat 387 million values) is not.
MAX_ALIAS_VALUES = 10_000
MAX_ALIAS_CHARS = 1_000_000
# libyaml's parser where PyYAML was built with it: the same documents (the constructor and resolver are PyYAML's
# own), several times faster — the demo's files were a third of ``seed_demo``'s time. A text it refuses is parsed
# again by the pure-Python parser, whose messages are the ones users see.
FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(eq=False)
class Source:
    """One YAML file of an import: its display name and its text."""

    name: str
    text: str
    lines: dict[Path, int] = field(default_factory=dict, repr=False)

    def line_of(self, path: Path) -> int:
        """Line of ``path``, or of its nearest ancestor that has one."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), 1)


def format_path(path: Path) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


@dataclass(frozen=True)
class Problem:
    source: Source | None
    line: int
    path: Path
    message: str

    def __str__(self) -> str:
        where = f"{self.source.name}:{self.line}: " if self.source else ""
        what = f"{format_path(self.path)}: " if self.path else ""
        return f"{where}{what}{self.message}"


class Problems:
    """Collects every error (and warning) of one import, so all are reported at once."""

    def __init__(self) -> None:
        self.errors: list[Problem] = []
        self.warnings: list[Problem] = []

    def add(self, node: Node | None, message: str) -> None:
        self.errors.append(_problem(node, message))

    def warn(self, node: Node | None, message: str) -> None:
        self.warnings.append(_problem(node, message))

    def __bool__(self) -> bool:
        return bool(self.errors)


def _problem(node: Node | None, message: str) -> Problem:
    if node is None:
        return Problem(None, 0, (), message)
    return Problem(node.source, node.line, node.path, message)


@dataclass(frozen=True)
class Node:
    """A plain value read from ``source`` at ``path``."""

    source: Source
    path: Path
    value: Any

    @property
    def line(self) -> int:
        return self.source.line_of(self.path)

    @property
    def where(self) -> str:
        """``file:line`` for messages that point at another place."""
        return f"{self.source.name}:{self.line}"

    def child(self, key: str | int) -> Node:
        return Node(self.source, (*self.path, key), self.value[key])

    def items(self) -> list[tuple[str, Node]]:
        return [(key, self.child(key)) for key in self.value]

    def elements(self) -> list[Node]:
        return [self.child(index) for index in range(len(self.value))]

    def deepest(self, where: Path) -> tuple[Node, list[str | int]]:
        """The node at ``where`` below this one as far as the file has it, and the rest of the path (a key it lacks):
        where a problem found on the plain value is reported."""
        node = self
        for n, part in enumerate(where):
            inside = node.value if isinstance(node.value, (dict, list)) else ()
            if isinstance(inside, dict) and part not in inside:
                return node, list(where[n:])
            if isinstance(inside, list) and not (isinstance(part, int) and part < len(inside)):
                return node, list(where[n:])
            if not inside:
                return node, list(where[n:])
            node = node.child(part)
        return node, []


def load(source: Source, problems: Problems) -> Node | None:
    """Parse ``source``; on a syntax error, or a text beyond the bounds (larger than :data:`MAX_TEXT_CHARS`, nested
    deeper than :data:`MAX_DEPTH`, aliases that repeat more than :data:`MAX_ALIAS_VALUES` values or
    :data:`MAX_ALIAS_CHARS` characters), record it (with its line) and return ``None``. The bounds hold while the
    text is parsed, before anything is built from it."""
    if len(source.text) > MAX_TEXT_CHARS:
        problems.errors.append(Problem(source, 1, (), ERROR_TOO_LARGE.format(megabytes=MAX_TEXT_CHARS // 1024 // 1024)))
        return None
    try:
        root = _compose(source.text)
    except Refused as exc:
        problems.errors.append(Problem(source, exc.line, (), exc.message))
        return None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        problem = " ".join(part for part in (exc.context, exc.problem) if part)
        problems.errors.append(Problem(source, line, (), ERROR_YAML_SYNTAX.format(problem=problem)))
        return None
    except yaml.YAMLError as exc:
        problems.errors.append(Problem(source, 1, (), ERROR_YAML_SYNTAX.format(problem=exc)))
        return None
    if root is None:
        problems.errors.append(Problem(source, 1, (), ERROR_EMPTY_FILE))
        return None
    before = len(problems.errors)
    value = _build(root, (), source, problems, SafeConstructor(), 0)
    if len(problems.errors) > before:
        return None
    return Node(source, (), value)


def plain_value(text: str) -> Any:
    """``text``'s value read within :func:`load`'s bounds, or ``None`` when it is not YAML or beyond them."""
    node = load(Source(name="", text=text), Problems())
    return node.value if node is not None else None


def _compose(text: str) -> yaml.Node | None:
    try:
        _scan(text, FAST_LOADER)
        return yaml.compose(text, Loader=FAST_LOADER)
    except yaml.YAMLError:
        # Raises again, with the pure-Python parser's message (its composer recursing no deeper than the scan let).
        _scan(text, yaml.SafeLoader)
        return yaml.compose(text, Loader=yaml.SafeLoader)


class Refused(Exception):
    """A text the importer does not read: the line and why (a message of :mod:`releases.configio.messages`)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


_OPENS = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSES = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


def _scan(text: str, loader: type[Any]) -> None:
    """Raise :class:`Refused` for a text nested deeper than :data:`MAX_DEPTH` or whose aliases repeat more than the
    budget, reading its events only: both parsers are loops, where composing recurses (libyaml's composer crashes
    the process on a text 100,000 brackets deep) and building walks each alias again. An anchor's size — the values
    and characters of its node, its own aliases expanded — is known when its node ends; each alias adds it."""
    sizes: dict[str, tuple[int, int]] = {}
    opened: list[list[Any]] = []  # each open collection: [values, characters, anchor]
    repeated_values = repeated_chars = 0
    for event in yaml.parse(text, Loader=loader):
        line = event.start_mark.line + 1 if event.start_mark is not None else 1
        if isinstance(event, _OPENS):
            if len(opened) > MAX_DEPTH:
                raise Refused(line, ERROR_TOO_DEEP)
            opened.append([1, 0, event.anchor])
            continue
        if isinstance(event, yaml.ScalarEvent):
            values, chars, anchor = 1, len(event.value), event.anchor
        elif isinstance(event, yaml.AliasEvent):
            values, chars = sizes.get(event.anchor or "", (0, 0))  # an unknown anchor: the composer's error to report
            anchor = None
            repeated_values += values
            repeated_chars += chars
            if repeated_values > MAX_ALIAS_VALUES or repeated_chars > MAX_ALIAS_CHARS:
                message = ERROR_ALIASES.format(values=MAX_ALIAS_VALUES, chars=MAX_ALIAS_CHARS)
                raise Refused(line, message)
        elif isinstance(event, _CLOSES):
            values, chars, anchor = opened.pop()
        else:
            continue
        if anchor is not None:
            sizes[anchor] = (values, chars)
        if opened:
            opened[-1][0] += values
            opened[-1][1] += chars


def _build(node: yaml.Node, path: Path, source: Source, problems: Problems, constructor, depth: int) -> Any:
    source.lines.setdefault(path, node.start_mark.line + 1)
    if depth > MAX_DEPTH:
        problems.errors.append(Problem(source, node.start_mark.line + 1, path, ERROR_TOO_DEEP))
        return None
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                problems.errors.append(Problem(source, line, path, ERROR_COMPLEX_KEY))
                continue
            # Keys are names (tools, states, fields): ``404:`` or ``yes:`` mean the text, not a number.
            key = str(key_node.value)
            if key in out:
                first = source.lines[(*path, key)]
                problems.errors.append(Problem(source, line, path, ERROR_DUPLICATE_KEY.format(key=key, line=first)))
                continue
            source.lines[(*path, key)] = line
            out[key] = _build(value_node, (*path, key), source, problems, constructor, depth + 1)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item in enumerate(node.value):
            source.lines[(*path, index)] = item.start_mark.line + 1
            items.append(_build(item, (*path, index), source, problems, constructor, depth + 1))
        return items
    try:
        return constructor.construct_object(node, deep=True)
    except ConstructorError as exc:
        problems.errors.append(
            Problem(source, node.start_mark.line + 1, path, ERROR_YAML_SYNTAX.format(problem=exc.problem))
        )
        return None
