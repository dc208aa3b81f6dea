"""What several of the agents' admins use: the specialist list filter and choices, the active prompt version's
subquery, and the enable/disable actions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.db import models
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest

from agents.models import Specialist, SpecialistPrompt
from common.config_version import config_batch

if TYPE_CHECKING:
    ModelAdminBase = admin.ModelAdmin[Any]
else:
    ModelAdminBase = object  # a mixin: the ModelAdmin comes later in the MRO


class SpecialistListFilter(admin.RelatedFieldListFilter):
    """Specialists labelled ``profile/name`` without a query per choice."""

    def field_choices(self, field, request, model_admin):
        specialists = Specialist.objects.select_related("profile").order_by("profile__agent_id", "name")
        return [(specialist.pk, str(specialist)) for specialist in specialists]


def specialist_choices(db_field, formfield):
    """Select specialists with their profile in one query (their label names the profile)."""
    if formfield is not None and db_field.related_model is Specialist:
        formfield.queryset = formfield.queryset.select_related("profile")
    return formfield


def specialist_name(specialist: Specialist) -> str:
    return specialist.name


def active_version_subquery() -> Subquery:
    return Subquery(
        SpecialistPrompt.objects.filter(specialist=OuterRef("pk"), is_active=True).values("version")[:1],
        output_field=models.PositiveIntegerField(),
    )


class EnableDisableActions(ModelAdminBase):
    """Bulk switches: one save per object (each switch lands in the field history, common/history/registry.py), their
    configuration bumps collapsed into one."""

    actions = ["enable_selected", "disable_selected"]

    def _switch(self, request: HttpRequest, queryset: QuerySet, *, enabled: bool) -> None:
        count = 0
        with config_batch():
            for obj in queryset.exclude(enabled=enabled):
                obj.enabled = enabled
                obj.save(update_fields=["enabled", "updated_at"])
                count += 1
        verb = "Enabled" if enabled else "Disabled"
        self.message_user(request, f"{verb} {count} {self.opts.verbose_name_plural}.", messages.SUCCESS)

    @admin.action(description="Enable selected %(verbose_name_plural)s", permissions=["change"])
    def enable_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._switch(request, queryset, enabled=True)

    @admin.action(description="Disable selected %(verbose_name_plural)s", permissions=["change"])
    def disable_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._switch(request, queryset, enabled=False)
