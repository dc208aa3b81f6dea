"""The demo, walked per language over REST: its specialists' display names and its intents' subject lines reach the
customer in the conversation's language (config/demo's translations), and Portuguese stays as the business wrote it.
"""

from __future__ import annotations

import pytest

from agents.models import McpServer
from agents.offline_words import offline_words
from common.config_version import config_version_bump
from tests.demo_snapshot import demo_seed

PT_NOTICE = offline_words("pt")["notice"]  # the Portuguese catalogue's "(offline model)"
# (the customer's message, the specialist that answers, the answer's start) per language and turn
WALKS = {
    "en": [
        (
            "My bill is too high this month, can you check it?",
            "billing_agent",
            "Bills and payments (offline model): I received your message. Subject: Questions about the bill, charges, "
            "due dates, duplicate copies, disputes and amounts. You said:",
        ),
        (
            "Where is my order? It was supposed to arrive yesterday",
            "orders_agent",
            "Orders and deliveries (offline model): I received your message. Subject: Following orders of SIM cards, "
            "phones and modems, tracking and delivery delays. You said:",
        ),
    ],
    "es": [
        (
            "Mi factura llegó muy alta este mes, ¿puede revisarla?",
            "billing_agent",
            "Facturas y pagos (modelo sin conexión): recibí su mensaje. Asunto: Dudas sobre la factura, cobros, "
            "vencimientos, segunda copia, reclamos y montos. Usted dijo:",
        ),
        (
            "¿Dónde está mi pedido? Tenía que llegar ayer y no aparece",
            "orders_agent",
            "Pedidos y entregas (modelo sin conexión): recibí su mensaje. Asunto: Seguimiento de pedidos de chips, "
            "teléfonos y módems, rastreo y retrasos de entrega. Usted dijo:",
        ),
    ],
    "pt": [
        (
            "Minha fatura veio alta este mês, pode ver?",
            "billing_agent",
            f"Faturas e pagamentos {PT_NOTICE}: recebi sua mensagem. Assunto: Dúvidas sobre fatura, cobrança, "
            "vencimento, segunda via, contestação e valores. Você disse:",
        ),
        (
            "Cadê meu pedido? Era pra ter chegado ontem",
            "orders_agent",
            f"Pedidos e entregas {PT_NOTICE}: recebi sua mensagem. Assunto: Acompanhamento de pedidos de chips, "
            "aparelhos e modems, rastreio e atrasos de entrega. Você disse:",
        ),
    ],
}


@pytest.fixture
def demo(db, mcp_servers):
    """The demo, its MCP servers running. Asked for before ``api``: the seed reads the tenants' table, and a tenant
    made first would make every test seed for real instead of restoring the worker's record (tests/demo_snapshot.py)."""
    demo_seed()
    for name, url in mcp_servers.items():
        McpServer.objects.filter(name=name).update(endpoint=url)
    config_version_bump()


@pytest.mark.parametrize("language", sorted(WALKS))
def test_a_demo_conversation_names_its_specialists_and_subjects_in_its_language(demo, api, language):
    for text, agent, start in WALKS[language]:
        body = {"channel": "api", "agent_id": "telecom_contas", "payload": {"text": text, "session_id": language}}
        response = api.post("/api/gateway/message", body, format="json")

        assert response.status_code == 200, response.content
        said = response.json()
        assert (said["agent"], said["metadata"]["language"]) == (agent, language)
        assert said["answer"].startswith(start), said["answer"]
