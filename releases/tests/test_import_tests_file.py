"""A routing tests file (``profile:`` and ``tests:``, as ``manage.py routing_test --file`` reads) imports on the
admin's import page too: a dry run says what it would add and update and writes nothing, the import adds or updates
the tests by name, and a file with a problem, an unknown profile or a user without the routing tests' permissions is
refused whole — the configuration files imported with it included."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile

from releases.models import RoutingTestCase
from routing.models import Keyword

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

IMPORT_URL = "/admin/routing/intent/config/import/"
TESTS = """\
profile: telecom_contas
tests:
  - name: segunda via
    message: quero a segunda via da fatura
    expect: {intent: billing_invoice_explanation, agent: billing_agent}
  - name: piada
    message: me conta uma piada
    expect: {intent: fallback}
"""
ROUTING = """\
agent_id: telecom_contas
intents:
  - name: retail_order_tracking
    domain: retail
    agent: orders_agent
    priority: 20
    keywords: [pedido, entrega, rastreio, atraso, modem]
"""


def post(client, files: dict[str, str], *, dry_run: bool = False):
    uploads = [SimpleUploadedFile(name, text.encode("utf-8")) for name, text in files.items()]
    return client.post(IMPORT_URL, {"yaml_files": uploads, "_dry_run" if dry_run else "_import": "1"})


def test_a_dry_run_of_a_tests_file_says_what_it_would_add_and_writes_nothing(editor_client, telecom):
    response = post(editor_client, {"tests.yaml": TESTS}, dry_run=True)

    assert response.status_code == 200 and not response.context.get("problems")
    assert "would add 2" in response.content.decode()
    assert not RoutingTestCase.objects.exists()


def test_importing_a_tests_file_adds_its_tests_and_a_second_import_updates_them_by_name(editor_client, telecom):
    post(editor_client, {"tests.yaml": TESTS})
    assert sorted(RoutingTestCase.objects.values_list("name", flat=True)) == ["piada", "segunda via"]

    response = post(editor_client, {"tests.yaml": TESTS.replace("intent: fallback", "intent: small_talk:other")})

    assert "added 0" in response.content.decode() and "updated 1" in response.content.decode()
    assert RoutingTestCase.objects.get(name="piada").expect == {"intent": "small_talk:other"}


def test_a_tests_file_and_a_routing_file_import_together(editor_client, telecom):
    post(editor_client, {"tests.yaml": TESTS, "routing.telecom_contas.yaml": ROUTING})

    assert RoutingTestCase.objects.count() == 2 and Keyword.objects.filter(text="modem").exists()


def test_a_tests_file_with_a_problem_refuses_the_routing_file_beside_it(editor_client, telecom):
    broken = TESTS.replace("    message: me conta uma piada\n", "")
    response = post(editor_client, {"tests.yaml": broken, "routing.telecom_contas.yaml": ROUTING})

    assert any("message" in problem for problem in response.context["problems"])
    assert not RoutingTestCase.objects.exists() and not Keyword.objects.filter(text="modem").exists()


def test_a_tests_file_for_an_unknown_profile_is_refused_naming_it(editor_client, telecom):
    response = post(editor_client, {"tests.yaml": TESTS.replace("telecom_contas", "nobody")})

    assert response.context["problems"] == ["tests.yaml: profile: no profile 'nobody'."]


def test_a_user_who_may_not_add_routing_tests_is_refused_naming_the_permission(editor_client, editor, telecom):
    editor.groups.get().permissions.remove(Permission.objects.get(codename="add_routingtestcase"))

    response = post(editor_client, {"tests.yaml": TESTS})

    assert "releases.add_routingtestcase" in response.context["problems"][0]
    assert not RoutingTestCase.objects.exists()
