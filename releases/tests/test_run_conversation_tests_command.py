"""``manage.py run_conversation_tests``: the saved tests or a file's, against a version; each failed check printed,
failures first; a JUnit report with one testcase per test and the failed checks named; exit status 1 on a failure;
what of the profile the tests covered; the run kept."""

from __future__ import annotations

import contextlib
from io import StringIO
from xml.etree import ElementTree

import pytest
from django.core.management import CommandError, call_command

from releases.evals import conversation_tests_load, conversation_tests_parse
from releases.models import ConversationTestRun

pytestmark = pytest.mark.django_db

SUITE = """\
profile: telecom_contas
conversation_tests:
  - name: an invoice question goes to billing
    language: pt
    context: {msisdn: "5511999999999"}
    tool_answers: {consultar_fatura: {valor_total: "R$ 289,90"}, consultar_pagamentos: {pagamentos: []}}
    turns:
      - user: minha fatura veio alta este mês
        expect: {agent: billing_agent, answer_contains: ["289,90"]}
  - name: an order question goes to orders
    required: false
    turns:
      - user: cadê meu pedido?
        expect: {agent: billing_agent}
"""


def run(*args: str) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("run_conversation_tests", *args, stdout=out)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


def test_a_failing_file_exits_1_prints_each_failed_check_and_writes_junit(telecom, tmp_path):
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE, encoding="utf-8")
    report = tmp_path / "report.xml"

    status, out = run("--profile", "telecom_contas", "--file", str(suite), "--junit", str(report))

    assert status == 1
    assert out.splitlines()[:3] == [
        "FAIL an order question goes to orders",
        "  turn 1 of 1 (“cadê meu pedido?”): agent: expected 'billing_agent', got 'orders_agent'",
        "1 passed, 1 failed",
    ]
    assert out.splitlines()[3].startswith(
        "Coverage: intents: 2 of 4 (missing: product_information, support_request); goals: none in the profile; "
    )
    kept = ConversationTestRun.objects.get()
    assert (kept.source, kept.version, kept.names, kept.passed, kept.failed) == (
        "command",
        "draft",
        ["an invoice question goes to billing", "an order question goes to orders"],
        1,
        1,
    )
    assert kept.results.first().name == "an order question goes to orders"  # failures first
    suite_node = ElementTree.parse(report).getroot().find("testsuite")  # noqa: S314 — the command's own file
    assert (suite_node.get("name"), suite_node.get("tests"), suite_node.get("failures")) == (
        "conversation_tests.telecom_contas.draft",
        "2",
        "1",
    )
    passed, failed = suite_node.findall("testcase")
    assert passed.find("failure") is None
    assert failed.find("failure").get("message") == (
        "an order question goes to orders: turn 1 of 1 (“cadê meu pedido?”): agent: expected 'billing_agent', got "
        "'orders_agent'"
    )


def test_the_saved_tests_run_and_only_picks_one_by_name(telecom):
    conversation_tests_load(profile=telecom, cases=conversation_tests_parse(SUITE, name="s.yaml")[1])

    status, out = run("--profile", "telecom_contas", "--only", "an invoice question goes to billing")

    assert (status, out.splitlines()[0]) == (0, "1 passed, 0 failed")
    with pytest.raises(CommandError, match="--only: no test named 'nope'"):
        run("--profile", "telecom_contas", "--only", "nope")


def test_a_version_the_profile_does_not_have_and_a_file_of_another_profile_are_refused(telecom, tmp_path):
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE.replace("profile: telecom_contas", "profile: retail_orders"), encoding="utf-8")

    with pytest.raises(CommandError, match="has no version 7"):
        run("--profile", "telecom_contas", "--version", "7")
    with pytest.raises(CommandError, match="its profile is 'retail_orders', not 'telecom_contas'"):
        run("--profile", "telecom_contas", "--file", str(suite))


def stderr_of(*args: str) -> str:
    err = StringIO()
    with contextlib.suppress(SystemExit):  # a failing test: what is read here is stderr
        call_command("run_conversation_tests", *args, stdout=StringIO(), stderr=err)
    return err.getvalue()


def test_an_mcp_server_the_outbound_policy_refuses_is_named_with_the_setting_that_allows_it(telecom, settings):
    settings.OUTBOUND_ALLOWED = ["127.0.0.1:8200"]

    said = stderr_of("--profile", "telecom_contas")

    assert "MCP server 'telecom' is refused to this command" in said and "OUTBOUND_ALLOWED" in said
    assert "'retail'" not in said
    settings.OUTBOUND_ALLOWED = ["127.0.0.0/8"]
    assert "refused" not in stderr_of("--profile", "telecom_contas")


@pytest.mark.django_db(transaction=True)  # the processes read what the test's profile committed
def test_in_two_processes_the_command_prints_and_reports_what_it_does_in_one(telecom, tmp_path):
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE, encoding="utf-8")
    reports = {processes: tmp_path / f"report-{processes}.xml" for processes in ("1", "2")}

    said = {
        processes: run(
            "--profile", "telecom_contas", "--file", str(suite), "--junit", str(report), "--processes", processes
        )
        for processes, report in reports.items()
    }

    assert said["2"] == said["1"]
    assert said["2"][0] == 1
    assert reports["2"].read_bytes() == reports["1"].read_bytes()
    with pytest.raises(CommandError, match="--processes: must be 1 or more"):
        run("--profile", "telecom_contas", "--processes", "0")
