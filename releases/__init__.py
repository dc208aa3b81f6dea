"""How a change in behaviour reaches customers safely: a profile's draft, its saved routing tests and calibration,
publishing and reverting versions, a second person's approval, rollout plans and their guard, the impact preview,
and the configuration's YAML import and export. Layer 7: imports the engine and below, never a face.

The models it works on stay in ``routing/models.py`` (app label ``routing``). The layers and their rules:
docs/architecture.md.
"""
