"""The conversation store's tables that stand beside the conversations, none of them pointing at one by class: the A2A
face's tasks, the record of each erasure of a customer's data, and what the platform remembers about a customer.
Re-exported by :mod:`conversations.models` (the app's models)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class A2ATask(models.Model):
    """A task of the A2A face (chat/a2a.py): one turn of a conversation as the Agent2Agent protocol names it, kept
    as the protocol's JSON so that ``tasks/get`` answers from any process. Owned by the tenant whose key made it and
    the profile it was sent to: another tenant's key, or another profile's address, never finds it."""

    task_id = models.CharField(max_length=100, unique=True)
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="a2a_tasks")
    agent_id = models.CharField(max_length=64)
    context_id = models.CharField(max_length=200, help_text="The A2A contextId: the conversation's session id.")
    state = models.CharField(max_length=40, help_text="The task's state as the protocol names it.")
    document = models.JSONField(help_text="The task (status, history, artifacts) as the protocol's JSON.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "A2A task"
        indexes = [
            models.Index(fields=["tenant", "agent_id", "context_id", "-updated_at"], name="a2a_task_context"),
            models.Index(fields=["tenant", "agent_id", "-updated_at"], name="a2a_task_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.agent_id} {self.task_id}"


class CustomerErasure(models.Model):
    """One erasure of a customer's data (:mod:`conversations.customer_data.erasure`), recorded without the data: the
    tenant, the customer as a keyed pseudonym (never the id), who asked and when, and how many rows of each model
    were erased. Written once; an erasure that found nothing writes none."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    customer = models.CharField(
        max_length=64, help_text="The user id's keyed pseudonym (user:…, email:…), the same for the same id."
    )
    actor = models.CharField(max_length=200, help_text='"api key: <name>", "staff: <username>" or "manage.py (…)".')
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    counts = models.JSONField(default=dict, help_text="Rows erased per model (deleted or anonymised).")
    erased_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-erased_at", "-id"]
        indexes = [models.Index(fields=["tenant", "customer"], name="customer_erasure_tenant")]

    def __str__(self) -> str:
        return f"{self.customer} ({self.erased_at:%Y-%m-%d})"


class FactSource(models.TextChoices):
    TOLD = "told", "Told by the customer"  # "remember that …"
    SAVED = "saved", "Saved by a specialist"  # the built-in remember tool
    EDITED = "edited", "Written by staff"
    EXTRACTED = "extracted", "Read from a conversation"  # the summary's rewrite, where the profile allows


class CustomerFact(models.Model):
    """One thing the platform remembers about one end user of one tenant, across their sessions
    (:mod:`conversations.memory`): its text (masked as stored messages are), where it came from, and until when it
    holds. Never read across tenants: every read names the tenant."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    user_id = models.CharField(max_length=200, help_text="The end user's id as the conversations keep it.")
    text = models.TextField(
        help_text="What to remember, as the customer or a specialist put it (personal data masked)."
    )
    source = models.CharField(max_length=16, choices=FactSource.choices, default=FactSource.TOLD)
    agent = models.CharField(
        max_length=64,
        blank=True,
        help_text="The specialist that saved it; blank: the customer told the platform. Where a profile does not "
        "share memory between its specialists, a specialist reads only its own facts and the customer's.",
    )
    source_message = models.ForeignKey(
        "conversations.Message",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The customer's message it came from.",
    )
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="When it stops being used; blank: never.")

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["tenant", "user_id", "created_at"], name="customer_fact_customer")]

    def __str__(self) -> str:
        return self.text[:80]
