"""Runs of conversation tests in the admin: "Run tests" plays a profile's tests and opens the run's page (results
failures first, the coverage, the usage); the runs' list is per profile with each run's progress; a running run's page
reloads itself; the conversation tests' list of one profile says what of it the tests cover; starting a run takes the
right to."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from agents.models import AgentProfile
from releases.evals import conversation_tests_load, conversation_tests_parse
from releases.evals.runs import conversation_test_run_start
from releases.models import ConversationTest, ConversationTestRun
from tests.adminkit import change_url, changelist_url

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

SUITE = """\
profile: telecom_contas
conversation_tests:
  - name: an invoice question goes to billing
    language: pt
    turns:
      - user: minha fatura veio alta este mês
        expect: {agent: billing_agent}
  - name: an order question goes to billing
    required: false
    turns:
      - user: cadê meu pedido?
        expect: {agent: billing_agent}
"""
RUN_URL = "admin:releases_conversationtest_run"


@pytest.fixture
def suite(telecom):
    conversation_tests_load(profile=telecom, cases=conversation_tests_parse(SUITE, name="suite.yaml")[1])
    return telecom


def test_run_tests_plays_them_and_opens_the_runs_page_with_the_failures_first(editor_client, suite):
    form = editor_client.get(reverse(RUN_URL), {"profile": "telecom_contas"})
    assert form.status_code == 200 and 'value="telecom_contas" selected' in form.content.decode()

    answer = editor_client.post(reverse(RUN_URL), {"profile": "telecom_contas", "version": "draft", "compare": ""})

    run = ConversationTestRun.objects.get()
    assert answer.status_code == 302 and answer["Location"] == change_url(run)
    page = editor_client.get(change_url(run)).content.decode()
    assert page.index("an order question goes to billing") < page.index("an invoice question goes to billing")
    assert "agent: expected &#x27;billing_agent&#x27;, got &#x27;orders_agent&#x27;" in page
    assert 'id="run-coverage"' in page and "product_information, support_request" in page
    assert 'http-equiv="refresh"' not in page
    assert run.started_by.username == "editor" and run.source == "admin"


def test_a_version_the_profile_lacks_is_said_on_the_form_and_nothing_is_kept(editor_client, suite):
    page = editor_client.post(reverse(RUN_URL), {"profile": "telecom_contas", "version": "9"})

    assert page.status_code == 200 and "telecom_contas has no version 9." in page.content.decode()
    assert not ConversationTestRun.objects.exists()


def test_the_runs_list_is_per_profile_with_progress_and_a_running_runs_page_reloads(editor_client, suite):
    retail = AgentProfile.objects.create(agent_id="retail_orders", name="Retail")
    conversation_test_run_start(profile=suite, source="command")
    queued = ConversationTestRun.objects.create(profile=suite, version="live", source="api", total=30)
    ConversationTestRun.objects.create(profile=retail, version="draft", source="api", total=3)

    page = editor_client.get(changelist_url(ConversationTestRun), {"profile__id__exact": suite.pk}).content.decode()

    assert "2 of 2" in page and "queued: 30 tests" in page and "retail_orders draft #" not in page
    assert 'http-equiv="refresh"' in editor_client.get(change_url(queued)).content.decode()


def test_a_profiles_conversation_tests_say_what_of_it_they_cover(editor_client, suite):
    page = editor_client.get(changelist_url(ConversationTest), {"profile__id__exact": suite.pk}).content.decode()

    assert "What the tests of telecom_contas cover" in page
    assert "intents: 0 of 4" in page  # the tests expect agents, not intents
    conversation_test_run_start(profile=suite, source="admin")  # its turns showed which intents they reached
    page = editor_client.get(changelist_url(ConversationTest), {"profile__id__exact": suite.pk}).content.decode()
    assert "intents: 2 of 4 (missing: product_information, support_request)" in page


def test_starting_a_run_takes_the_right_to(editor_client, editor, suite):
    editor.groups.clear()
    editor.user_permissions.add(Permission.objects.get(codename="view_conversationtest"))

    assert editor_client.get(reverse(RUN_URL)).status_code == 403
    assert editor_client.post(reverse(RUN_URL), {"profile": "telecom_contas", "version": "draft"}).status_code == 403
    assert not ConversationTestRun.objects.exists()
