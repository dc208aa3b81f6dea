"""Example retail MCP server (see ``server.py``)."""
