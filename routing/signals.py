"""Invalidate compiled routing whenever routing configuration is written.

Signals are used here (and only here) because every write path must be
covered — admin forms and inlines, the YAML importer, a shell session — and
none of them should have to remember. This is cache invalidation, not
business logic. Bulk ``QuerySet.update`` bypasses signals; the few places that
use it call :func:`routing.config.config_version_bump` themselves.
"""

from __future__ import annotations

from django.db.models.signals import m2m_changed, post_delete, post_save

from agents.models import AgentProfile, McpServer, McpTool, Specialist, SpecialistPrompt
from routing.config import config_version_bump
from routing.models import (
    ApiKey,
    Intent,
    Keyword,
    RolloutFlag,
    RolloutTenantOverride,
    RolloutUserOverride,
    StatePolicy,
    Tenant,
)

# Keys and tenants are here too: the API-key cache of routing/auth.py is tagged with the same version. Rollout
# flags too: the snapshot carries them, so a change reaches every process on its next message. Their history
# (RolloutFlagChange) is not configuration.
ROUTING_MODELS = (
    AgentProfile,
    Specialist,
    SpecialistPrompt,
    McpServer,
    McpTool,
    Intent,
    Keyword,
    StatePolicy,
    ApiKey,
    Tenant,
    RolloutFlag,
    RolloutUserOverride,
    RolloutTenantOverride,
)


def _changed(sender, **kwargs) -> None:
    if kwargs.get("raw"):  # loaddata: fixtures bump once at the end of their transaction anyway
        return
    config_version_bump()


def _m2m_changed(sender, action: str, **kwargs) -> None:
    if action in {"post_add", "post_remove", "post_clear"}:
        config_version_bump()


for _model in ROUTING_MODELS:
    post_save.connect(_changed, sender=_model, dispatch_uid=f"routing-config-save-{_model.__name__}")
    post_delete.connect(_changed, sender=_model, dispatch_uid=f"routing-config-delete-{_model.__name__}")

for _through in (
    Intent.mcp_tools.through,
    Specialist.allowed_tools.through,
    Specialist.handoff_targets.through,
):
    m2m_changed.connect(_m2m_changed, sender=_through, dispatch_uid=f"routing-config-m2m-{_through.__name__}")
