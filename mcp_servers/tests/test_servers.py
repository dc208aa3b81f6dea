"""The example servers, run as real processes and driven by the official MCP client over streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import mcp_types
import pytest
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_servers.common import AccessLineWithoutQuery, log_config, main
from mcp_servers.retail import server as retail
from mcp_servers.telecom import server as telecom

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

DEMO_LINE = "5511999999999"


@asynccontextmanager
async def session_to(url: str) -> AsyncIterator[ClientSession]:
    async with (
        streamable_http_client(url) as (read_stream, write_stream),
        ClientSession(read_stream, write_stream, read_timeout_seconds=10) as session,
    ):
        await session.initialize()
        yield session


def tool_error(result: mcp_types.CallToolResult) -> str:
    assert result.is_error, result
    assert result.structured_content is None
    return result.content[0].text


async def test_telecom_server_lists_its_tools_with_json_schemas(mcp_servers):
    async with session_to(mcp_servers["telecom"]) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}

    assert set(tools) == {"consultar_fatura", "consultar_pagamentos", "diagnosticar_linha"}
    fatura = tools["consultar_fatura"].input_schema
    assert fatura["type"] == "object"
    assert fatura["required"] == ["msisdn"]
    assert fatura["properties"]["msisdn"]["type"] == "string"
    assert {"type": "string"} in fatura["properties"]["invoice_id"]["anyOf"]
    assert "(" in tools["consultar_fatura"].description  # Portuguese, English in parentheses
    assert tools["consultar_pagamentos"].input_schema["required"] == ["msisdn"]
    assert tools["consultar_fatura"].annotations.read_only_hint is True
    diagnosis = tools["diagnosticar_linha"]
    assert diagnosis.input_schema["required"] == ["msisdn"]
    assert diagnosis.input_schema["properties"]["msisdn"] == fatura["properties"]["msisdn"]
    assert "consentimento" in diagnosis.description and "consent" in diagnosis.description
    assert (diagnosis.annotations.read_only_hint, diagnosis.annotations.open_world_hint) == (True, True)


async def test_retail_server_lists_its_tools_with_json_schemas(mcp_servers):
    async with session_to(mcp_servers["retail"]) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}

    assert set(tools) == {"consultar_pedido", "consultar_entrega"}
    pedido = tools["consultar_pedido"].input_schema
    assert pedido["required"] == ["order_id"]
    assert set(pedido["properties"]) == {"order_id", "customer_id"}
    assert tools["consultar_entrega"].input_schema["required"] == ["order_id"]


async def test_consultar_fatura_returns_the_high_invoice_of_the_demo_line(mcp_servers):
    async with session_to(mcp_servers["telecom"]) as session:
        result = await session.call_tool("consultar_fatura", {"msisdn": DEMO_LINE, "invoice_id": "INV001"})

    assert not result.is_error
    invoice = result.structured_content
    assert invoice["invoice_id"] == "INV001"
    assert invoice["valor_total"] == 289.90
    assert invoice["moeda"] == "BRL"
    assert invoice["status"] == "em aberto"
    assert invoice["vencimento"] == "2025-06-10"
    assert {item["tipo"] for item in invoice["itens"]} >= {"roaming", "dados_adicionais"}
    assert round(sum(item["valor"] for item in invoice["itens"]), 2) == 289.90
    assert invoice["comparacao"]["fatura_anterior"] == "INV000"
    assert invoice["comparacao"]["valor_anterior"] == 149.90
    assert invoice["comparacao"]["diferenca"] == 140.00
    assert "Roaming internacional" in invoice["resumo"]
    assert json.loads(result.content[0].text) == invoice


async def test_consultar_fatura_without_invoice_id_returns_the_latest_invoice(mcp_servers):
    async with session_to(mcp_servers["telecom"]) as session:
        latest = await session.call_tool("consultar_fatura", {"msisdn": DEMO_LINE})
        previous = await session.call_tool(
            "consultar_fatura", {"msisdn": "+55 (11) 99999-9999", "invoice_id": "INV000"}
        )

    assert latest.structured_content["invoice_id"] == "INV001"
    assert previous.structured_content["valor_total"] == 149.90
    assert previous.structured_content["status"] == "paga"
    assert previous.structured_content["comparacao"] is None


async def test_unknown_line_or_invoice_is_a_tool_error_not_a_crash(mcp_servers):
    async with session_to(mcp_servers["telecom"]) as session:
        unknown_line = await session.call_tool("consultar_fatura", {"msisdn": "5599000000000"})
        other_lines_invoice = await session.call_tool("consultar_fatura", {"msisdn": DEMO_LINE, "invoice_id": "INV010"})
        payments_of_unknown_line = await session.call_tool("consultar_pagamentos", {"msisdn": "123"})
        still_serving = await session.call_tool("consultar_fatura", {"msisdn": DEMO_LINE})

    assert telecom.LINE_NOT_FOUND.format(line=telecom.line_label("5599000000000")) in tool_error(unknown_line)
    assert "5599000000000" not in tool_error(unknown_line) and "final 0000" in tool_error(unknown_line)
    expected = telecom.INVOICE_NOT_FOUND.format(invoice_id="INV010", line=telecom.line_label(DEMO_LINE))
    assert expected in tool_error(other_lines_invoice)
    assert telecom.LINE_NOT_FOUND.format(line=telecom.line_label("123")) in tool_error(payments_of_unknown_line)
    assert not still_serving.is_error


async def test_a_missing_required_argument_is_a_tool_error(mcp_servers):
    async with session_to(mcp_servers["telecom"]) as session:
        result = await session.call_tool("consultar_fatura", {"invoice_id": "INV001"})

    assert "msisdn" in tool_error(result)


async def test_arguments_the_tool_does_not_take_are_ignored(mcp_servers):
    # Agents send the context they have (seed §8.5): asset_id and session_id ride along, invoice_id may be null.
    arguments = {"msisdn": DEMO_LINE, "invoice_id": None, "asset_id": None, "session_id": "web-001"}
    async with session_to(mcp_servers["telecom"]) as session:
        result = await session.call_tool("consultar_fatura", arguments)

    assert result.structured_content["invoice_id"] == "INV001"


async def test_consultar_pagamentos_shows_the_duplicated_payment_and_the_open_invoice(mcp_servers):
    async with session_to(mcp_servers["telecom"]) as session:
        result = await session.call_tool("consultar_pagamentos", {"msisdn": DEMO_LINE})

    payments = result.structured_content
    assert [p["invoice_id"] for p in payments["pagamentos"]] == ["INV000", "INV000"]
    [duplicated] = payments["cobrancas_duplicadas"]
    assert duplicated["invoice_id"] == "INV000"
    assert duplicated["valor_pago_a_mais"] == 149.90
    assert payments["faturas_em_aberto"] == [
        {"invoice_id": "INV001", "valor_total": 289.90, "vencimento": "2025-06-10"}
    ]


async def test_diagnosticar_linha_reports_the_weak_signal_of_the_demo_line(mcp_servers):
    async with session_to(mcp_servers["telecom"]) as session:
        result = await session.call_tool("diagnosticar_linha", {"msisdn": "+55 (11) 99999-9999"})
        again = await session.call_tool("diagnosticar_linha", {"msisdn": DEMO_LINE})

    assert not result.is_error
    diagnosis = result.structured_content
    assert diagnosis["msisdn"] == DEMO_LINE
    assert diagnosis["cliente"] == "Ana Paula Ribeiro"
    assert diagnosis["situacao_linha"] == "ativa"
    assert diagnosis["sinal"]["status"] == "fraco"
    assert diagnosis["sinal"]["tecnologia"] == "4G"
    assert diagnosis["ultimo_registro_rede"]["celula"] == diagnosis["sinal"]["celula"] == "SP-PINHEIROS-0421"
    assert diagnosis["sessao_dados"]["status"] == "ativa"
    assert diagnosis["bloqueio"] is None
    assert diagnosis["ocorrencia_rede"]["protocolo"] == "REDE-20250603-0042"
    assert "manutenção" in diagnosis["recomendacao"]
    assert "sinal fraco" in diagnosis["resumo"] and "sem bloqueios" in diagnosis["resumo"]
    assert json.loads(result.content[0].text) == diagnosis
    assert again.structured_content == diagnosis  # fixed data: the same call, the same answer


async def test_diagnosticar_linha_of_an_unknown_line_is_a_tool_error(mcp_servers):
    async with session_to(mcp_servers["telecom"]) as session:
        unknown = await session.call_tool("diagnosticar_linha", {"msisdn": "5599000000000"})
        missing = await session.call_tool("diagnosticar_linha", {})
        healthy = await session.call_tool("diagnosticar_linha", {"msisdn": "21988887777"})

    assert telecom.LINE_NOT_FOUND.format(line=telecom.line_label("5599000000000")) in tool_error(unknown)
    assert "msisdn" in tool_error(missing)
    assert healthy.structured_content["sinal"]["status"] == "bom"
    assert healthy.structured_content["ocorrencia_rede"] is None


def test_a_blocked_line_says_why_in_the_summary(monkeypatch):
    blocked = {**telecom.DIAGNOSES[DEMO_LINE], "bloqueio": {"tipo": "perda_ou_roubo", "motivo": "perda ou roubo"}}
    monkeypatch.setitem(telecom.DIAGNOSES, DEMO_LINE, blocked)

    assert "bloqueio: perda ou roubo." in telecom.diagnosticar_linha(DEMO_LINE)["resumo"]


async def test_consultar_pedido_returns_order_p100_of_customer_c001(mcp_servers):
    async with session_to(mcp_servers["retail"]) as session:
        result = await session.call_tool("consultar_pedido", {"order_id": "P100", "customer_id": "C001"})

    order = result.structured_content
    assert order["order_id"] == "P100"
    assert order["customer_id"] == "C001"
    assert order["status"] == "em trânsito"
    assert order["criado_em"] == "2025-05-28"
    assert [item["sku"] for item in order["itens"]] == ["FON-BT-200", "CAR-USBC-20"]
    assert order["valor_total"] == 299.80
    assert order["pagamento"]["status"] == "aprovado"
    assert order["entrega"] == {
        "status": "em trânsito",
        "previsao": "2025-06-06",
        "entregue_em": None,
        "atrasado": True,
    }


async def test_an_order_of_another_customer_or_unknown_is_a_tool_error(mcp_servers):
    async with session_to(mcp_servers["retail"]) as session:
        mismatch = await session.call_tool("consultar_pedido", {"order_id": "P100", "customer_id": "C002"})
        unknown = await session.call_tool("consultar_entrega", {"order_id": "P999"})

    assert retail.ORDER_OF_ANOTHER_CUSTOMER.format(order_id="P100", customer_id="C002") in tool_error(mismatch)
    assert retail.ORDER_NOT_FOUND.format(order_id="P999") in tool_error(unknown)


async def test_consultar_entrega_tracks_the_late_delivery_of_p100(mcp_servers):
    async with session_to(mcp_servers["retail"]) as session:
        result = await session.call_tool("consultar_entrega", {"order_id": "P100"})

    delivery = result.structured_content
    assert delivery["transportadora"] == "Rápido Log"
    assert delivery["codigo_rastreio"] == "RL123456789BR"
    assert delivery["status"] == "em trânsito"
    assert delivery["previsao_original"] == "2025-06-03"
    assert delivery["previsao_atual"] == "2025-06-06"
    assert delivery["atrasado"] is True
    assert delivery["dias_de_atraso"] == 3
    assert len(delivery["eventos"]) == 3


async def test_other_orders_are_delivered_or_not_yet_shipped(mcp_servers):
    async with session_to(mcp_servers["retail"]) as session:
        delivered = await session.call_tool("consultar_entrega", {"order_id": "p200"})
        unshipped = await session.call_tool("consultar_entrega", {"order_id": "P300"})

    assert delivered.structured_content["status"] == "entregue"
    assert delivered.structured_content["atrasado"] is False
    assert unshipped.structured_content["status"] == "não enviado"
    assert unshipped.structured_content["eventos"] == []


async def test_one_session_serves_many_calls(mcp_servers):
    async with session_to(mcp_servers["retail"]) as session:
        results = [
            await session.call_tool("consultar_pedido", {"order_id": order}) for order in ("P100", "P200", "P300")
        ]
        results += [await session.call_tool("consultar_entrega", {"order_id": "P100"}) for _ in range(5)]
        tools = await session.list_tools()

    assert [r.structured_content["order_id"] for r in results] == ["P100", "P200", "P300"] + ["P100"] * 5
    assert len(tools.tools) == 2


async def test_one_session_serves_concurrent_calls_from_several_tasks(mcp_servers):
    async with session_to(mcp_servers["telecom"]) as session:
        calls = [
            session.call_tool("consultar_fatura", {"msisdn": DEMO_LINE, "invoice_id": f"INV00{i % 2}"})
            for i in range(10)
        ]
        results = await asyncio.gather(*calls)

    assert [r.structured_content["invoice_id"] for r in results] == ["INV000", "INV001"] * 5


async def test_the_high_level_client_negotiates_the_stateless_protocol(mcp_servers):
    async with Client(mcp_servers["telecom"], read_timeout_seconds=10) as client:
        result = await client.call_tool("consultar_pagamentos", {"msisdn": DEMO_LINE})
        again = await client.call_tool("consultar_fatura", {"msisdn": DEMO_LINE})

        assert client.protocol_version == "2026-07-28"
    assert result.structured_content["cobrancas_duplicadas"][0]["invoice_id"] == "INV000"
    assert again.structured_content["invoice_id"] == "INV001"


async def test_a_call_to_a_slow_server_times_out_and_the_session_survives(slow_telecom_server):
    async with session_to(slow_telecom_server) as session:
        with pytest.raises(MCPError) as timeout:  # before the server's 3 s answer: the SDK's 0.5 s limit ended it
            await session.call_tool("consultar_fatura", {"msisdn": DEMO_LINE}, read_timeout_seconds=0.5)
        result = await session.call_tool("consultar_fatura", {"msisdn": DEMO_LINE})

    assert timeout.value.code == mcp_types.REQUEST_TIMEOUT
    assert result.structured_content["invoice_id"] == "INV001"


@pytest.mark.parametrize("module", [telecom, retail])
def test_the_port_comes_from_the_environment_unless_given(module, monkeypatch):
    served = {}
    monkeypatch.setattr("mcp_servers.common.uvicorn.run", lambda app, **options: served.update(options))
    for knob in ("MCP_HOST", "MCP_DELAY_MS", "MCP_LOG_LEVEL"):
        monkeypatch.delenv(knob, raising=False)

    def serve(*argv: str) -> dict:
        main(module.build_server, description="", port_env=module.PORT_ENV, default_port=module.DEFAULT_PORT, argv=argv)
        return {name: value for name, value in served.items() if name != "log_config"}

    monkeypatch.setenv(module.PORT_ENV, "9123")
    assert serve() == {"host": "127.0.0.1", "port": 9123, "log_level": "info", "workers": 1}
    assert serve("--port", "9")["port"] == 9
    monkeypatch.delenv(module.PORT_ENV)
    assert serve()["port"] == module.DEFAULT_PORT


def test_the_access_log_names_a_requests_path_without_its_query_string():
    line = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "POST", "/mcp?token=t0ken-s3cret", "1.1", 200), None,
    )  # fmt: skip

    config = log_config()
    AccessLineWithoutQuery().filter(line)

    assert line.getMessage() == '127.0.0.1:5000 - "POST /mcp HTTP/1.1" 200'
    assert config["handlers"]["access"]["filters"] == ["path_only"]
