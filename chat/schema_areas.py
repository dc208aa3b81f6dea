"""The areas of the API, in words a developer knows: each operation's tag in the OpenAPI schema, Swagger UI's sections.

drf-spectacular tags an operation with the first word of its path, which put every operation under ``api``.
:class:`AreaSchema` (``DEFAULT_SCHEMA_CLASS``) tags it with its area instead, and :func:`area_tags` (a postprocessing
hook) lists the areas with their descriptions in order. This module imports no view: drf-spectacular reads
``DEFAULT_SCHEMA_CLASS`` while the views' modules are being imported.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema

# The areas of the API, in the order the docs show them: (tag, what it is for a developer, the path prefixes whose
# operations it groups). An operation belongs to the area with the longest prefix of its path; a view's own
# ``extend_schema(tags=...)`` still wins. A route under no prefix here keeps drf-spectacular's default tag, which
# platform/tests/test_schema.py refuses: a new route names its area here.
AREAS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "Messages",
        "Send a user message through a profile's routing graph, as JSON or as Server-Sent Events.",
        ("/api/gateway/", "/api/chat/"),
    ),
    (
        "Sessions",
        "A tenant's conversations: list them, read one's messages and live state, follow it, end it, clear it.",
        ("/api/sessions",),
    ),
    ("Feedback", "Rate an answer up or down, with a comment.", ("/api/sessions/{conversation_key}/feedback",)),
    (
        "Customers",
        "Everything stored about one end user of the tenant: export it as one JSON document, or erase it.",
        ("/api/customers/",),
    ),
    (
        "Escalations",
        "Conversations handed to a person: the queue, taking one, replying as a person, handing it back.",
        ("/api/escalations",),
    ),
    ("Agents", "The agent profiles with their specialists and intents.", ("/api/agents",)),
    (
        "OpenAI-compatible",
        "Use a profile as if it were a model, with OpenAI's SDKs and clients; errors in OpenAI's shape.",
        ("/v1/",),
    ),
    ("A2A", "Each profile as an agent of the Agent2Agent protocol.", ("/a2a/",)),
    (
        "Analytics",
        "Handoffs, routing, tools, cohorts, ratings, outcomes, usage and rollout plans over a window.",
        ("/api/analytics/",),
    ),
    (
        "Conversation tests",
        "For debug keys: run a profile's saved conversation tests against a version (from CI), read a run back.",
        ("/api/profiles/",),
    ),
    (
        "Debug",
        "For debug keys: a routing decision or goal plan alone, the configuration, MCP tools, token usage.",
        ("/api/debug/",),
    ),
    ("Health", "Liveness, readiness and the full health report (no key needed).", ("/api/health",)),
)


def area_of(path: str) -> str | None:
    """The tag of the area ``path`` (an operation's path in the schema) belongs to; ``None`` for none."""
    matches = [(len(prefix), tag) for tag, _, prefixes in AREAS for prefix in prefixes if path.startswith(prefix)]
    return max(matches)[1] if matches else None


class AreaSchema(AutoSchema):
    """drf-spectacular's schema of a view, tagged with its area (:data:`AREAS`) rather than its path's first word,
    which put every operation under one tag, ``api``."""

    def get_tags(self) -> list[str]:
        area = area_of(self.path)
        return [area] if area is not None else super().get_tags()


def area_tags(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """The areas' names and descriptions, in their order, as the document's ``tags`` (Swagger UI's sections)."""
    paths = result.get("paths", {}).values()
    used = {tag for methods in paths for operation in methods.values() for tag in operation.get("tags", [])}
    result["tags"] = [{"name": tag, "description": text} for tag, text, _ in AREAS if tag in used]
    return result
