"""The analytics own no data: they read conversations, messages, route decisions, tool calls and handoffs.

This module only carries the permission that opens them to a logged-in user.
"""

from __future__ import annotations

from django.db import models


class AnalyticsAccess(models.Model):
    """Holder of the ``analytics.view_analytics`` permission; no table behind it (never queried).

    A user with the permission (superusers have every permission) reads the analytics of every tenant, or of one
    with ``tenant=``; an API key reads its own tenant's only.
    """

    class Meta:
        managed = False
        default_permissions = ()
        permissions = [("view_analytics", "Can view the analytics of every tenant")]
        verbose_name = "analytics access"
        verbose_name_plural = "analytics access"

    def __str__(self) -> str:
        return "analytics access"
