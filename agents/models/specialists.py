"""A profile's specialists and the versions of their system prompts."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from agents.knowledge_settings import validate_specialist_knowledge
from agents.models.profiles import AgentProfile
from common.translations import translations_problems

SPECIALIST_TRANSLATED = ("display_name", "description")  # the texts of a specialist that have a value per language


def validate_specialist_translations(value: object) -> None:
    if problems := translations_problems(value, SPECIALIST_TRANSLATED, {"display_name": 200}):
        raise ValidationError([message for _language, message in problems])


class Specialist(models.Model):
    """A specialist agent of one profile, e.g. ``billing_agent`` of ``telecom_contas``."""

    profile = models.ForeignKey(AgentProfile, on_delete=models.CASCADE, related_name="specialists")
    name = models.SlugField(max_length=64, help_text="Technical name, e.g. billing_agent.")
    display_name = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    translations = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_specialist_translations],
        help_text='The display name and description in other languages than the profile\'s, e.g. {"en": '
        '{"display_name": "Plans and services"}}.',
    )
    allowed_tools = models.ManyToManyField(
        "agents.McpTool",
        blank=True,
        related_name="specialists",
        help_text="The MCP tools this specialist may ever use.",
    )
    handoff_targets = models.ManyToManyField(
        "self",
        symmetrical=False,
        blank=True,
        related_name="handoff_sources",
        help_text="Specialists this one may hand the conversation to.",
    )
    step_limit = models.PositiveSmallIntegerField(
        default=10,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Maximum model/tool steps per turn.",
    )
    remember_tool = models.BooleanField(
        default=False,
        help_text="Offer its model the built-in remember tool: a fact about the customer it saves is given to the "
        "specialists in the customer's next conversations.",
    )
    knowledge = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_specialist_knowledge],
        help_text='How it uses the profile\'s knowledge: {"retrieval": false} (prompt and tools only), {"with_tools": '
        'true} (it searches even in a run offered tools) or {"tags": ["billing"]} (only documents with these tags).',
    )
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["profile__agent_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["profile", "name"], name="specialist_unique_name_per_profile"),
        ]

    def __str__(self) -> str:
        return f"{self.profile.agent_id}/{self.name}"


class SpecialistPrompt(models.Model):
    """One version of a specialist's system prompt; exactly one version is active."""

    specialist = models.ForeignKey(Specialist, on_delete=models.CASCADE, related_name="prompts")
    version = models.PositiveIntegerField()
    text = models.TextField()
    note = models.CharField(max_length=200, blank=True, help_text="What changed in this version.")
    is_active = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )

    class Meta:
        ordering = ["specialist", "-version"]
        verbose_name = "specialist prompt"
        constraints = [
            models.UniqueConstraint(fields=["specialist", "version"], name="prompt_unique_version"),
            models.UniqueConstraint(
                fields=["specialist"],
                condition=models.Q(is_active=True),
                name="prompt_one_active_per_specialist",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.specialist} v{self.version}"
