from django.apps import AppConfig


class AgentsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "agents"
    verbose_name = "Agents and tools"

    def ready(self) -> None:
        from agents import checks  # noqa: F401  (registers system checks)
        from agents.models import (
            AgentProfile,
            ExternalDesk,
            McpServer,
            McpTool,
            RemoteBackend,
            Specialist,
            SpecialistPrompt,
        )
        from common.config_version import config_models_watch
        from common.history.registry import history_register

        config_models_watch(
            AgentProfile,
            Specialist,
            SpecialistPrompt,
            McpServer,
            McpTool,
            RemoteBackend,
            relations=(Specialist.allowed_tools.through, Specialist.handoff_targets.through),
        )
        # Field-level history (old → new, who, when) of what decides a profile's behaviour. An MCP server's endpoint
        # (and the template it was imported as) may carry credentials (user:password@, ?token=): they are masked
        # before they reach the log.
        history_register(AgentProfile, m2m_fields={"goal_domains"})
        history_register(Specialist, m2m_fields={"allowed_tools", "handoff_targets"})
        history_register(SpecialistPrompt)
        history_register(
            McpServer,
            mask_fields={"endpoint", "endpoint_template"},
            mask_callable="common.history.registry.endpoint_or_template_mask",
        )
        history_register(McpTool)
        # A remote backend's key is never recorded, not even in part; its address is masked as a server's is.
        history_register(
            RemoteBackend,
            mask_fields={"api_key", "base_url"},
            mask_callable="common.history.registry.secret_or_endpoint_mask",
        )
        # An external desk's signing secret is never recorded either; its webhook URL is masked.
        history_register(
            ExternalDesk, mask_fields={"secret", "url"}, mask_callable="common.history.registry.secret_or_endpoint_mask"
        )
