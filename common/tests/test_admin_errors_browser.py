"""A routing editor saves an intent in a real browser (Debian's Chromium, as tests/browser_fixtures.py starts it) after
another editor deleted one of its keywords: the page says which row and why, where a person sees it — Django's own
page counted the error and showed it nowhere."""

from __future__ import annotations

import pytest
from django.urls import reverse

from common.adminkit import ERROR_ROW_GONE
from routing.models import Intent, Keyword
from tests.browser_fixtures import submit_login

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_an_editor_reads_that_a_keyword_was_deleted_meanwhile(live_server, browser_page, editor, telecom):
    intent = Intent.objects.get(profile=telecom, name="billing_invoice_explanation")
    page, base = browser_page, live_server.url
    page.goto(base + "/admin/login/?next=/admin/")
    submit_login(page, "editor", "editor-password")
    change = reverse("admin:routing_intent_change", args=[intent.pk])
    page.goto(base + change)
    texts = [page.input_value(f"#id_keywords-{row}-text") for row in range(intent.keywords.count())]
    Keyword.objects.filter(intent=intent, text="fatura").delete()  # by another editor, while the page is open

    page.fill("#id_description", "Invoices, explained")
    page.click("input[name=_save]")
    page.wait_for_selector(".errornote")

    listed = page.locator("#unshown-errors")
    assert listed.is_visible()
    assert listed.text_content() == f"Keyword {texts.index('fatura') + 1}: {ERROR_ROW_GONE}"
    assert page.errors == []
