from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "conversations"
    verbose_name = "Conversations"

    def ready(self) -> None:
        from conversations.desk.webhook import escalation_posted
        from conversations.signals import escalation_changed

        # The external desks hear of every committed change of their escalations (their signed webhook).
        escalation_changed.connect(escalation_posted, dispatch_uid="conversations.desk.webhook")
