"""Profiles, specialists and prompt versions, MCP servers and tools; the MCP and model clients. Layer 4: imports only
the layers below (handoffs, tenants, common), never the engine.

The layers and their rules: docs/architecture.md.
"""
