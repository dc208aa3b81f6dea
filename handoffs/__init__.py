"""The agent_handoffs table, the control tools and the loop-safety rules. Layer 3: imports only common and tenants.

The layers and their rules: docs/architecture.md.
"""
