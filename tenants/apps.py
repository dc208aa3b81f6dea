from django.apps import AppConfig


class TenantsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "tenants"
    verbose_name = "Tenants and API keys"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Group
        from django.core import checks

        from common.config_version import config_models_watch
        from tenants.models import ApiKey, Tenant, TenantGrant
        from tenants.throttles import proxy_settings_check, throttle_settings_check

        checks.register(throttle_settings_check)
        checks.register(proxy_settings_check, checks.Tags.security, deploy=True)

        # The API-key cache (tenants/auth.py) is tagged with the configuration version.
        config_models_watch(Tenant, ApiKey)
        # So are the rights a desk socket checks on every event (chat/desk/socket.py): a user's grants, groups,
        # permissions, active and staff flags. A login's save of last_login changes none of them.
        user = get_user_model()
        config_models_watch(
            TenantGrant,
            Group,
            relations=(user.groups.through, user.user_permissions.through, Group.permissions.through),
        )
        config_models_watch(user, ignored_fields=frozenset({"last_login"}))
