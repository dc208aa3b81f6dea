"""Saved routing tests in the admin: a routing editor writes a case and runs the profile's tests against the
draft or the live version, and reads each case's result, the confusion matrix and precision and recall."""

from __future__ import annotations

import pytest

from routing.models import Keyword, RoutingTestCase
from routing.versions import version_publish

pytestmark = pytest.mark.django_db


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


def run(client, version="draft"):
    response = client.get("/admin/routing/routingtestcase/run/", {"profile": "telecom_contas", "version": version})
    assert response.status_code == 200
    return response.content.decode()


def test_an_editor_runs_the_draft_tests_and_reads_each_result_and_the_figures(client, editor, cases):
    client.force_login(editor)

    page = run(client)

    assert "telecom_contas: 1 passed, 1 failed (of 2)" in page
    assert "FAIL" in page and "intent=retail_order_tracking" in page
    assert 'id="confusion"' in page and 'id="scores"' in page


def test_the_draft_and_the_live_version_are_run_apart(client, editor, cases):
    RoutingTestCase.objects.filter(name="modem").update(enabled=False)
    version_publish(profile=cases, note="first")
    RoutingTestCase.objects.filter(name="modem").update(enabled=True)
    Keyword.objects.create(intent=cases.intents.get(name="retail_order_tracking"), text="modem")
    client.force_login(editor)

    assert "telecom_contas: 2 passed, 0 failed (of 2)" in run(client, "draft")
    assert "telecom_contas: 1 passed, 1 failed (of 2)" in run(client, "live")


def test_the_change_list_links_to_the_run_page(client, editor, cases):
    client.force_login(editor)

    page = client.get("/admin/routing/routingtestcase/").content.decode()

    assert "/admin/routing/routingtestcase/run/" in page and "fatura alta" in page


def test_a_staff_member_without_the_right_to_view_routing_tests_is_refused_the_run_page_with_a_403(
    client, django_user_model, cases
):
    clerk = django_user_model.objects.create_user("clerk", "clerk@example.com", "clerk-password", is_staff=True)
    client.force_login(clerk)

    response = client.get("/admin/routing/routingtestcase/run/", {"profile": "telecom_contas"})

    assert response.status_code == 403
