"""Example MCP servers that ship with the platform (see ``mcp_servers/README.md``).

* ``mcp_servers.telecom.server`` — invoices and payments of phone lines;
* ``mcp_servers.retail.server`` — orders and deliveries.

Both are written with the official MCP Python SDK and served over streamable
HTTP at ``/mcp``. They hold small, fixed demo data and import nothing from the
Django project.
"""
