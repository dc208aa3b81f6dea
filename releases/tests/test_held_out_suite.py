"""A held-out suite (releases/tests/held_out/), written from docs/versions.md alone by someone who had not read the
demo's own suite, imported the documented way — ``manage.py import_config FILE`` — and run against the demo as
shipped, offline: every test of it passes against the live version."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from agents.models import AgentProfile
from releases.evals import conversation_tests_parse
from releases.evals.runs import conversation_test_run_start, run_report
from releases.models import ConversationTestRunSource
from tests.demo_snapshot import demo_seed

pytestmark = pytest.mark.django_db

HELD_OUT = Path(__file__).with_name("held_out") / "conversation_tests.telecom_contas.yaml"


def test_the_held_out_suite_imports_through_import_config_and_passes_against_the_demo():
    demo_seed()
    out = StringIO()
    call_command("import_config", str(HELD_OUT), stdout=out)
    assert "conversation tests of telecom_contas: 10 created, 0 updated." in out.getvalue()
    names = [case.name for case in conversation_tests_parse(HELD_OUT.read_text(encoding="utf-8"), name="h.yaml")[1]]

    run = conversation_test_run_start(
        profile=AgentProfile.objects.get(agent_id="telecom_contas"),
        source=ConversationTestRunSource.COMMAND,
        version="live",
        names=names,
    )

    assert (run.total, run.passed) == (10, 10), run_report(run)["results"]
    assert [line for result in run_report(run)["results"] for line in result["failures"]] == []
