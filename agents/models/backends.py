"""Remote backends: specialists answered by another service."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from agents.models.profiles import AgentProfile
from agents.models.specialists import Specialist
from agents.schemas import validate_endpoint_url, validate_word_list


class BackendKind(models.TextChoices):
    GATEWAY = "gateway", "This platform's gateway API"
    A2A = "a2a", "An A2A agent (Agent2Agent protocol)"


class RemoteBackend(models.Model):
    """Another deployment of this platform (or any service speaking its gateway API) that a gateway profile routes
    to like a specialist (the Agent Gateway): its keywords, examples and description enter the profile's
    routing, and the conversation keeps it as ``active_backend`` while it answers."""

    profile = models.ForeignKey(
        AgentProfile,
        on_delete=models.CASCADE,
        related_name="remote_backends",
        help_text="The gateway profile that routes to this backend.",
    )
    name = models.SlugField(
        max_length=64,
        help_text="How routing, handoffs and analytics name it, e.g. billing_backend (not a specialist's name).",
    )
    display_name = models.CharField(max_length=200, blank=True)
    description = models.TextField(
        blank=True,
        help_text="What it answers: the LLM classifier reads it when no keyword decides.",
    )
    kind = models.CharField(
        max_length=16,
        choices=BackendKind.choices,
        default=BackendKind.GATEWAY,
        help_text="How it is called: this platform's gateway API, or the Agent2Agent protocol (any A2A agent).",
    )
    base_url = models.CharField(
        max_length=500,
        validators=[validate_endpoint_url],
        help_text="The deployment's address, e.g. https://billing.example.com (its POST /api/gateway/message is "
        "called); for an A2A agent, its address (its card is read at …/.well-known/agent-card.json) or its card's "
        "URL.",
    )
    api_key = models.CharField(
        max_length=300,
        blank=True,
        help_text="The API key the remote deployment gave us (sent as Authorization: Bearer; never shown again).",
    )
    remote_agent_id = models.SlugField(
        max_length=64,
        blank=True,
        help_text="The profile to call there, e.g. telecom_contas (the gateway API; an A2A agent's address names it).",
    )
    keywords = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_word_list],
        help_text="Words or phrases that send a message to this backend (matched as intents' keywords are).",
    )
    examples = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_word_list],
        help_text="Example messages for the examples tier.",
    )
    priority = models.PositiveSmallIntegerField(
        default=100,
        help_text="Against intents whose keywords the same message hits: lower wins.",
    )
    timeout = models.FloatField(
        default=30.0,
        validators=[MinValueValidator(0.5), MaxValueValidator(300.0)],
        help_text="Seconds before a call is given up (the user gets the fallback).",
    )
    failures_to_open = models.PositiveSmallIntegerField(
        default=3,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Circuit breaker: after this many failed calls in a row it is not called for a while.",
    )
    open_seconds = models.FloatField(
        default=30.0,
        validators=[MinValueValidator(1.0), MaxValueValidator(3600.0)],
        help_text="Circuit breaker: how long it is left alone before one call tries it again.",
    )
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["profile__agent_id", "name"]
        verbose_name = "remote backend"
        constraints = [
            models.UniqueConstraint(fields=["profile", "name"], name="remote_backend_unique_name_per_profile"),
        ]

    def __str__(self) -> str:
        return f"{self.profile.agent_id}/{self.name}"

    def clean(self) -> None:
        if (
            self.profile_id
            and self.name
            and Specialist.objects.filter(profile_id=self.profile_id, name=self.name).exists()
        ):
            raise ValidationError({"name": "A specialist of this profile has this name; a backend needs its own."})
        if self.kind == BackendKind.GATEWAY and not self.remote_agent_id:
            raise ValidationError({"remote_agent_id": "The gateway API needs the profile to call there."})
