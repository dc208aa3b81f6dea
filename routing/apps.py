from django.apps import AppConfig


class RoutingConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "routing"
    verbose_name = "Routing"

    def ready(self) -> None:
        from agents.models import AgentProfile, McpServer
        from agents.public import mcp_server_synced
        from common.config_version import config_models_watch
        from common.history.registry import USER_ID_MASK, history_register
        from routing import checks  # noqa: F401  (registers system checks)
        from routing.goals.sync import on_mcp_server_synced
        from routing.models import (
            Capability,
            Goal,
            Intent,
            Keyword,
            LiveRollout,
            RolloutFlag,
            RolloutTenantOverride,
            RolloutUserOverride,
            StatePolicy,
        )

        # Rollout flags too: the snapshot carries them, so a change reaches every process on its next message.
        # Their history (RolloutFlagChange) is not configuration. A profile's goal domains are watched here: only
        # routing's snapshot reads them, and so are the versions rolling out (LiveRollout, which releases writes).
        config_models_watch(
            Intent,
            Keyword,
            StatePolicy,
            Goal,
            Capability,
            RolloutFlag,
            RolloutUserOverride,
            RolloutTenantOverride,
            LiveRollout,
            relations=(Intent.mcp_tools.through, AgentProfile.goal_domains.through),
        )
        # A synced MCP server's domain manifests become goals and capabilities.
        mcp_server_synced.connect(on_mcp_server_synced, sender=McpServer, dispatch_uid="routing-goal-sync")
        # Field-level history (old → new, who, when) of every routing model (the saved tests': releases').
        # RolloutFlagChange and the versions are histories themselves.
        history_register(Intent, m2m_fields={"mcp_tools"})
        for model in (
            Keyword,
            StatePolicy,
            Goal,
            Capability,
            RolloutFlag,
            RolloutTenantOverride,
        ):
            history_register(model)
        # A user override names a customer: its id is recorded as its keyed pseudonym (an e-mail as the conversation
        # store keeps it, any other id as user:…), and so is the entry's name (RolloutUserOverride.__str__).
        history_register(RolloutUserOverride, mask_fields={"user_id"}, mask_callable=USER_ID_MASK)
