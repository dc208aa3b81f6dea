from django.apps import AppConfig


class TenantsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "tenants"
    verbose_name = "Tenants and API keys"

    def ready(self) -> None:
        from django.core import checks

        from common.config_version import config_models_watch
        from tenants.models import ApiKey, Tenant
        from tenants.throttles import proxy_settings_check, throttle_settings_check

        checks.register(throttle_settings_check)
        checks.register(proxy_settings_check, checks.Tags.security, deploy=True)

        # The API-key cache (tenants/auth.py) is tagged with the configuration version.
        config_models_watch(Tenant, ApiKey)
