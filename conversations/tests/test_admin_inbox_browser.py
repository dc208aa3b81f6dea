"""The ratings inbox and a conversation's timeline in a real browser (Debian's Chromium, see tests/browser_fixtures.py),
as an editor who is not a superuser: find an answer rated down, open its conversation at that answer, add the
customer's message as a routing test — at 1,400 px, with nothing running off the right edge. Screenshots go to
``test-output/screenshots/``."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from conversations.tests.stored_turns import conversation_of, store_reader, stored_turn
from tests.browser_fixtures import screenshot_path, submit_login
from tests.factories import TenantFactory

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

INBOX = "/admin/conversations/messagefeedback/"
LONG = (
    "Fui atendido muito mal na loja do centro, o vendedor não quis trocar meu aparelho com defeito e ainda "
    "riu de mim; quero registrar uma reclamação formal contra esse atendimento e saber o que vocês vão fazer."
)


def log_in(page, base_url: str, path: str) -> None:
    page.goto(base_url + path)
    assert "/admin/login/" in page.url
    submit_login(page, "editor_a", "pw")


def overflow(page) -> int:
    """How far the page, or a list or timeline inside it, runs off its right edge, in pixels (0: it fits). The
    admin's lists scroll sideways inside their frame, so the window alone would not tell."""
    return page.evaluate(
        """() => Math.max(
            document.documentElement.scrollWidth - window.innerWidth,
            ...[...document.querySelectorAll(".results, .timeline-turns, .module")].map(
                node => node.scrollWidth - node.clientWidth
            ),
        )"""
    )


def test_an_editor_finds_an_answer_rated_down_opens_its_conversation_and_adds_its_message_as_a_test(
    live_server, browser_page, django_user_model
):
    alpha, beta = TenantFactory(slug="tenant_a"), TenantFactory(slug="tenant_b")
    conversation = conversation_of(alpha, "telecom_contas", "loja-1")
    stored_turn(conversation, "Bom dia", answer="Olá! Como posso ajudar?", intent="small_talk:greeting")
    complaint = stored_turn(
        conversation,
        LONG,
        answer="Sua fatura deste mês teve um aumento por causa do roaming internacional usado na viagem. " * 3,
        intent="billing_invoice_explanation",
        method="examples",
        reason="examples: nearest 'quero reclamar da cobrança' (0.99)",
        tool="consultar_fatura",
        handoff_to="support_agent",
        rating="down",
        comment="Eu queria reclamar do vendedor, não da fatura! " * 4,
    )
    stored_turn(conversation_of(beta, "telecom_contas", "b-1"), "cliente B", rating="down", comment="segredo de B")
    editor = store_reader(django_user_model, "editor_a", alpha)
    editor.user_permissions.add(
        *Permission.objects.filter(codename__in=["add_routingtestcase", "view_routingtestcase"])
    )
    page, base = browser_page, live_server.url

    log_in(page, base, INBOX)
    assert page.url == base + INBOX
    assert page.locator("#result_list tbody tr").count() == 1  # tenant B's rating is not theirs to see
    assert "segredo de B" not in page.content()
    assert overflow(page) <= 0, "the inbox runs off the right edge at 1,400 px"
    page.screenshot(path=str(screenshot_path("admin-ratings-inbox.png")), full_page=True)

    page.click("#result_list a.rating-conversation")
    page.wait_for_url(f"**/admin/conversations/conversation/{conversation.pk}/change/#answer-{complaint.answer.pk}")
    answer = page.locator(f"#answer-{complaint.answer.pk}")
    assert answer.get_attribute("data-rating") == "down"
    assert "Eu queria reclamar do vendedor" in answer.inner_text()
    assert overflow(page) <= 0, "the conversation page runs off the right edge at 1,400 px"
    page.screenshot(path=str(screenshot_path("admin-conversation-timeline.png")), full_page=True)

    page.click(f".timeline-add-test[data-message-id='{complaint.question.pk}']")
    page.wait_for_url("**/admin/releases/routingtestcase/add/**")
    assert page.input_value("#id_message") == LONG
    assert page.errors == []


@pytest.mark.parametrize(
    "model", ["conversation", "message", "routedecisionrecord", "toolcall", "backendcall", "handoff"]
)
def test_the_conversation_stores_lists_fit_1400_px(live_server, browser_page, django_user_model, model):
    alpha = TenantFactory(slug="tenant_a")
    conversation = conversation_of(alpha, "telecom_contas", "pre-tele-0-17611-a-long-session-identifier")
    stored_turn(conversation, LONG, answer=LONG, tool="consultar_fatura", handoff_to="support_agent", backend="partner")
    store_reader(django_user_model, "editor_a", alpha)
    page, base = browser_page, live_server.url
    path = "/admin/handoffs/handoff/" if model == "handoff" else f"/admin/conversations/{model}/"

    log_in(page, base, path)

    assert page.locator("#result_list tbody tr").count() >= 1
    page.screenshot(path=str(screenshot_path(f"admin-{model}-list.png")), full_page=True)
    assert overflow(page) <= 0, f"the {model} list runs off the right edge at 1,400 px"


def header_lines(page) -> dict[str, int]:
    """Each column header of the list: on how many lines its title is set (by the tops of its text's boxes); 0 when
    the title runs past its cell instead."""
    return page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll("#result_list thead th")].map(th => {
            const words = document.createTreeWalker(th.querySelector(".text") || th, NodeFilter.SHOW_TEXT);
            const tops = new Set();
            for (let node = words.nextNode(); node; node = words.nextNode()) {
                const range = document.createRange();
                range.selectNodeContents(node);
                [...range.getClientRects()].filter(r => r.width > 0).forEach(r => tops.add(Math.round(r.top)));
            }
            return [th.className, th.scrollWidth > th.clientWidth ? 0 : tops.size];
        }))"""
    )


def test_the_ratings_inbox_header_cells_each_fit_one_line_at_1400_px(live_server, browser_page, django_user_model):
    alpha = TenantFactory(slug="tenant_a")
    stored_turn(
        conversation_of(alpha, "telecom_contas", "loja-2"),
        LONG,
        answer=LONG,
        intent="billing_invoice_explanation",
        method="examples",
        rating="down",
        comment=LONG,
    )
    store_reader(django_user_model, "editor_a", alpha)
    page, base = browser_page, live_server.url

    log_in(page, base, INBOX)

    lines = header_lines(page)
    assert len(lines) == 7, lines  # every column the inbox lists
    assert {name: count for name, count in lines.items() if count != 1} == {}, "header cells wrap at 1,400 px"
    assert overflow(page) <= 0, "the inbox runs off the right edge at 1,400 px"
