"""A JSON Schema from outside the platform — a client's ``response_format``, an MCP tool's arguments — taken, checked
against and filled within bounds the code counts, whatever the schema asks.

Any tenant key can send a schema, and an MCP server lists its own: the work and the size they ask are the platform's
to bound. Each bound is a count, not a clock:

* :func:`schema_problem` — a schema is refused, with a message saying why, when its document has more than
  :data:`SCHEMA_MAX_NODES` JSON values, :data:`SCHEMA_MAX_CHARS` characters of keys, strings and digits or
  :data:`SCHEMA_MAX_DEPTH` levels, or a number JSON cannot write; when it is no valid JSON Schema (2020-12); when it
  refers outside itself (only ``#/…`` pointers are followed) or declares a dialect or resource inside itself
  (``$schema``, ``$id`` below the root); when it uses a keyword whose work happens outside the count
  (:data:`NOT_COUNTED`); or when it has more than :data:`SCHEMA_MAX_PATTERNS` patterns, or one RE2 cannot run.
* :func:`schema_errors` — a value checked against a schema: every keyword evaluated costs one step plus the sizes
  of its value and of the part of the instance it reads (a ``$ref`` followed, each branch of an ``anyOf``: recursion
  and cycles cost what they run); past :data:`CHECK_MAX_STEPS` the check stops with :class:`SchemaTooCostly`.
  Patterns run on RE2 (linear in the text: no backtracking), ``uniqueItems`` in one pass.
* :func:`schema_instance` — the least value valid against a schema, carrying a text, within a number of
  characters of JSON: every schema node visited (``$ref`` expansions, ``allOf`` merges, branches tried) costs a step
  of :data:`FILL_MAX_STEPS`, and a ``minLength``, ``minItems``, ``minProperties``, ``const``, enum value or number
  that would not fit in the room left is refused before it is made; :func:`schema_filled` says too what the text
  lost to that room.

``limits.py`` holds the limits, errors and budget, ``check.py`` the first two bounds, ``fill.py`` the third. Pure: no
database, no network.
"""

from agents.structured.check import schema_errors, schema_problem, schema_valid
from agents.structured.fill import TEXT_PROPERTIES, Filled, schema_filled, schema_instance
from agents.structured.limits import (
    CHECK_MAX_STEPS,
    FILL_MAX_STEPS,
    SCHEMA_MAX_CHARS,
    SCHEMA_MAX_DEPTH,
    SCHEMA_MAX_NODES,
    SCHEMA_MAX_PATTERNS,
    FormatUnsupported,
    SchemaRefused,
    SchemaTooCostly,
    json_text,
    text_fitting,
)

__all__ = [
    "CHECK_MAX_STEPS",
    "FILL_MAX_STEPS",
    "SCHEMA_MAX_CHARS",
    "SCHEMA_MAX_DEPTH",
    "SCHEMA_MAX_NODES",
    "SCHEMA_MAX_PATTERNS",
    "TEXT_PROPERTIES",
    "Filled",
    "FormatUnsupported",
    "SchemaRefused",
    "SchemaTooCostly",
    "json_text",
    "schema_errors",
    "schema_filled",
    "schema_instance",
    "schema_problem",
    "schema_valid",
    "text_fitting",
]
