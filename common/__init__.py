"""The kernel: events, text folding, domain errors and their HTTP mapping, admin helpers, the config version. Layer
1: imports no app.

The layers and their rules: docs/architecture.md.
"""
