"""A specialist's display name and an intent's subject line reach the customer in the conversation's language: the
offline model's answer header and subject, and the turn's "agent" events; the profile's language when a text has no
translation, and no subject line at all rather than one in another language."""

from __future__ import annotations

import asyncio

import pytest

from agents.models import AgentProfile, McpServer, Specialist
from agents.offline_words import offline_words
from common.config_version import config_version_bump
from conversations.graph import run_turn
from conversations.turn import TurnInput
from releases.versions import version_publish
from routing import snapshot
from routing.documents import profile_documents
from routing.models import Intent
from tenants.models import Tenant
from tests.demo_snapshot import demo_seed

BILLING = {"en": {"display_name": "Bills and payments"}, "es": {"display_name": "Facturas y pagos"}}
SUBJECT = {"en": {"description": "questions about the bill"}}
QUESTIONS = {
    "en": "My bill is too high this month, can you check it?",
    "es": "Mi factura llegó muy alta este mes, ¿puede revisarla?",
    "pt": "Minha fatura veio alta este mês, pode ver?",
}


def translated(*, names=BILLING, subject=SUBJECT) -> None:
    """The demo's billing specialist and invoice intent with these translations, published (customers get versions)."""
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    Specialist.objects.filter(profile=profile, name="billing_agent").update(translations=names)
    Intent.objects.filter(profile=profile, name="billing_invoice_explanation").update(
        description="dúvidas sobre a fatura", translations=subject
    )
    version_publish(profile=profile, document=profile_documents(["telecom_contas"])["telecom_contas"], note="names")
    config_version_bump()


@pytest.fixture
def demo(db, mcp_servers):
    """The demo with its names translated. Asked for before ``api``: the seed reads the tenants' table, and a tenant
    made first would make every test seed for real instead of restoring the worker's record (tests/demo_snapshot.py)."""
    demo_seed()
    for name, url in mcp_servers.items():
        McpServer.objects.filter(name=name).update(endpoint=url)
    translated()


def answer(api, text: str, session: str) -> str:
    body = {"channel": "api", "agent_id": "telecom_contas", "payload": {"text": text, "session_id": session}}
    response = api.post("/api/gateway/message", body, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["agent"] == "billing_agent"
    return response.json()["answer"]


@pytest.mark.parametrize(
    ("language", "header"),
    [
        ("en", "Bills and payments (offline model): I received your message. Subject: questions about the bill. You"),
        # No Spanish subject line: none, rather than the Portuguese one inside a Spanish sentence.
        ("es", "Facturas y pagos (modelo sin conexión): recibí su mensaje. Usted dijo"),
        (
            "pt",
            f"Faturas e pagamentos {offline_words('pt')['notice']}: recebi sua mensagem. Assunto: dúvidas sobre a "
            "fatura. Você",
        ),
    ],
)
def test_the_offline_answer_names_the_specialist_and_subject_in_the_conversations_language(demo, api, language, header):
    assert answer(api, QUESTIONS[language], f"names-{language}").startswith(header)


def test_a_name_without_a_translation_is_said_as_the_business_wrote_it(demo, api):
    translated(names={"es": {"display_name": "Facturas y pagos"}})

    said = answer(api, QUESTIONS["en"], "names-fallback")

    assert said.startswith("Faturas e pagamentos (offline model): I received your message.")


@pytest.mark.django_db(transaction=True)
def test_the_agent_event_carries_the_display_name_in_the_conversations_language(mcp_servers):
    demo_seed()
    for name, url in mcp_servers.items():
        McpServer.objects.filter(name=name).update(endpoint=url)
    translated()
    tenant = Tenant.objects.create(slug="names", name="Names")
    events: list[tuple[str, dict]] = []

    async def emit(event, data):
        events.append((event, data))

    data = TurnInput(
        tenant_pk=tenant.pk,
        tenant_slug=tenant.slug,
        profile=snapshot.current().profiles["telecom_contas"],
        text=QUESTIONS["es"],
        session_id="names-events",
        emit=emit,
    )
    asyncio.run(run_turn(data))

    assert [payload for event, payload in events if event == "agent"] == [
        {"agent": "billing_agent", "display_name": "Facturas y pagos", "via": "route"}
    ]
