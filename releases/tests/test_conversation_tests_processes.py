"""A suite of conversation tests played in several processes (``processes``): the same results, in the tests' order,
as in one; the tests of a process that cannot play them fail, naming why, and the others play the rest; where
processes cannot share the database (inside a transaction, on SQLite) the suite is played in this one."""

from __future__ import annotations

import multiprocessing

import pytest
from django.db import connection

from common.processes import processes_usable
from releases.evals import conversation_tests_parse
from releases.evals.run import TESTS_A_NEW_PROCESS, conversation_tests_run, processes_worth
from releases.routing_tests import DRAFT, routing_tests_spec

TEST = """\
  - name: an invoice is explained with its total {n}
    language: pt
    context: {{msisdn: "551199999999{n}"}}
    tool_answers:
      consultar_fatura: {{valor_total: "R$ 289,9{n}", vencimento: "2025-06-10"}}
      consultar_pagamentos: {{pagamentos: []}}
    turns:
      - user: minha fatura veio alta este mês
        expect: {{agent: billing_agent, tools_called: [consultar_fatura], answer_contains: ["289,9{n}"]}}
      - user: obrigado, era isso
        expect: {{no_state: true}}
  - name: an order question expected at billing fails {n}
    required: false
    turns:
      - user: cadê meu pedido P{n}?
        expect: {{agent: billing_agent}}
"""


def cases(count: int = 3):
    text = "profile: telecom_contas\nconversation_tests:\n" + "".join(TEST.format(n=n) for n in range(count))
    return conversation_tests_parse(text, name="suite.yaml")[1]


def shown(run) -> list[tuple[str, bool, list[str], list[str]]]:
    """Each result as a person reads it: its name, whether it passed, its failed checks, its answers."""
    return [
        (result.case.name, result.passed, result.failure_lines(), [turn.seen.answer for turn in result.shown.turns])
        for result in run.results
    ]


POSTGRESQL_ONLY = pytest.mark.skipif(connection.vendor != "postgresql", reason="processes share PostgreSQL, not SQLite")


@POSTGRESQL_ONLY
@pytest.mark.django_db(transaction=True)  # the processes read what the suite's profile committed
def test_a_suite_played_in_two_processes_gives_the_results_it_gives_in_one_in_its_order(telecom):
    spec, suite = routing_tests_spec(telecom, DRAFT), cases()
    before = set(multiprocessing.active_children())
    playing: list[int] = []

    def told(_result) -> None:
        playing.append(len(set(multiprocessing.active_children()) - before))

    apart = conversation_tests_run(spec, suite, processes=2, on_result=told)
    here = conversation_tests_run(spec, suite)

    assert max(playing) == 1  # told while a new process was playing beside this one
    assert [result.case.name for result in apart.results] == [case.name for case in suite]
    assert shown(apart) == shown(here)
    assert (apart.passed, apart.failed) == (3, 3)
    assert apart.failures[0].failure_text() == (
        "an order question expected at billing fails 0: turn 1 of 1 (“cadê meu pedido P0?”): agent: expected "
        "'billing_agent', got 'orders_agent'"
    )


@POSTGRESQL_ONLY
@pytest.mark.django_db(transaction=True)
def test_the_tests_of_a_process_that_could_not_start_fail_naming_why_and_the_others_are_played(telecom, monkeypatch):
    spec, suite = routing_tests_spec(telecom, DRAFT), cases(2)
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "platform.no_such_settings")  # what a new process sets up

    run = conversation_tests_run(spec, suite, processes=2)

    assert [result.case.name for result in run.results] == [case.name for case in suite]
    lines = [[line.split(": BrokenProcessPool: ")[0] for line in result.failure_lines()] for result in run.results]
    assert lines == [
        [],
        ["turn 1 of 1: could not be played"],  # the new process's first piece
        [],
        ["turn 1 of 1 (“cadê meu pedido P1?”): agent: expected 'billing_agent', got 'orders_agent'"],
    ]
    assert "BrokenProcessPool: A process in the process pool was terminated abruptly" in run.results[1].failure_text()


def assert_played_in_this_process(telecom) -> None:
    """A suite of two tests asked for two processes starts none: both are played here, in order."""
    before = set(multiprocessing.active_children())
    started: list[int] = []

    run = conversation_tests_run(
        routing_tests_spec(telecom, DRAFT),
        cases(1),
        processes=2,
        on_result=lambda _: started.append(len(set(multiprocessing.active_children()) - before)),
    )

    assert processes_usable(2) == 1
    assert started == [0, 0]
    assert (run.passed, run.failed) == (1, 1)


@pytest.mark.django_db
def test_inside_a_transaction_a_suite_asked_for_two_processes_is_played_in_this_one(telecom):
    assert_played_in_this_process(telecom)


@pytest.mark.django_db(transaction=True)
@pytest.mark.sqlite_too
def test_on_sqlite_a_suite_asked_for_two_processes_is_played_in_this_one(telecom):
    if connection.vendor != "sqlite":
        pytest.skip("about SQLite: tests/test_sqlite_too.py runs it there")
    assert_played_in_this_process(telecom)


def test_a_new_process_is_worth_it_only_for_as_many_tests_as_its_start_costs():
    assert processes_worth(10, cores=8) == 1
    assert processes_worth(2 * TESTS_A_NEW_PROCESS - 1, cores=8) == 2
    assert processes_worth(1000, cores=2) == 2
    assert processes_worth(100 * TESTS_A_NEW_PROCESS, cores=8) == 8
