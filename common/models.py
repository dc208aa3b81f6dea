"""The one model of the kernel: the configuration version every process compares (see :mod:`common.config_version`)."""

from __future__ import annotations

from django.db import models


class ConfigVersion(models.Model):
    """Single row counting changes to configuration (routing, agents, tenants); see :mod:`common.config_version`."""

    version = models.BigIntegerField(default=0)
    changed_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "routing_routingconfigversion"  # the table kept its name when the model moved from routing
        verbose_name = "configuration version"

    def __str__(self) -> str:
        return f"v{self.version}"
