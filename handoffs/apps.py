from django.apps import AppConfig


class HandoffsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "handoffs"
    verbose_name = "Handoffs"
