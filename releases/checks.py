"""System checks guarding invariants of the release lifecycle's settings (stable ids, with hints)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.db import DatabaseError

from releases.models import ROLLOUT_PLAN_ACTIVE, RolloutPlan
from routing.public import served_version_problems


@register(Tags.security)
def rollout_webhook_secret_reused_check(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[CheckMessage]:
    """The rollout plans' webhook secret is its own: never the secret key (which keys the sessions and the
    identifier pseudonyms) nor the operational events' secret. Such a secret signs nothing."""
    secret = settings.ROLLOUT_WEBHOOK_SECRET
    if secret and secret in {settings.SECRET_KEY, settings.EVENTS_WEBHOOK_SECRET}:
        return [
            Error(
                "ROLLOUT_WEBHOOK_SECRET is another of the platform's secrets: rollout webhooks are not posted.",
                hint="Give the rollout plans' receivers a secret of their own (docs/rollouts.md, Webhook).",
                id="releases.E001",
            )
        ]
    return []


@register(Tags.security, deploy=True)
def rollout_webhook_secret_check(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[CheckMessage]:
    """In production, a plan's webhook is posted only with ``ROLLOUT_WEBHOOK_SECRET`` set: said by
    ``check --deploy``."""
    if settings.DEBUG or settings.ROLLOUT_WEBHOOK_SECRET:
        return []
    return [
        Warning(
            "ROLLOUT_WEBHOOK_SECRET is not set: no rollout plan's webhook is posted (its decisions say so).",
            hint="Set ROLLOUT_WEBHOOK_SECRET to a secret of its own, shared with the receivers (docs/rollouts.md).",
            id="releases.W001",
        )
    ]


@register(Tags.database)
def rolled_out_model_key_variables_check(
    app_configs: Sequence[AppConfig] | None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """The key variable of each running or paused rollout's candidate: routing's rule for every served version
    (:func:`routing.checks.served_version_problems`, ``routing.W001`` and ``routing.W002``)."""
    if not databases:
        return []
    try:
        served = [
            (plan.profile, plan.candidate, f"is rolled out by the plan {plan.name!r}")
            for plan in RolloutPlan.objects.filter(status__in=ROLLOUT_PLAN_ACTIVE)
            .select_related("profile", "candidate")
            .order_by("name")
        ]
    except DatabaseError:  # migrate runs the checks before it creates or alters the tables
        return []
    return served_version_problems(served)
