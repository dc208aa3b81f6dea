"""The ``servers:`` and ``tools:`` sections: MCP servers and their tools."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from agents.models import McpServer, McpTool, McpTransport
from agents.public import SHORTHAND_TYPES, expand_args_schema, expand_env, validate_tool_args_schema
from common.endpoints import env_template
from releases.configio.fields import Parsed, Patch, check, keys_of, model_clean, name_of, read_scalar
from releases.configio.messages import ERROR_BAD_CHOICE, ERROR_ENV_SECRET, ERROR_ENV_UNSET, ERROR_SHORTHAND_TYPE
from releases.configio.source import Node, Problems

SERVER_KEYS = ("transport", "endpoint", "enabled", "description", "timeout")


TOOL_KEYS = ("description", "mcp_server", "remote_name", "enabled", "needs_permission", "args_schema")


# ``http`` is the seeds' name for MCP's streamable HTTP transport.
TRANSPORT_ALIASES = {"http": McpTransport.STREAMABLE_HTTP, "streamable-http": McpTransport.STREAMABLE_HTTP}


TRANSPORTS = {choice.value for choice in McpTransport}


def parse_servers(section: Node, problems: Problems, parsed: Parsed) -> None:
    if section.value is None or not check(section, "mapping", problems):
        return
    for name, node in section.items():
        keys = keys_of(node, problems, SERVER_KEYS, required=("endpoint",))
        if keys is None:
            continue
        patch = Patch("MCP server", "servers", (name,), node)
        patch.where["name"] = node
        patch.values["name"] = name
        if "transport" in keys and name_of(keys["transport"], problems) is not None:
            raw = keys["transport"].value.strip()
            transport = TRANSPORT_ALIASES.get(raw, raw)
            if transport in TRANSPORTS:
                patch.put("transport", keys["transport"], str(transport))
            else:
                choices = ", ".join(sorted({*TRANSPORTS, *TRANSPORT_ALIASES}))
                problems.add(keys["transport"], ERROR_BAD_CHOICE.format(value=raw, choices=choices))
        if "endpoint" in keys and name_of(keys["endpoint"], problems) is not None:
            written = keys["endpoint"].value.strip()
            endpoint, missing, refused = expand_env(written)
            for variable in missing:
                problems.add(keys["endpoint"], ERROR_ENV_UNSET.format(name=variable))
            for variable in refused:
                problems.add(keys["endpoint"], ERROR_ENV_SECRET.format(name=variable))
            patch.put("endpoint", keys["endpoint"], endpoint)
            # Kept as written, so that an export gives the references back, not this environment's values.
            patch.put("endpoint_template", keys["endpoint"], env_template(written))
        read_scalar(patch, keys, "enabled", "boolean", problems)
        read_scalar(patch, keys, "description", "text", problems)
        read_scalar(patch, keys, "timeout", "number", problems)
        model_clean(patch, McpServer, problems)
        parsed.servers.append(patch)


def parse_tools(section: Node, problems: Problems, parsed: Parsed) -> None:
    if section.value is None or not check(section, "mapping", problems):
        return
    for name, node in section.items():
        keys = keys_of(node, problems, TOOL_KEYS, required=("mcp_server",))
        if keys is None:
            continue
        patch = Patch("MCP tool", "tools", (name,), node)
        patch.put("name", node, name)
        if "mcp_server" in keys and name_of(keys["mcp_server"], problems) is not None:
            patch.refs["server"] = Node(node.source, keys["mcp_server"].path, keys["mcp_server"].value.strip())
        read_scalar(patch, keys, "description", "text", problems)
        read_scalar(patch, keys, "remote_name", "text", problems)
        read_scalar(patch, keys, "enabled", "boolean", problems)
        read_scalar(patch, keys, "needs_permission", "boolean", problems)
        if "args_schema" in keys:
            schema = _args_schema(keys["args_schema"], problems)
            if schema is not None:
                patch.put("args_schema", keys["args_schema"], schema)
        model_clean(patch, McpTool, problems, skip=("args_schema",))
        parsed.tools.append(patch)


def _args_schema(node: Node, problems: Problems) -> dict[str, Any] | None:
    """Expand the seed's ``{arg: type}`` shorthand, then validate it as JSON Schema (agents.schemas)."""
    if node.value is not None and not check(node, "mapping", problems):
        return None
    value = node.value or {}
    shorthand = not ({"type", "properties", "$schema"} & set(value))
    if shorthand:
        bad = False
        for _arg, child in node.items() if value else []:
            if child.value not in SHORTHAND_TYPES:
                choices = ", ".join(sorted(SHORTHAND_TYPES))
                problems.add(child, ERROR_SHORTHAND_TYPE.format(value=child.value, choices=choices))
                bad = True
        if bad:
            return None
    try:
        schema = expand_args_schema(value)
        validate_tool_args_schema(schema)
    except ValidationError as exc:
        problems.add(_schema_error_node(node, value), "; ".join(m.rstrip(".") for m in exc.messages))
        return None
    return schema


def _schema_error_node(node: Node, value: Any) -> Node:
    """The node nearest to where the JSON Schema is wrong, for the line number."""
    try:
        Draft202012Validator.check_schema(value)
    except SchemaError as exc:
        return Node(node.source, (*node.path, *exc.absolute_path), None)
    return node
