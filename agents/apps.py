from django.apps import AppConfig


class AgentsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "agents"
    verbose_name = "Agents and tools"

    def ready(self) -> None:
        from agents import checks  # noqa: F401  (registers system checks)
