"""External desks: where a profile's escalations are posted."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from agents.desks import ERROR_SIGNING_BOTH, ERROR_SIGNING_MISSING, validate_secret, validate_secret_variable
from agents.escalation import TEAM_PATTERN
from agents.models.profiles import ENV_NAME
from agents.schemas import validate_endpoint_url


class ExternalDesk(models.Model):
    """A business's own contact-center tool, where the escalations of the profiles that name it go: each change of
    one is posted to ``url`` as a signed JSON event, and its people answer through the escalations API with a key
    that may answer (docs/external-desk.md). The operator's, as model endpoints and MCP servers are: the address may
    carry credentials (shown masked) and the signing secret is write-only."""

    name = models.CharField(
        max_length=40,
        unique=True,
        validators=[
            RegexValidator(TEAM_PATTERN, "Lowercase letters, digits, - and _, at most 40 characters, e.g. acme_desk.")
        ],
        help_text="What a profile's escalation settings name, e.g. acme_desk.",
    )
    description = models.TextField(blank=True)
    url = models.CharField(
        "webhook URL",
        max_length=500,
        validators=[validate_endpoint_url],
        help_text="Where the escalations' events are posted, e.g. https://desk.example.com/hooks/platform.",
    )
    secret = models.CharField(
        max_length=300,
        blank=True,
        validators=[validate_secret],
        help_text="The signing secret shared with the desk (HMAC-SHA256). Never shown again.",
    )
    secret_env = models.CharField(
        "secret variable",
        max_length=100,
        blank=True,
        validators=[
            RegexValidator(ENV_NAME, "The name of an environment variable, e.g. ACME_DESK_SECRET."),
            validate_secret_variable,
        ],
        help_text="Or the environment variable (or mounted secret) that holds it, read at each post; one the "
        "operator allows (EXTERNAL_DESK_ENV_ALLOWED, by default *_DESK_SECRET).",
    )
    enabled = models.BooleanField(
        default=True, help_text="Off: nothing is posted; the escalations of its profiles wait in their queues."
    )
    timeout = models.FloatField(
        default=5.0,
        validators=[MinValueValidator(0.5), MaxValueValidator(60.0)],
        help_text="Seconds before a post is given up (and retried later).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "external desk"

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.secret and self.secret_env:
            raise ValidationError({"secret_env": ERROR_SIGNING_BOTH})
        if not (self.secret or self.secret_env):
            raise ValidationError({"secret": ERROR_SIGNING_MISSING})
