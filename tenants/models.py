"""Tenants and their API keys: who is calling, and whose data a request may see."""

from __future__ import annotations

from django.db import models


class Tenant(models.Model):
    """An organisation. API keys belong to one; it sees only its own conversations."""

    slug = models.SlugField(max_length=64, unique=True, help_text="The tenant_id in conversation keys.")
    name = models.CharField(max_length=200, blank=True)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "routing_tenant"  # the table kept its name when the model moved here from routing
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class ApiKey(models.Model):
    """A hashed bearer key. Only the prefix is kept readable; the key is shown once."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=200, blank=True)
    prefix = models.CharField(max_length=16, db_index=True, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    is_debug = models.BooleanField(default=False, help_text="May call /api/debug/*.")
    can_preview = models.BooleanField(default=False, help_text="May call POST /api/chat/multi-agent/message.")
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        db_table = "routing_apikey"  # the table kept its name when the model moved here from routing
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.tenant})"
