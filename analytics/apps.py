from django.apps import AppConfig


class AnalyticsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "analytics"
    verbose_name = "Analytics"

    def ready(self) -> None:
        from analytics.services import (
            conversation_counted_again,
            outcomes_decided_again,
            ratings_given_again,
            rollup_hours_unseal,
            rollup_seal_before,
        )
        from conversations.public import (
            conversation_recounted,
            outcomes_changed,
            ratings_changed,
            store_rows_deleted,
            store_rows_retiring,
        )

        # Writers of the conversation store do not know about the daily totals: they send signals, and the totals
        # of the days (on the live day, the hours) whose rows changed are marked stale here (analytics/services.py).
        conversation_recounted.connect(
            lambda sender, created_at, every_day=False, **kwargs: conversation_counted_again(
                created_at, every_day=every_day
            ),
            dispatch_uid="analytics-conversation-recounted",
            weak=False,
        )
        store_rows_deleted.connect(
            lambda sender, hours, **kwargs: rollup_hours_unseal(hours),
            dispatch_uid="analytics-store-rows-deleted",
            weak=False,
        )
        outcomes_changed.connect(
            lambda sender, hours, **kwargs: outcomes_decided_again(hours),
            dispatch_uid="analytics-outcomes-changed",
            weak=False,
        )
        ratings_changed.connect(
            lambda sender, hours, **kwargs: ratings_given_again(hours),
            dispatch_uid="analytics-ratings-changed",
            weak=False,
        )
        # A retention purge: the days it reaches are summed before their rows go (and stay as summed).
        store_rows_retiring.connect(
            lambda sender, since, before, **kwargs: rollup_seal_before(since=since, before=before),
            dispatch_uid="analytics-store-rows-retiring",
            weak=False,
        )
