"""The model calls made outside a customer's turn, and what a model's tokens cost."""

from __future__ import annotations

from django.core.validators import MinValueValidator
from django.db import models

from agents.models.profiles import AgentProfile


class UsagePurpose(models.TextChoices):
    """The work outside a customer's turn that calls models (a turn's calls are counted on its answer)."""

    PUBLISH_GATE = "publish_gate", "Publish gate"  # the saved routing tests a publish runs
    ROUTING_TESTS = "routing_tests", "Routing tests"  # run in the admin, by manage.py routing_test, for the analytics
    ROUTE_PREVIEW = "route_preview", "Route preview"
    IMPACT_PREVIEW = "impact_preview", "Impact preview"
    DEBUG = "debug", "Debug API"  # /api/debug/route and /api/debug/plan


class ModelCallUsage(models.Model):
    """Tokens of the model calls one piece of work outside a customer's turn made (a publish's routing tests, a route
    preview, a debug call), one row per kind of call and model (:mod:`agents.usage`'s kinds): what the usage figures
    add to the turns' (``conversations.selectors.usage_report``). Rows are only added."""

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    purpose = models.CharField(max_length=32, choices=UsagePurpose.choices)
    profile = models.ForeignKey(
        AgentProfile, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", help_text="Whose work."
    )
    tenant = models.ForeignKey(
        "tenants.Tenant",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="The tenant whose key asked (the debug API); blank for the operators' work.",
    )
    kind = models.CharField(max_length=16)
    model = models.CharField(max_length=200)
    calls = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)

    class Meta:
        verbose_name = "model usage outside turns"
        verbose_name_plural = "model usage outside turns"

    def __str__(self) -> str:
        return f"{self.purpose} {self.kind} {self.model}"


class ModelPrice(models.Model):
    """What a model's tokens cost: the usage figures (``/api/debug/usage``, the analytics) multiply by these."""

    model = models.CharField(
        max_length=200,
        unique=True,
        help_text="The model's name as the endpoint reports it (the profile's model, or LLM_MODEL), e.g. gpt-4o-mini.",
    )
    prompt_per_million = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        validators=[MinValueValidator(0)],
        help_text="Price of 1,000,000 prompt (input) tokens.",
    )
    completion_per_million = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        validators=[MinValueValidator(0)],
        help_text="Price of 1,000,000 completion (output) tokens.",
    )
    currency = models.CharField(max_length=3, default="USD")
    note = models.CharField(max_length=200, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["model"]
        verbose_name = "model price"

    def __str__(self) -> str:
        return self.model
