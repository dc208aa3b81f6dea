"""The routing tests' pages in a real browser (Debian's Chromium, as tests/browser_fixtures.py starts it), 1,400
pixels wide: the results lead with the failure and stay inside the window — the reasons wrap, the confusion matrix
of many long intent names scrolls in its own box — and the calibrate button says it is working while it works.
Screenshots go to test-output/screenshots/routing-tests-*.png."""

from __future__ import annotations

import pytest

from releases.models import RoutingTestCase
from tests.browser_fixtures import screenshot_path, submit_login
from tests.factories import IntentFactory

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

INTENTS = 14  # enough long intent names for a confusion matrix far wider than the window


def login(page, base: str) -> None:
    page.goto(base + "/admin/login/?next=/admin/")
    submit_login(page, "editor", "editor-password")


def overflow(page) -> int:
    """How many pixels the page is wider than the window (0: it fits)."""
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


@pytest.fixture
def many_tests(telecom):
    support = telecom.specialists.get(name="support_agent")
    for n in range(INTENTS):
        IntentFactory(
            profile=telecom,
            name=f"customer_request_with_a_rather_long_intent_name_{n:02}",
            specialist=support,
            priority=50 + n,
            next_state="WAITING_FOR_THE_CUSTOMER_TO_CONFIRM_THE_REQUEST_AND_THE_CONTRACT",
            keywords=[f"assunto{n:02}"],
        )
        RoutingTestCase.objects.create(
            profile=telecom,
            name=f"assunto {n:02}",
            message=f"Quero falar sobre o assunto{n:02} e mais nada, obrigado pela atenção de sempre",
            expect={
                "intent": f"customer_request_with_a_rather_long_intent_name_{n:02}",
                "agent": "support_agent",
                "method": "keyword",
                "next_state": "WAITING_FOR_THE_CUSTOMER_TO_CONFIRM_THE_REQUEST_AND_THE_CONTRACT",
            },
        )
    # The one failure, named to sort in the middle of the passes.
    RoutingTestCase.objects.create(
        profile=telecom,
        name="assunto 07 b",
        message="assunto03",
        expect={"intent": "customer_request_with_a_rather_long_intent_name_07"},
    )
    return telecom


def test_the_results_lead_with_the_failure_and_fit_a_1400_pixel_window(live_server, browser_page, editor, many_tests):
    page, base = browser_page, live_server.url
    login(page, base)

    page.goto(base + "/admin/releases/routingtestcase/run/?profile=telecom_contas&version=draft")
    page.wait_for_selector("#results")
    page.screenshot(path=str(screenshot_path("routing-tests-run-1400.png")), full_page=True)

    assert page.inner_text("#summary") == f"1 of {INTENTS + 1} failed: “assunto 07 b”. {INTENTS} passed."
    assert page.locator("#results tbody tr").first.locator("td").first.inner_text() == "assunto 07 b"
    assert overflow(page) <= 0, "the page is wider than the window"
    matrix = page.locator("#confusion")
    box = page.locator("#confusion").locator("xpath=..")
    assert matrix.evaluate("table => table.scrollWidth") > box.evaluate("div => div.clientWidth")  # it scrolls inside

    page.click("#show >> text=Failed (1)")
    page.wait_for_selector("#show .current:has-text('Failed (1)')")  # the new page: the old one has #results too
    assert page.locator("#results tbody tr").count() == 1
    assert overflow(page) <= 0
    assert page.errors == []


def test_the_calibrate_button_says_it_is_working_while_the_page_works_without_it(
    live_server, browser_page, editor, telecom
):
    page, base = browser_page, live_server.url
    login(page, base)
    page.goto(base + "/admin/releases/routingtestcase/calibrate/")
    page.select_option("#id_profile", label="telecom_contas")
    assert page.locator("#calibrate-form .progress").is_hidden()

    # Hold the submission where it is, to read the button as the editor sees it while the server works.
    page.evaluate(
        "document.getElementById('calibrate-form').addEventListener('submit', (event) => event.preventDefault())"
    )
    page.evaluate("document.getElementById('calibrate-form').requestSubmit()")

    assert page.locator("#calibrate-form input[type=submit]").is_disabled()
    assert page.inner_text("#calibrate-form .progress") == "Calibrating… this takes a few seconds."
    page.screenshot(path=str(screenshot_path("routing-tests-calibrating.png")))
    assert overflow(page) <= 0
    assert page.errors == []
