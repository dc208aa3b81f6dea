"""Benchmarks, and the analytics benchmark's data generator: scripts run from the repository root (each module's
docstring says how). A package so that their tests (``bench/tests``) import them as ``bench.*``."""
