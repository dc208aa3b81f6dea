"""Tenants, their API keys, and who a request is. Layer 2: imports only common.

The layers and their rules: docs/architecture.md.
"""
