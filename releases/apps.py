from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


class ReleasesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "releases"
    verbose_name = "Releases"

    def ready(self) -> None:
        from common.history.registry import history_register
        from releases import checks  # noqa: F401  (registers system checks)
        from releases.models import ConversationTest, RolloutPlan, RoutingTestCase
        from releases.rollout.served import plan_deleted, plan_saved

        # Rollout plans decide which conversations a candidate version serves: every write of a plan writes what
        # routing serves of it (routing.models.LiveRollout, which routing watches), a bulk one through the plans'
        # queryset.
        post_save.connect(plan_saved, sender=RolloutPlan, dispatch_uid="releases-plan-served-save")
        post_delete.connect(plan_deleted, sender=RolloutPlan, dispatch_uid="releases-plan-served-delete")
        # Field-level history (old → new, who, when) of the saved tests, since they gate publishing. Not RolloutPlan:
        # its decisions (RolloutDecision) are its history, with the figures behind each.
        history_register(RoutingTestCase)
        history_register(ConversationTest)
