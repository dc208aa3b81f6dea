"""The engine: the conversation store and what happens to one message (graph, ordering, supervisor and fan-out,
guardrails, judges, the specialist runtime). Layer 6: imports routing and below, never the releases or a face.

The layers and their rules: docs/architecture.md.
"""
