"""An import lands in the profiles' drafts and says what it changes; ``--publish`` publishes what changed."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from agents.models import AgentProfile
from releases.versions import version_publish
from routing.models import Keyword
from routing.selectors import live_version

pytestmark = pytest.mark.django_db

ROUTING = """\
agent_id: telecom_contas
intents:
  - name: retail_order_tracking
    domain: retail
    agent: orders_agent
    priority: 20
    keywords: [pedido, entrega, rastreio, atraso, modem]
"""


@pytest.fixture
def published(telecom):
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    version_publish(profile=profile, note="first")
    return profile


def imported(tmp_path, *options) -> str:
    path = tmp_path / "routing.telecom_contas.yaml"
    path.write_text(ROUTING, encoding="utf-8")
    out = StringIO()
    call_command("import_config", str(path), *options, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_an_import_changes_the_draft_only_and_says_what_changed(published, tmp_path):
    out = imported(tmp_path)

    assert "Draft of telecom_contas:" in out
    assert "keyword 'modem' added to intent retail_order_tracking" in out
    assert "publish them" in out
    assert Keyword.objects.filter(text="modem").exists()
    assert live_version(published).number == 1  # customers still get version 1


def test_a_dry_run_says_what_would_change_and_writes_nothing(published, tmp_path):
    out = imported(tmp_path, "--dry-run")

    assert "Draft of telecom_contas (would):" in out and "keyword 'modem' added" in out
    assert not Keyword.objects.filter(text="modem").exists()


def test_publish_publishes_the_profiles_the_import_changed(published, tmp_path):
    out = imported(tmp_path, "--publish")

    version = live_version(published)
    assert version.number == 2 and version.note.startswith("Imported from ")
    assert "telecom_contas: version 2 published." in out
    assert "modem" in version.document["intents"]["retail_order_tracking"]["keywords"]


def test_publish_and_dry_run_exclude_each_other(published, tmp_path):
    with pytest.raises(CommandError, match="exclude each other"):
        imported(tmp_path, "--publish", "--dry-run")
