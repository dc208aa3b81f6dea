"""Tests of the example MCP servers."""
