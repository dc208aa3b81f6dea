"""Example telecom MCP server: invoices, payments and network diagnosis of phone lines.

    python -m mcp_servers.telecom.server [--host 127.0.0.1] [--port 8100] [--delay-ms 0]

Tools: ``consultar_fatura(msisdn, invoice_id=None)``, ``consultar_pagamentos(msisdn)``
and ``diagnosticar_linha(msisdn)``. The demo line 5511999999999 has a high
invoice INV001 (roaming and extra data on top of the plan, against INV000 the
month before), a duplicated payment of INV000, and a weak signal because its
cell is under maintenance. ``diagnosticar_linha`` stands for a live network
query (the platform's demo configuration gates it with ``needs_permission``);
here it answers fixed data too: the same call always gives the same answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from mcp_servers.common import READ_ONLY, LogLevel, brl, main, new_server

NAME = "telecom"
DEFAULT_PORT = 8100
PORT_ENV = "MCP_TELECOM_PORT"

# Errors name a line by its last four digits only: they travel to the caller and into this server's own log.
LINE_NOT_FOUND = "Linha {line} não encontrada (line not found)."
INVOICE_NOT_FOUND = "Fatura {invoice_id} não encontrada para a linha {line} (invoice not found for this line)."
NO_INVOICES = "A linha {line} ainda não tem faturas (this line has no invoices yet)."


def line_label(msisdn: str) -> str:
    """How an error names a line: ``final 4321``, never the whole number (personal data)."""
    digits = re.sub(r"\D", "", msisdn)
    return f"final {digits[-4:]}" if len(digits) > 4 else "informada"


LINES: dict[str, dict[str, Any]] = {
    "5511999999999": {"cliente": "Ana Paula Ribeiro", "plano": "Controle 20GB", "situacao": "ativa"},
    "5521988887777": {"cliente": "Bruno Carvalho", "plano": "Pós 50GB", "situacao": "ativa"},
}

INVOICES: dict[str, dict[str, Any]] = {
    "INV000": {
        "msisdn": "5511999999999",
        "referencia": "2025-04",
        "emissao": "2025-04-25",
        "vencimento": "2025-05-10",
        "valor_total": 149.90,
        "status": "paga",
        "pago_em": "2025-05-08",
        "codigo_de_barras": "34191.79001 01043.510047 91020.150008 1 10470000014990",
        "itens": [
            {"tipo": "plano", "descricao": "Plano Controle 20GB (mensalidade)", "valor": 149.90},
        ],
    },
    "INV001": {
        "msisdn": "5511999999999",
        "referencia": "2025-05",
        "emissao": "2025-05-25",
        "vencimento": "2025-06-10",
        "valor_total": 289.90,
        "status": "em aberto",
        "pago_em": None,
        "codigo_de_barras": "34191.79001 01043.510047 91020.150008 7 10780000028990",
        "itens": [
            {"tipo": "plano", "descricao": "Plano Controle 20GB (mensalidade)", "valor": 149.90},
            {
                "tipo": "roaming",
                "descricao": "Roaming internacional - Argentina, 3 dias (dados e chamadas)",
                "valor": 89.90,
            },
            {"tipo": "dados_adicionais", "descricao": "Pacote adicional de internet 10GB", "valor": 39.90},
            {"tipo": "servicos_digitais", "descricao": "Serviço digital: Banca de Revistas", "valor": 10.20},
        ],
    },
    "INV010": {
        "msisdn": "5521988887777",
        "referencia": "2025-05",
        "emissao": "2025-05-20",
        "vencimento": "2025-06-05",
        "valor_total": 219.90,
        "status": "paga",
        "pago_em": "2025-06-05",
        "codigo_de_barras": "23790.12301 60000.123456 78000.456701 3 10730000021990",
        "itens": [
            {"tipo": "plano", "descricao": "Plano Pós 50GB (mensalidade)", "valor": 199.90},
            {"tipo": "servicos_digitais", "descricao": "Serviço digital: Streaming de música", "valor": 20.00},
        ],
    },
}

PAYMENTS: dict[str, list[dict[str, Any]]] = {
    "5511999999999": [
        {
            "pagamento_id": "PAG-7001",
            "data": "2025-05-08",
            "valor": 149.90,
            "forma": "pix",
            "invoice_id": "INV000",
            "status": "confirmado",
        },
        {
            "pagamento_id": "PAG-7002",
            "data": "2025-05-10",
            "valor": 149.90,
            "forma": "débito automático",
            "invoice_id": "INV000",
            "status": "confirmado",
        },
    ],
    "5521988887777": [
        {
            "pagamento_id": "PAG-7101",
            "data": "2025-06-05",
            "valor": 219.90,
            "forma": "cartão de crédito",
            "invoice_id": "INV010",
            "status": "confirmado",
        },
    ],
}

# What the live network would report for each line, frozen for the demo.
DIAGNOSES: dict[str, dict[str, Any]] = {
    "5511999999999": {
        "diagnosticado_em": "2025-06-03T14:20:00-03:00",
        "sinal": {
            "status": "fraco",
            "tecnologia": "4G",
            "intensidade_dbm": -112,
            "celula": "SP-PINHEIROS-0421",
        },
        "ultimo_registro_rede": {
            "data_hora": "2025-06-03T14:12:37-03:00",
            "celula": "SP-PINHEIROS-0421",
            "localidade": "São Paulo - SP",
            "tecnologia": "4G",
        },
        "sessao_dados": {
            "status": "ativa",
            "apn": "internet.conecta.com.br",
            "iniciada_em": "2025-06-03T08:05:11-03:00",
            "velocidade_estimada_mbps": 0.8,
        },
        "bloqueio": None,
        "ocorrencia_rede": {
            "protocolo": "REDE-20250603-0042",
            "descricao": "Manutenção na antena SP-PINHEIROS-0421",
            "previsao_normalizacao": "2025-06-03T18:00:00-03:00",
        },
        "recomendacao": (
            "Sinal fraco por manutenção na antena que atende a região, com normalização prevista para "
            "2025-06-03 18:00. Até lá, use o Wi-Fi quando possível; se o problema continuar depois disso, "
            "reinicie o aparelho e abra um chamado técnico."
        ),
    },
    "5521988887777": {
        "diagnosticado_em": "2025-06-03T14:20:00-03:00",
        "sinal": {
            "status": "bom",
            "tecnologia": "5G",
            "intensidade_dbm": -84,
            "celula": "RJ-BOTAFOGO-0107",
        },
        "ultimo_registro_rede": {
            "data_hora": "2025-06-03T14:18:02-03:00",
            "celula": "RJ-BOTAFOGO-0107",
            "localidade": "Rio de Janeiro - RJ",
            "tecnologia": "5G",
        },
        "sessao_dados": {
            "status": "ativa",
            "apn": "internet.conecta.com.br",
            "iniciada_em": "2025-06-03T07:41:55-03:00",
            "velocidade_estimada_mbps": 180.0,
        },
        "bloqueio": None,
        "ocorrencia_rede": None,
        "recomendacao": (
            "A rede não mostra problema nesta linha. Reinicie o aparelho, confira se os dados móveis estão "
            "ligados e teste o chip em outro aparelho; se continuar, abra um chamado técnico."
        ),
    },
}

# The diagnosis reads the live network: read-only, but not closed-world data.
LIVE_READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True)

MsisdnArg = Annotated[
    str,
    Field(description="Número da linha com DDI e DDD, só dígitos, ex. 5511999999999 (phone number, digits only)."),
]
InvoiceIdArg = Annotated[
    str | None,
    Field(description="Número da fatura, ex. INV001; omita para a mais recente (invoice id; omit for the latest)."),
]


def _line(msisdn: str) -> tuple[str, dict[str, Any]]:
    """The normalised number and its line; ``+55 (11) 99999-9999`` and ``11999999999`` find 5511999999999."""
    digits = re.sub(r"\D", "", msisdn)
    if len(digits) in (10, 11):
        digits = "55" + digits
    if digits not in LINES:
        raise ToolError(LINE_NOT_FOUND.format(line=line_label(msisdn)))
    return digits, LINES[digits]


def _invoices_of(msisdn: str) -> list[tuple[str, dict[str, Any]]]:
    """The line's invoices, oldest first."""
    owned = [(invoice_id, inv) for invoice_id, inv in INVOICES.items() if inv["msisdn"] == msisdn]
    return sorted(owned, key=lambda pair: pair[1]["emissao"])


def _new_items(current: Sequence[dict[str, Any]], previous: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    before = {item["descricao"] for item in previous}
    return [item for item in current if item["descricao"] not in before]


def consultar_fatura(msisdn: MsisdnArg, invoice_id: InvoiceIdArg = None) -> dict[str, Any]:
    number, line = _line(msisdn)
    invoices = _invoices_of(number)
    if not invoices:
        raise ToolError(NO_INVOICES.format(line=line_label(number)))
    if invoice_id is None or not invoice_id.strip():
        position = len(invoices) - 1
    else:
        wanted = invoice_id.strip().upper()
        ids = [found for found, _ in invoices]
        if wanted not in ids:
            raise ToolError(INVOICE_NOT_FOUND.format(invoice_id=invoice_id, line=line_label(number)))
        position = ids.index(wanted)
    found_id, invoice = invoices[position]

    result: dict[str, Any] = {
        "invoice_id": found_id,
        "msisdn": number,
        "cliente": line["cliente"],
        "plano": line["plano"],
        **{key: value for key, value in invoice.items() if key != "msisdn"},
        "moeda": "BRL",
        "valor_formatado": brl(invoice["valor_total"]),
        "comparacao": None,
    }
    summary = f"Fatura {found_id} ({invoice['referencia']}) de {brl(invoice['valor_total'])}, {invoice['status']}"
    summary += f", vencimento {invoice['vencimento']}."
    if position > 0:
        previous_id, previous = invoices[position - 1]
        difference = round(invoice["valor_total"] - previous["valor_total"], 2)
        new_items = _new_items(invoice["itens"], previous["itens"])
        result["comparacao"] = {
            "fatura_anterior": previous_id,
            "referencia_anterior": previous["referencia"],
            "valor_anterior": previous["valor_total"],
            "diferenca": difference,
            "itens_novos": new_items,
        }
        if difference > 0:
            reasons = "; ".join(f"{item['descricao']} ({brl(item['valor'])})" for item in new_items)
            summary += f" {brl(difference)} acima da fatura anterior ({brl(previous['valor_total'])})"
            summary += f" por causa de: {reasons}." if reasons else "."
    result["resumo"] = summary
    return result


def consultar_pagamentos(msisdn: MsisdnArg) -> dict[str, Any]:
    number, line = _line(msisdn)
    payments = sorted(PAYMENTS.get(number, []), key=lambda payment: payment["data"], reverse=True)

    duplicated = []
    for invoice_id, invoice in _invoices_of(number):
        paid = [p for p in payments if p["invoice_id"] == invoice_id and p["status"] == "confirmado"]
        excess = round(sum(p["valor"] for p in paid) - invoice["valor_total"], 2)
        if len(paid) > 1 and excess > 0:
            duplicated.append(
                {
                    "invoice_id": invoice_id,
                    "pagamentos": sorted(p["pagamento_id"] for p in paid),
                    "valor_pago_a_mais": excess,
                    "observacao": "Fatura paga mais de uma vez; o valor excedente pode ser estornado ou abatido.",
                }
            )
    open_invoices = [
        {"invoice_id": invoice_id, "valor_total": inv["valor_total"], "vencimento": inv["vencimento"]}
        for invoice_id, inv in _invoices_of(number)
        if inv["status"] != "paga"
    ]

    summary = f"{len(payments)} pagamento(s) registrado(s)."
    for dup in duplicated:
        summary += f" A fatura {dup['invoice_id']} foi paga em duplicidade ({brl(dup['valor_pago_a_mais'])} a mais)."
    for inv in open_invoices:
        summary += f" Fatura {inv['invoice_id']} em aberto: {brl(inv['valor_total'])}, vence em {inv['vencimento']}."
    return {
        "msisdn": number,
        "cliente": line["cliente"],
        "pagamentos": payments,
        "cobrancas_duplicadas": duplicated,
        "faturas_em_aberto": open_invoices,
        "resumo": summary,
    }


def diagnosticar_linha(msisdn: MsisdnArg) -> dict[str, Any]:
    number, line = _line(msisdn)
    diagnosis = DIAGNOSES[number]
    signal, session, block = diagnosis["sinal"], diagnosis["sessao_dados"], diagnosis["bloqueio"]
    summary = (
        f"Linha {line['situacao']}, sinal {signal['status']} ({signal['tecnologia']}, {signal['intensidade_dbm']} dBm)"
        f", sessão de dados {session['status']}"
    )
    summary += f", bloqueio: {block['motivo']}." if block else ", sem bloqueios."
    if diagnosis["ocorrencia_rede"]:
        incident = diagnosis["ocorrencia_rede"]
        summary += f" {incident['descricao']} (protocolo {incident['protocolo']})"
        summary += f", normalização prevista para {incident['previsao_normalizacao']}."
    return {
        "msisdn": number,
        "cliente": line["cliente"],
        "plano": line["plano"],
        "situacao_linha": line["situacao"],
        **diagnosis,
        "resumo": summary,
    }


def build_server(*, delay_ms: int = 0, log_level: LogLevel = "INFO") -> MCPServer:
    server = new_server(
        NAME,
        title="Telecom (exemplo)",
        instructions=(
            "Faturas, pagamentos e diagnóstico de rede de linhas telefônicas "
            "(phone-line invoices, payments and network diagnosis). Dados de demo."
        ),
        delay_ms=delay_ms,
        log_level=log_level,
    )
    server.add_tool(
        consultar_fatura,
        title="Consultar fatura",
        description=(
            "Consulta a fatura de uma linha telefônica: valor total, vencimento, status, código de barras, "
            "itens cobrados e comparação com a fatura anterior. Sem invoice_id, traz a mais recente. "
            "(Looks up a phone line's invoice: total, due date, status, barcode, charged items and the "
            "comparison with the previous invoice; without invoice_id, the latest one.)"
        ),
        annotations=READ_ONLY,
    )
    server.add_tool(
        consultar_pagamentos,
        title="Consultar pagamentos",
        description=(
            "Lista os pagamentos recentes de uma linha (data, valor, forma e fatura quitada), as faturas "
            "em aberto e cobranças em duplicidade. "
            "(Lists a line's recent payments — date, amount, method, invoice paid — its open invoices and "
            "duplicated charges.)"
        ),
        annotations=READ_ONLY,
    )
    server.add_tool(
        diagnosticar_linha,
        title="Diagnosticar linha",
        description=(
            "Diagnóstico da linha na rede em tempo real: status do sinal, último registro na rede, sessão de "
            "dados, bloqueios, ocorrências na região e uma recomendação. Acessa a rede ao vivo: use só com o "
            "consentimento do cliente. "
            "(Live network diagnosis of a phone line — signal, last network registration, data session, "
            "blocks, incidents nearby and a recommendation. Reaches the live network: use only with the "
            "customer's consent.)"
        ),
        annotations=LIVE_READ,
    )
    return server


if __name__ == "__main__":
    main(build_server, description=__doc__.splitlines()[0], port_env=PORT_ENV, default_port=DEFAULT_PORT)
