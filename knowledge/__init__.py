"""Knowledge: the documents a business keeps per profile, cut into passages, and the search over them. Layer 5: imports
only agents and below; the admin writes it, the engine's specialists will read it.

The layers and their rules: docs/architecture.md.
"""
