"""Fixtures the release lifecycle's tests share."""

from __future__ import annotations

import pytest

from agents.models import AgentProfile
from releases.versions import version_publish
from routing.models import Keyword


@pytest.fixture
def guarded(telecom) -> AgentProfile:
    """telecom_contas live at version 1, its draft one keyword further, needing a second person."""
    version_publish(profile=telecom, note="first")
    Keyword.objects.create(intent=telecom.intents.get(name="retail_order_tracking"), text="modem")
    AgentProfile.objects.filter(pk=telecom.pk).update(release_needs_approval=True)
    telecom.refresh_from_db()
    return telecom
