"""Reads everything, written by nobody else, imported by nobody: the dashboard and the analytics API. Layer 9 (top
app).

The layers and their rules: docs/architecture.md.
"""
