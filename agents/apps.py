from django.apps import AppConfig


class AgentsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "agents"
    verbose_name = "Agents and tools"

    def ready(self) -> None:
        from agents import checks  # noqa: F401  (registers system checks)
        from agents.models import AgentProfile, McpServer, McpTool, Specialist, SpecialistPrompt
        from common.config_version import config_models_watch

        config_models_watch(
            AgentProfile,
            Specialist,
            SpecialistPrompt,
            McpServer,
            McpTool,
            relations=(Specialist.allowed_tools.through, Specialist.handoff_targets.through),
        )
