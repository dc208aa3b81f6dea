"""The agents' admin pages, one module per model's admin; importing the package registers them all.

Profiles (:mod:`agents.admin.profiles`), specialists (:mod:`agents.admin.specialists`) and their prompt versions
(:mod:`agents.admin.prompts`), MCP servers and tools (:mod:`agents.admin.mcp`), remote backends
(:mod:`agents.admin.backends`), external desks (:mod:`agents.admin.desks`) and model prices
(:mod:`agents.admin.prices`); what several of them use is in :mod:`agents.admin.parts`.
"""

from agents.admin import backends, desks, mcp, prices, profiles, prompts, specialists

__all__ = ["backends", "desks", "mcp", "prices", "profiles", "prompts", "specialists"]
