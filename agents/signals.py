"""What the agents tell the layers above them, without importing them: an MCP server was synchronised.

:func:`agents.services.mcp_server_sync` sends :data:`mcp_server_synced` (``sender=McpServer``, ``server=...``)
after the server's tools are synchronised. Routing connects the reading of the server's domain manifests into
goals and capabilities (``routing/apps.py``). A receiver returns :class:`SyncNotes`: the lines the sync report
prints, and the problems (a bad manifest, naming the place) that make the sync fail without hiding the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import django.dispatch

mcp_server_synced = django.dispatch.Signal()


@dataclass
class SyncNotes:
    """What one receiver of :data:`mcp_server_synced` did: report lines, and errors kept apart."""

    lines: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
