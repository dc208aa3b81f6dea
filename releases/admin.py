"""The release lifecycle's admin pages. The models are the routing app's (app label ``routing``), so their URLs
stay under /admin/routing/; the pages added to other apps' admins hang on their extension points."""

from releases import (  # noqa: F401  (each module registers its pages)
    admin_approvals,  # requests for a second person's approval and their review page
    admin_config,  # the configuration's import page and downloads
    admin_conversation_test_runs,  # runs of conversation tests: "Run tests", their list and pages
    admin_conversation_tests,  # the saved conversation tests, as forms
    admin_impact,  # the impact preview
    admin_rollouts,  # rollout plans with their decisions
    admin_tests,  # the saved routing tests and their "Run tests" page
    admin_versions,  # RoutingVersion, and a profile's versions: its state, "Publish draft", compare and revert
)
