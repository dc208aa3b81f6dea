"""Saved routing tests in the admin: a routing editor writes a case and runs the profile's tests against the
draft or the live version, and reads a sentence that leads with what failed, each case's result (failures first,
filtered without a script), the confusion matrix and precision and recall."""

from __future__ import annotations

import re

import pytest

from releases.admin.routing_tests import results_shown, run_summary
from releases.models import RoutingTestCase
from releases.routing_tests import Case, CaseResult, TestRun
from releases.versions import version_publish
from routing.models import Keyword
from tests.adminkit import add_url, change_url, shown_fields

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]


@pytest.fixture
def cases(telecom):
    RoutingTestCase.objects.create(
        profile=telecom,
        name="fatura alta",
        message="Minha fatura veio alta",
        expect={"intent": "billing_invoice_explanation", "agent": "billing_agent"},
    )
    RoutingTestCase.objects.create(
        profile=telecom, name="modem", message="meu modem", expect={"intent": "retail_order_tracking"}
    )
    return telecom


def run(client, version="draft", **params):
    response = client.get(
        "/admin/releases/routingtestcase/run/", {"profile": "telecom_contas", "version": version, **params}
    )
    assert response.status_code == 200
    return response.content.decode()


def summary(page: str) -> str:
    return re.search(r'<p id="summary"[^>]*>(.*?)</p>', page, re.S).group(1).strip()


def rows(page: str) -> list[str]:
    """The results table's test names, in the order shown."""
    body = re.search(r'<table id="results">.*?<tbody>(.*?)</tbody>', page, re.S).group(1)
    return re.findall(r"<tr[^>]*>\s*<td>([^<]*)</td>", body)


def test_an_editor_runs_the_draft_tests_and_reads_each_result_and_the_figures(client, editor, cases):
    client.force_login(editor)

    page = run(client)

    assert summary(page) == "1 of 2 failed: “modem”. 1 passed."
    assert "FAIL" in page and "intent=retail_order_tracking" in page
    # Expectations read in one order (intent, agent, method…), whatever order the database keeps a JSON object in.
    assert "intent=billing_invoice_explanation, agent=billing_agent" in page
    assert 'id="confusion"' in page and 'id="scores"' in page


def test_the_failures_come_first_whatever_their_names(client, editor, cases):
    RoutingTestCase.objects.create(
        profile=cases, name="zz entrega", message="cadê meu pedido", expect={"intent": "retail_order_tracking"}
    )
    RoutingTestCase.objects.create(
        profile=cases, name="aa pedido", message="meu pedido", expect={"intent": "billing_invoice_explanation"}
    )
    client.force_login(editor)

    page = run(client)

    assert rows(page) == ["aa pedido", "modem", "fatura alta", "zz entrega"]
    assert summary(page) == "2 of 4 failed: “aa pedido”, “modem”. 2 passed."


def test_the_filter_shows_the_failed_or_the_passed_results_with_links_that_need_no_script(client, editor, cases):
    client.force_login(editor)

    failed, passed, everything = run(client, show="failed"), run(client, show="passed"), run(client, show="nonsense")

    assert (
        rows(failed) == ["modem"] and rows(passed) == ["fatura alta"] and rows(everything) == ["modem", "fatura alta"]
    )
    assert summary(failed) == summary(passed)  # the sentence is about the whole run
    links = dict(re.findall(r'<li><a href="([^"]+)">([^<]+)</a></li>', failed))
    assert set(links.values()) == {"All (2)", "Passed (1)"} and '<span class="current">Failed (1)</span>' in failed
    for url in links:
        assert "profile=telecom_contas" in url and "version=draft" in url


def test_the_summary_names_the_first_failures_and_counts_the_rest():
    def result(name: str, passed: bool) -> CaseResult:
        case = Case(name=name, message=name, expect={"intent": "a"})
        return CaseResult(
            case=case, actual={"intent": "a" if passed else "b"}, reason="", failed=() if passed else ("intent",)
        )

    failing = TestRun(results=[result(f"t{n}", passed=False) for n in range(7)] + [result("ok", passed=True)])

    assert run_summary(failing) == "7 of 8 failed: “t0”, “t1”, “t2”, “t3”, “t4” and 2 more. 1 passed."
    assert run_summary(TestRun(results=[result("ok", True), result("ok2", True)])) == "All 2 passed."
    assert run_summary(TestRun(results=[])) == "The profile has no enabled saved tests."
    assert [r.case.name for r in results_shown(failing)][:2] == ["t0", "t1"]


def test_the_draft_and_the_live_version_are_run_apart(client, editor, cases):
    RoutingTestCase.objects.filter(name="modem").update(enabled=False)
    version_publish(profile=cases, note="first")
    RoutingTestCase.objects.filter(name="modem").update(enabled=True)
    Keyword.objects.create(intent=cases.intents.get(name="retail_order_tracking"), text="modem")
    client.force_login(editor)

    assert summary(run(client, "draft")) == "All 2 passed."
    assert summary(run(client, "live")) == "1 of 2 failed: “modem”. 1 passed."


def test_the_change_list_links_to_the_run_page(client, editor, cases):
    client.force_login(editor)

    page = client.get("/admin/releases/routingtestcase/").content.decode()

    assert "/admin/releases/routingtestcase/run/" in page and "fatura alta" in page


def test_a_staff_member_without_the_right_to_view_routing_tests_is_refused_the_run_page_with_a_403(
    client, django_user_model, cases
):
    clerk = django_user_model.objects.create_user("clerk", "clerk@example.com", "clerk-password", is_staff=True)
    client.force_login(clerk)

    response = client.get("/admin/releases/routingtestcase/run/", {"profile": "telecom_contas"})

    assert response.status_code == 403


def test_a_tests_form_holds_only_the_expectations_its_page_shows(client, editor, cases):
    # Outside goal mode the page offers no goal and no goal status: the form must not check them either (a choice
    # it validated there would refuse the save with an error shown nowhere).
    client.force_login(editor)
    plain = RoutingTestCase.objects.get(name="modem")
    goal = RoutingTestCase.objects.create(profile=cases, name="quote", message="cotação", expect={"goal": "GET_QUOTE"})

    for test, goal_shown in ((plain, False), (goal, True)):
        page = client.get(change_url(test))
        form = page.context["adminform"].form
        assert set(form.fields) == shown_fields(page)
        assert ("expect_goal" in form.fields, "expect_status" in form.fields) == (goal_shown, goal_shown)
    add = client.get(add_url(RoutingTestCase))
    assert set(add.context["adminform"].form.fields) == shown_fields(add)


# -- conversations ----------------------------------------------------------------------------------------------


def test_a_failing_conversation_shows_each_of_its_turns_and_the_one_that_failed(client, editor, cases):
    RoutingTestCase.objects.create(
        profile=cases,
        name="conversa",
        message="obrigado!",
        turns=[
            {"message": "cadê meu pedido?", "expect": {"intent": "retail_order_tracking"}},
            {"message": "e a fatura veio alta?", "expect": {"intent": "product_information"}},
        ],
        expect={"method": "small_talk"},
    )
    client.force_login(editor)

    page = run(client, show="failed")

    assert summary(page) == "2 of 3 failed: “conversa”, “modem”. 1 passed."
    row = re.search(
        r"<tr class=\"failed-row\">\s*<td>conversa(.*?)</tr>(.*?)(?=<tr class=\"failed-row\">|</tbody>)", page, re.S
    )
    assert row is not None
    assert "a conversation of 3 turns: turn 2 failed" in row.group(1) and "turn 3: obrigado!" in row.group(1)
    turns = re.findall(
        r'<tr class="turn-row ([a-z]+)-row">\s*<td class="turn-name">↳ turn (\d)</td>\s*<td>([^<]*)</td>', row.group(2)
    )
    assert turns == [("passed", "1", "cadê meu pedido?"), ("failed", "2", "e a fatura veio alta?")]
    assert "<strong>intent=billing_invoice_explanation</strong>" in row.group(2)


def test_a_passing_conversation_is_one_row(client, editor, cases):
    RoutingTestCase.objects.create(
        profile=cases,
        name="conversa",
        message="obrigado!",
        turns=[{"message": "cadê meu pedido?"}],
        expect={"method": "small_talk", "state_after": ""},
    )
    client.force_login(editor)

    page = run(client, show="passed")

    assert "a conversation of 2 turns</span>" in page and 'class="turn-row' not in page
    assert "state_after=(none)" in page


def test_the_change_list_says_a_test_is_a_conversation(client, editor, cases):
    RoutingTestCase.objects.create(
        profile=cases,
        name="conversa",
        message="sim",
        turns=[{"message": "oi"}, {"message": "ok"}],
        expect={"events": ["bound"]},
    )
    client.force_login(editor)

    page = client.get("/admin/releases/routingtestcase/").content.decode()

    assert "after 2 earlier turns: events=[bound]" in page
