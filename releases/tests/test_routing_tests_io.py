"""Saved routing tests as YAML (round trip, upsert or replace by name, errors naming line and field) and
``manage.py routing_test`` (one line per failure, the totals, exit status 1, a JUnit report)."""

from __future__ import annotations

from io import StringIO
from xml.etree import ElementTree

import pytest
from django.core.management import CommandError, call_command

from releases.models import RoutingTestCase
from releases.routing_tests import (
    RoutingTestsFileError,
    routing_tests_dump,
    routing_tests_load,
    routing_tests_parse,
)
from releases.versions import version_publish

TESTS = """\
profile: telecom_contas
tests:
  - name: fatura alta
    message: "Minha fatura veio alta"
    state: WAITING_PAYMENT_CONFIRMATION   # optional: the conversation's state
    active_specialist: billing_agent       # optional
    expect: {intent: billing_invoice_explanation, agent: billing_agent, method: keyword}
  - name: pedido
    message: Cadê meu pedido?
    expect:
      intent: retail_order_tracking
"""

FAILING = """\
profile: telecom_contas
tests:
  - name: fatura alta
    message: "Minha fatura veio alta"
    expect: {intent: billing_invoice_explanation}
  - name: plano
    message: Quero mudar meu plano
    expect: {intent: support_request, agent: support_agent}
"""


def test_the_issues_example_is_read_as_written():
    agent_id, cases = routing_tests_parse(TESTS)

    assert agent_id == "telecom_contas"
    first, second = cases
    assert (first.name, first.message, first.state, first.active_specialist) == (
        "fatura alta",
        "Minha fatura veio alta",
        "WAITING_PAYMENT_CONFIRMATION",
        "billing_agent",
    )
    assert first.expect == {"intent": "billing_invoice_explanation", "agent": "billing_agent", "method": "keyword"}
    assert (second.state, second.expect) == ("", {"intent": "retail_order_tracking"})


def test_saved_tests_go_round_trip_through_yaml(telecom):
    _, cases = routing_tests_parse(TESTS)
    routing_tests_load(profile=telecom, cases=cases)

    text = routing_tests_dump(telecom)

    assert routing_tests_parse(text) == ("telecom_contas", sorted(cases, key=lambda case: case.name))


def test_loading_updates_by_name_and_replace_deletes_the_tests_the_file_leaves_out(telecom):
    RoutingTestCase.objects.create(profile=telecom, name="pedido", message="old", expect={"agent": "orders_agent"})
    RoutingTestCase.objects.create(profile=telecom, name="kept", message="oi", expect={"agent": "support_agent"})
    _, cases = routing_tests_parse(TESTS)

    report = routing_tests_load(profile=telecom, cases=cases)

    assert (report.created, report.updated, report.deleted) == (1, 1, 0)
    assert RoutingTestCase.objects.get(profile=telecom, name="pedido").message == "Cadê meu pedido?"
    assert RoutingTestCase.objects.filter(profile=telecom, name="kept").exists()

    report = routing_tests_load(profile=telecom, cases=cases, replace=True)

    assert (report.created, report.updated, report.deleted) == (0, 0, 1)
    assert sorted(RoutingTestCase.objects.values_list("name", flat=True)) == ["fatura alta", "pedido"]


@pytest.mark.parametrize(
    "text, problem",
    [
        (
            TESTS.replace("intent: retail_order_tracking", "intnt: retail_order_tracking"),
            "tests.yaml:11: tests[1].expect.intnt: unknown key 'intnt'",
        ),
        (
            TESTS.replace('    message: "Minha fatura veio alta"\n', ""),
            "tests.yaml:3: tests[0]: message: required text.",
        ),
        (TESTS.replace("state: WAITING", "stat: WAITING"), "tests.yaml:5: tests[0].stat: unknown key 'stat'"),
        (
            TESTS.replace("name: pedido", "name: fatura alta"),
            "tests.yaml:8: tests[1].name: 'fatura alta' is repeated (first on line 3).",
        ),
        (
            TESTS.replace("profile: telecom_contas\n", ""),
            "tests.yaml:1: profile: required text (the profile's agent_id).",
        ),
        (
            TESTS.replace("agent: billing_agent, method", "agent: 3, method"),
            "tests.yaml:7: tests[0].expect.agent: must be a non-empty text.",
        ),
        ("profile: x\ntests: [\n", "tests.yaml:3: "),
    ],
)
def test_a_bad_file_is_refused_naming_the_line_and_the_field(text, problem):
    with pytest.raises(RoutingTestsFileError) as caught:
        routing_tests_parse(text)

    assert any(line.startswith(problem) for line in caught.value.problems), caught.value.problems


# -- the command ---------------------------------------------------------------------------------------------


def run_command(*args: str) -> tuple[str, int]:
    out = StringIO()
    try:
        call_command("routing_test", *args, stdout=out)
    except SystemExit as exit:
        return out.getvalue(), int(exit.code or 0)
    return out.getvalue(), 0


def test_the_command_prints_each_failure_and_the_totals_and_exits_1(telecom, tmp_path):
    tests = tmp_path / "tests.yaml"
    tests.write_text(FAILING, encoding="utf-8")

    output, status = run_command("--profile", "telecom_contas", "--file", str(tests))

    lines = output.splitlines()
    assert status == 1
    assert lines[-1] == "1 passed, 1 failed"
    assert len(lines) == 2
    assert lines[0].startswith(
        "FAIL plano: expected intent=support_request, agent=support_agent; "
        "got intent=product_information, agent=product_agent ("
    )


def test_the_command_runs_the_saved_tests_and_exits_0_when_all_pass(telecom):
    _, cases = routing_tests_parse(FAILING)
    routing_tests_load(profile=telecom, cases=cases[:1])

    assert run_command("--profile", "telecom_contas") == ("1 passed, 0 failed\n", 0)


def test_the_command_runs_against_a_version_and_writes_a_junit_report(telecom, tmp_path):
    version_publish(profile=telecom, note="first")
    telecom.intents.get(name="support_request").keywords.create(text="mudar meu plano")
    telecom.intents.filter(name="support_request").update(priority=5)
    _, cases = routing_tests_parse(FAILING)
    routing_tests_load(profile=telecom, cases=cases)
    report = tmp_path / "junit.xml"

    draft_output, draft_status = run_command("--profile", "telecom_contas", "--version", "draft")
    output, status = run_command("--profile", "telecom_contas", "--version", "1", "--junit", str(report))

    assert (draft_output, draft_status) == ("2 passed, 0 failed\n", 0)
    assert status == 1 and output.endswith("1 passed, 1 failed\n")
    suite = ElementTree.parse(report).getroot().find("testsuite")  # noqa: S314 (the file the command just wrote)
    assert suite is not None and (suite.get("tests"), suite.get("failures")) == ("2", "1")
    cases_xml = {case.get("name"): case for case in suite.findall("testcase")}
    assert cases_xml["fatura alta"].find("failure") is None
    failure = cases_xml["plano"].find("failure")
    assert failure is not None and "intent: expected 'support_request', got 'product_information'" in failure.text


def test_the_command_refuses_an_unknown_profile_version_or_file(telecom, tmp_path):
    with pytest.raises(CommandError, match="Unknown profile 'nope'"):
        run_command("--profile", "nope")
    with pytest.raises(CommandError, match="no version 3"):
        run_command("--profile", "telecom_contas", "--version", "3")
    with pytest.raises(CommandError, match="--version: 'v2'"):
        run_command("--profile", "telecom_contas", "--version", "v2")
    bad = tmp_path / "bad.yaml"
    bad.write_text(FAILING.replace("intent: support_request", "intnt: support_request"), encoding="utf-8")
    with pytest.raises(CommandError, match=r"bad.yaml:8: tests\[1\].expect.intnt: unknown key"):
        run_command("--profile", "telecom_contas", "--file", str(bad))


# -- conversations ----------------------------------------------------------------------------------------------

CONVERSATION = """\
profile: telecom_contas
tests:
  - name: pergunta no meio do pagamento
    state: WAITING_PAYMENT_CONFIRMATION
    active_specialist: billing_agent
    turns:
      - message: "antes disso, cadê meu pedido?"
        expect: {intent: retail_order_tracking, events: [pushed, resumed]}
      - message: "obrigado!"
    message: "sim"
    expect: {agent: billing_agent, events: [bound], state_after: "", repair: cancel, topics: [a, b]}
"""


def test_a_conversation_test_is_read_with_its_turns_and_their_expectations(telecom):
    _, (case,) = routing_tests_parse(CONVERSATION)

    side, thanks = case.turns
    assert (side.message, side.expect) == (
        "antes disso, cadê meu pedido?",
        {"intent": "retail_order_tracking", "events": ["pushed", "resumed"]},
    )
    assert (thanks.message, thanks.expect) == ("obrigado!", {})
    assert case.expect == {
        "agent": "billing_agent",
        "events": ["bound"],
        "state_after": "",
        "repair": "cancel",
        "topics": ["a", "b"],
    }


def test_an_exported_conversation_imports_back_the_same(telecom):
    _, cases = routing_tests_parse(CONVERSATION + TESTS.removeprefix("profile: telecom_contas\ntests:\n"))
    routing_tests_load(profile=telecom, cases=cases)

    text = routing_tests_dump(telecom)
    again = routing_tests_parse(text)

    assert again == ("telecom_contas", sorted(cases, key=lambda case: case.name))
    saved = RoutingTestCase.objects.get(profile=telecom, name="pergunta no meio do pagamento")
    assert saved.turns == [
        {
            "message": "antes disso, cadê meu pedido?",
            "expect": {"intent": "retail_order_tracking", "events": ["pushed", "resumed"]},
        },
        {"message": "obrigado!"},
    ]
    assert text.index("turns:") < text.index("message: sim")  # the conversation reads in its order
    routing_tests_load(profile=telecom, cases=again[1])
    assert routing_tests_dump(telecom) == text


@pytest.mark.parametrize(
    "change, problem",
    [
        (
            (
                CONVERSATION[CONVERSATION.index("    turns:") : CONVERSATION.index('    message: "sim"')],
                "    turns: oops\n",
            ),
            "tests.yaml:6: tests[0].turns: must be a list of turns",
        ),
        (
            ('      - message: "obrigado!"\n', "      - {expect: {intent: x}}\n"),
            "tests.yaml:9: tests[0].turns[1]: message: required text.",
        ),
        (("[pushed, resumed]", "[pushed, resumd]"), "tests.yaml:8: tests[0].turns[0].expect.events: no event 'resumd'"),
        (
            ("[pushed, resumed]", "pushed"),
            "tests.yaml:8: tests[0].turns[0].expect.events: must be a list of one or more of: opened,",
        ),
        (
            ('      - message: "obrigado!"', '      - mesage: "obrigado!"'),
            "tests.yaml:9: tests[0].turns[1].mesage: unknown key 'mesage' (allowed: message, expect).",
        ),
        (
            ("repair: cancel", "repair: undo"),
            "tests.yaml:11: tests[0].expect.repair: must be one of: cancel, correct, repeat, skip, already_told.",
        ),
        (('state_after: ""', "state_after: [x]"), "tests.yaml:11: tests[0].expect.state_after: must be a text"),
        (
            ("topics: [a, b]", "topics: []"),
            "tests.yaml:11: tests[0].expect.topics: must be a list of one or more intents.",
        ),
        (
            ("intent: retail_order_tracking, events", "intnt: x, events"),
            "tests.yaml:8: tests[0].turns[0].expect.intnt: unknown key 'intnt'",
        ),
    ],
)
def test_a_bad_conversation_is_refused_naming_the_line_and_the_field(telecom, change, problem):
    with pytest.raises(RoutingTestsFileError) as caught:
        routing_tests_parse(CONVERSATION.replace(*change))

    assert any(line.startswith(problem) for line in caught.value.problems), caught.value.problems


def test_a_conversation_is_bounded_in_turns_and_each_message_by_the_profiles_input_limit(telecom):
    eleven = "".join(f"      - message: oi {n}\n" for n in range(11))
    too_many = CONVERSATION.replace("    turns:\n", "    turns:\n" + eleven)
    telecom.guardrails = {"max_input_chars": 29}
    telecom.save(update_fields=["guardrails"])
    too_long = CONVERSATION.replace("obrigado!", "obrigado! " * 3)

    with pytest.raises(RoutingTestsFileError) as many:
        routing_tests_parse(too_many)
    with pytest.raises(RoutingTestsFileError) as long:
        routing_tests_parse(too_long)

    assert any(
        "tests[0].turns: at most 10 turns before the test's message (13 given)." in line for line in many.value.problems
    )
    assert long.value.problems == [
        "tests.yaml:9: tests[0].turns[1].message: longer than the profile's limit of 29 characters (30)."
    ]
    assert not RoutingTestCase.objects.filter(profile=telecom).exists()


def test_the_command_names_the_turn_a_conversation_failed_at_and_reports_each_turn(telecom, tmp_path):
    tests = tmp_path / "tests.yaml"
    tests.write_text(
        CONVERSATION.replace("intent: retail_order_tracking", "intent: product_information"), encoding="utf-8"
    )
    report = tmp_path / "junit.xml"

    output, status = run_command("--profile", "telecom_contas", "--file", str(tests), "--junit", str(report))

    assert status == 1
    assert output.startswith(
        "FAIL pergunta no meio do pagamento: turn 1 of 3 (“antes disso, cadê meu pedido?”): "
        "expected intent=product_information; got intent=retail_order_tracking ("
    )
    failure = ElementTree.parse(report).getroot().find("testsuite/testcase/failure")  # noqa: S314 (our file)
    assert failure is not None
    lines = failure.text.splitlines()
    assert lines[0] == "turn 1 (FAIL): antes disso, cadê meu pedido?"
    assert "  intent: expected 'product_information', got 'retail_order_tracking'" in lines
    assert "turn 2 (pass): obrigado!" in lines and any(line.startswith("turn 3 (") for line in lines)
