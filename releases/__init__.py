"""How a change in behaviour reaches customers safely: a profile's draft, its saved routing tests and calibration,
publishing and reverting versions, a second person's approval, rollout plans and their guard, the impact preview,
and the configuration's YAML import and export. Layer 7: imports the engine and below, never a face.

Its models are in ``releases/models.py``; the versions and which one is served are routing's. The layers and their
rules: docs/architecture.md.
"""
