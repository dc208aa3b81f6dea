"""The release lifecycle's admin pages: its own models' under /admin/releases/ (the versions' are routing's model,
under /admin/routing/); the pages added to other apps' admins hang on their extension points."""

from releases.admin import (  # noqa: F401  (each module registers its pages)
    approvals,  # requests for a second person's approval and their review page
    config,  # the configuration's import page and downloads
    conversation_test_runs,  # runs of conversation tests: "Run tests", their list and pages
    conversation_tests,  # the saved conversation tests, as forms
    impact,  # the impact preview
    rollouts,  # rollout plans with their decisions
    routing_tests,  # the saved routing tests and their "Run tests" page
    versions,  # RoutingVersion, and a profile's versions: its state, "Publish draft", compare and revert
)
