"""Every error of an admin change page is read on the page (``templates/admin/change_form.html`` lists those its
inputs do not show: :func:`common.adminkit.unshown_errors`): Django counts them in "Please correct the error below"
and shows an error only beside its input — none for a hidden input, an inline row's id, or a field the page leaves
out."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents.admin.profiles import AgentProfileAdmin
from common.adminkit import ERROR_ROW_GONE
from releases.models import RoutingTestCase
from routing import routing_test_drafts  # its test_case_add_url is no test of pytest's
from routing.models import Intent, Keyword
from tests.adminkit import change_url, error_messages, form_data, unread_errors, visible_text

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]


def test_a_keyword_another_editor_deleted_meanwhile_is_said_on_the_intents_page(editor_client, telecom):
    intent = Intent.objects.get(profile=telecom, name="billing_invoice_explanation")
    page = editor_client.get(change_url(intent))
    rows = [form.instance.text for form in page.context["inline_admin_formsets"][0].formset.initial_forms]
    data = form_data(page)
    data["description"] = "Invoices, explained"
    Keyword.objects.filter(intent=intent, text="fatura").delete()  # by someone else, while this page was open

    answer = editor_client.post(change_url(intent), data)

    assert answer.status_code == 200 and error_messages(answer)
    # Which row, and why: Django's own words for it ("Select a valid choice") would name neither.
    assert f"Keyword {rows.index('fatura') + 1}: {ERROR_ROW_GONE}" in visible_text(answer.content.decode())


def test_an_error_of_a_hidden_input_is_said_on_the_page(editor_client, telecom):
    # "Add as routing test" carries where the test came from in hidden inputs: a link with a wrong one (hand-edited,
    # or from an older version) must not answer an error the page never shows.
    draft = routing_test_drafts.RoutingTestDraft(
        profile_id=telecom.pk, message="Minha fatura veio alta", expect={"intent": "billing_invoice_explanation"}
    )
    add = routing_test_drafts.test_case_add_url(draft) + "&source_message_id=not-a-number"
    page = editor_client.get(add)
    assert page.context["adminform"].form["source_message_id"].is_hidden

    answer = editor_client.post(reverse("admin:releases_routingtestcase_add"), form_data(page))

    assert answer.status_code == 200 and not RoutingTestCase.objects.exists()
    assert unread_errors(answer) == []
    assert "Source message id: Enter a whole number." in answer.content.decode()


def test_an_error_of_a_field_its_page_leaves_out_is_said_on_the_page(admin_client, telecom, monkeypatch):
    # An admin whose fieldsets leave out a field its form declares and requires (how a started rollout plan's stages
    # once were): the page must say the field's error, not only count it.
    shown = AgentProfileAdmin.get_fieldsets

    def without_fallbacks(self, request, obj=None):
        return [
            (title, {**o, "fields": [f for f in o["fields"] if f != "escalation_after_fallbacks"]})
            for title, o in shown(self, request, obj)
        ]

    monkeypatch.setattr(AgentProfileAdmin, "get_fieldsets", without_fallbacks)
    page = admin_client.get(change_url(telecom))
    assert "escalation_after_fallbacks" in page.context["adminform"].form.fields  # declared: Django keeps it

    answer = admin_client.post(change_url(telecom), form_data(page))

    assert answer.status_code == 200 and unread_errors(answer) == []
    assert "After fallback answers in a row: This field is required." in visible_text(answer.content.decode())
