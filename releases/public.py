"""The door of ``releases/`` (docs/architecture.md, "Doors"): what the faces and the analytics use of how a change
reaches customers — a saved conversation test's run and its report, the saved routing tests as plain data and their
run, and a rollout's cohorts and their figures. Its models are imported from ``releases.models``."""

from __future__ import annotations

from releases.evals.runs import conversation_test_run_start, run_report
from releases.rollout.guard import CANDIDATE, CONTROL, CohortWindow, cohorts_figures
from releases.routing_tests import Case as RoutingTestData
from releases.routing_tests import routing_tests_run

__all__ = [
    "CANDIDATE",
    "CONTROL",
    "CohortWindow",
    "RoutingTestData",
    "cohorts_figures",
    "conversation_test_run_start",
    "routing_tests_run",
    "run_report",
]
