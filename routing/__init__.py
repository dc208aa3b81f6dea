"""What business users edit about routing (intents, keywords, state policies, rollout flags) and its compiled
snapshot, router and decision. Layer 5: imports only agents and below, never the engine.

The layers and their rules: docs/architecture.md.
"""
