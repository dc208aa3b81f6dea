"""JSON Schemas a client (or an MCP server) could send to make the platform work or write without end, as the
reliability probe measured them: the structured output tests on every path share them."""

from __future__ import annotations


def padded(pad: dict) -> dict:
    """An answer and one more required value, ``pad``: the probe's shape (331 bytes with ``minLength`` 1,000,000)."""
    return {"type": "object", "properties": {"answer": {"type": "string"}, "pad": pad}, "required": ["answer", "pad"]}


def reference_tree(depth: int) -> dict:
    """A binary tree of ``$ref``s as ``pad``, 2**depth leaves from a few hundred bytes a level (the probe's 2.3 KB
    schema filled 1.25 MB in 16 s at depth 16)."""
    levels = {
        f"d{level}": {
            "type": "object",
            "properties": {"l": {"$ref": f"#/$defs/d{level + 1}"}, "r": {"$ref": f"#/$defs/d{level + 1}"}},
            "required": ["l", "r"],
        }
        for level in range(depth)
    }
    return {"$defs": {**levels, f"d{depth}": {"type": "integer"}}, **padded({"$ref": "#/$defs/d0"})}


def fan_out(depth: int, keyword: str, leaf: dict) -> dict:
    """``keyword`` (``allOf``, ``anyOf``) over two references to the next level, at each level: 2**depth paths to
    ``leaf`` from a schema that stays small — and a value that may stay one number."""
    levels = {f"d{level}": {keyword: [{"$ref": f"#/$defs/d{level + 1}"}] * 2} for level in range(depth)}
    return {"$defs": {**levels, f"d{depth}": leaf}, "$ref": "#/$defs/d0"}


def json_schema_format(schema: dict, *, strict: bool = False) -> dict:
    """A chat completion's ``response_format`` asking for ``schema``."""
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": strict}}
