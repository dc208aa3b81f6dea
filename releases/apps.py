from django.apps import AppConfig


class ReleasesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "releases"
    verbose_name = "Releases"

    def ready(self) -> None:
        from common.config_version import config_models_watch
        from common.history.registry import history_register
        from releases import checks  # noqa: F401  (registers system checks)
        from releases.models import ConversationTest, RolloutPlan, RoutingTestCase
        from releases.rollout.served import plans_served
        from routing.public import rollouts_source_set

        # Rollout plans decide which conversations a candidate version serves: routing's snapshot reads them through
        # the reader handed to it here, and rebuilds when one changes.
        rollouts_source_set(plans_served)
        config_models_watch(RolloutPlan)
        # Field-level history (old → new, who, when) of the saved tests, since they gate publishing. Not RolloutPlan:
        # its decisions (RolloutDecision) are its history, with the figures behind each.
        history_register(RoutingTestCase)
        history_register(ConversationTest)
