"""What the readers of every kind of YAML file share: the :class:`Patch` one file makes of one entity, the
:class:`Parsed` an import gathers, and the checks of a value's type, of a mapping's keys, of names, texts, word lists
and translations, and the model's own validators.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models

from common.translations import translations_cleaned, translations_problems
from releases.configio.messages import (
    ERROR_EMPTY,
    ERROR_REQUIRED,
    ERROR_TYPE,
    ERROR_UNKNOWN_KEY,
    ERROR_WORD_BOOLEAN,
    WARNING_IGNORED_KEY,
)
from releases.configio.source import Node, Problems


@dataclass(eq=False)
class Patch:
    """What one file says about one entity: only the fields it names (the rest stay as they are).

    ``values`` maps model field names to new values and ``where`` to the node
    each came from. ``refs`` holds names of other entities, still unresolved:
    a single :class:`Node` (``server``, ``agent``, ``intent``, ``fallback``, ``coordinator``, ``tool``) or
    a list of them (``tools``, ``handoff_targets``, ``mcp_tools``, ``keywords``, ``goal_domains``).
    """

    kind: str
    section: str
    key: tuple[str, ...]
    node: Node
    values: dict[str, Any] = field(default_factory=dict)
    where: dict[str, Node] = field(default_factory=dict)
    refs: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.key[-1]

    def put(self, model_field: str, node: Node, value: Any) -> None:
        self.values[model_field] = value
        self.where[model_field] = node


@dataclass
class Parsed:
    """Everything the files of one import say, before references are resolved."""

    servers: list[Patch] = field(default_factory=list)
    tools: list[Patch] = field(default_factory=list)
    profiles: list[Patch] = field(default_factory=list)
    specialists: list[Patch] = field(default_factory=list)
    intents: list[Patch] = field(default_factory=list)
    policies: list[Patch] = field(default_factory=list)
    capabilities: list[Patch] = field(default_factory=list)
    goals: list[Patch] = field(default_factory=list)
    default_agents: list[Node] = field(default_factory=list)
    knowledge: list[Any] = field(default_factory=list)  # releases.configio.kinds.knowledge.SourceEntry


_TYPE_NAMES = {
    "string": "a string",
    "text": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "mapping": "a mapping",
    "list": "a list",
}


def _actual(value: Any) -> str:
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _is(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "text":
        return value is None or isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "mapping":
        return isinstance(value, dict)
    if kind == "list":
        return isinstance(value, list)
    raise ValueError(kind)


def check(node: Node, kind: str, problems: Problems) -> bool:
    """Record a type error unless ``node`` holds a value of ``kind``."""
    if _is(node.value, kind):
        return True
    problems.add(node, ERROR_TYPE.format(expected=_TYPE_NAMES[kind], actual=_actual(node.value)))
    return False


def keys_of(
    node: Node,
    problems: Problems,
    known: Iterable[str],
    *,
    required: Iterable[str] = (),
    ignored: Iterable[str] = (),
) -> dict[str, Node] | None:
    """The known keys of a mapping node; unknown keys are errors, ``ignored`` ones warnings."""
    if not check(node, "mapping", problems):
        return None
    known = tuple(known)
    ignored = tuple(ignored)
    out: dict[str, Node] = {}
    for key, child in node.items():
        if key in known:
            out[key] = child
        elif key in ignored:
            problems.warn(child, WARNING_IGNORED_KEY)
        else:
            problems.add(child, ERROR_UNKNOWN_KEY.format(key=key, expected=", ".join(known)))
    for key in required:
        if key not in node.value:
            problems.add(node, ERROR_REQUIRED.format(key=key))
    return out


def name_of(node: Node, problems: Problems) -> str | None:
    """A non-empty string naming something (a reference or an identity)."""
    if not check(node, "string", problems):
        return None
    if not node.value.strip():
        problems.add(node, ERROR_EMPTY)
        return None
    return node.value.strip()


def names_of(node: Node, problems: Problems) -> list[Node] | None:
    """A list of names, each as its own node (so each can be reported on its line)."""
    if node.value is None:
        return []
    if not check(node, "list", problems):
        return None
    out = []
    for element in node.elements():
        name = name_of(element, problems)
        if name is not None:
            out.append(Node(element.source, element.path, name))
    return out


def read_scalar(
    patch: Patch, keys: dict[str, Node], key: str, kind: str, problems: Problems, model_field: str = ""
) -> None:
    node = keys.get(key)
    if node is None or not check(node, kind, problems):
        return
    value = node.value
    if kind == "text":
        value = (value or "").strip()
    elif kind == "number":
        value = float(value)
    patch.put(model_field or key, node, value)


def read_strings(patch: Patch, keys: dict[str, Node], key: str, problems: Problems, *, strip: bool = True) -> None:
    """A list of free-text strings stored as a JSON list (intent and goal examples, a capability's keywords):
    ``null`` is ``[]``; ``strip=False`` keeps them as written (what a manifest sync compares them with)."""
    node = keys.get(key)
    if node is None:
        return
    if node.value is None:
        patch.put(key, node, [])
        return
    if not check(node, "list", problems):
        return
    values, valid = [], True
    for element in node.elements():
        if isinstance(element.value, bool):  # YAML reads an unquoted yes/no as a boolean
            problems.add(element, ERROR_WORD_BOOLEAN)
            valid = False
        elif check(element, "string", problems):
            values.append(element.value.strip() if strip else element.value)
        else:
            valid = False
    if valid:
        patch.put(key, node, values)


def read_words(patch: Patch, keys: dict[str, Node], key: str, problems: Problems, model_field: str = "") -> None:
    """A list of non-empty words or phrases (a profile's confirmation, denial and closing words, its out-of-scope
    examples), kept as written."""
    node = keys.get(key)
    if node is None:
        return
    if node.value is None:
        patch.put(model_field or key, node, [])
        return
    if not check(node, "list", problems):
        return
    values, valid = [], True
    for element in node.elements():
        if isinstance(element.value, bool):
            problems.add(element, ERROR_WORD_BOOLEAN)
            valid = False
        elif not check(element, "string", problems):
            valid = False
        elif not element.value.strip():
            problems.add(element, ERROR_EMPTY)
            valid = False
        else:
            values.append(element.value)
    if valid:
        patch.put(model_field or key, node, values)


def read_translations(patch: Patch, keys: dict[str, Node], fields: Iterable[str], problems: Problems) -> None:
    """``translations: {language: {field: text}}`` (common.translations), each problem on its language's line, stored
    as the admin stores it; ``null`` is none. The file's translations replace the stored ones."""
    node = keys.get("translations")
    if node is None:
        return
    if node.value is None:
        patch.put("translations", node, {})
        return
    if not check(node, "mapping", problems):
        return
    found = translations_problems(node.value, fields)
    for language, message in found:
        problems.add(node.child(language) if language in node.value else node, message)
    if not found:
        patch.put("translations", node, translations_cleaned(node.value))


def optional_name(node: Node, problems: Problems) -> Node | None:
    """A reference that may be cleared: ``null`` or ``""`` give a node holding ``None``."""
    if node.value in (None, ""):
        return Node(node.source, node.path, None)
    if name_of(node, problems) is None:
        return None
    return Node(node.source, node.path, node.value.strip())


def model_clean(patch: Patch, model: type[models.Model], problems: Problems, *, skip: Iterable[str] = ()) -> None:
    """Run the model's own field validators (lengths, ranges, slugs, URLs, JSON settings) on the given values."""
    values = {name: value for name, value in patch.values.items() if name not in skip}
    if not values:
        return
    instance = model(**values)
    exclude = [f.name for f in model._meta.get_fields() if f.concrete and f.name not in values]
    try:
        instance.clean_fields(exclude=exclude)
    except ValidationError as exc:
        for name, errors in exc.message_dict.items():
            node = patch.where.get(name, patch.node)
            for error in errors:
                problems.add(node, error.rstrip("."))
