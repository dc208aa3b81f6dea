"""Example telecom MCP server (see ``server.py``)."""
