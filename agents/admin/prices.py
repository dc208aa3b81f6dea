"""Model prices: what a model's tokens cost."""

from __future__ import annotations

from django.contrib import admin

from agents.models import ModelPrice


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    """What a model's tokens cost, read by the usage figures when they are shown (a price edited re-prices the
    past). Like MCP servers and flags, not for "Routing editors": the group holds no permission on it."""

    list_display = ["model", "prompt_per_million", "completion_per_million", "currency", "note", "updated_at"]
    list_filter = ["currency"]
    search_fields = ["model", "note"]
    fields = ["model", "prompt_per_million", "completion_per_million", "currency", "note"]
