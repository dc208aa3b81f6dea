from django.apps import AppConfig


class RoutingConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "routing"
    verbose_name = "Routing"

    def ready(self) -> None:
        from common.config_version import config_models_watch
        from routing.models import Intent, Keyword, RolloutFlag, RolloutTenantOverride, RolloutUserOverride, StatePolicy

        # Rollout flags too: the snapshot carries them, so a change reaches every process on its next message.
        # Their history (RolloutFlagChange) is not configuration.
        config_models_watch(
            Intent,
            Keyword,
            StatePolicy,
            RolloutFlag,
            RolloutUserOverride,
            RolloutTenantOverride,
            relations=(Intent.mcp_tools.through,),
        )
