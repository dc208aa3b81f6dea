"""Example retail MCP server: orders and deliveries.

    python -m mcp_servers.retail.server [--host 127.0.0.1] [--port 8200] [--delay-ms 0]

Tools: ``consultar_pedido(order_id, customer_id=None)`` and ``consultar_entrega(order_id)``.
Order P100 of customer C001 is in transit and late; P200 was delivered; P300
(customer C002) waits for its payment. Everything is fixed data: the same call
always gives the same answer.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from mcp_servers.common import READ_ONLY, LogLevel, brl, main, new_server

NAME = "retail"
DEFAULT_PORT = 8200
PORT_ENV = "MCP_RETAIL_PORT"

ORDER_NOT_FOUND = "Pedido {order_id} não encontrado (order not found)."
ORDER_OF_ANOTHER_CUSTOMER = "O pedido {order_id} não pertence ao cliente {customer_id} (order of another customer)."

CUSTOMERS: dict[str, dict[str, Any]] = {
    "C001": {"nome": "Carlos Lima"},
    "C002": {"nome": "Beatriz Nunes"},
}

ORDERS: dict[str, dict[str, Any]] = {
    "P100": {
        "customer_id": "C001",
        "criado_em": "2025-05-28",
        "status": "em trânsito",
        "itens": [
            {"sku": "FON-BT-200", "descricao": "Fone de ouvido Bluetooth", "quantidade": 1, "preco_unitario": 199.90},
            {"sku": "CAR-USBC-20", "descricao": "Carregador USB-C 20W", "quantidade": 2, "preco_unitario": 49.95},
        ],
        "frete": 0.00,
        "pagamento": {"status": "aprovado", "forma": "cartão de crédito", "parcelas": 3, "aprovado_em": "2025-05-28"},
        "endereco_entrega": "Rua das Palmeiras, 120 - São Paulo/SP",
    },
    "P200": {
        "customer_id": "C001",
        "criado_em": "2025-05-02",
        "status": "entregue",
        "itens": [
            {"sku": "SW-FIT-3", "descricao": "Smartwatch Fit 3", "quantidade": 1, "preco_unitario": 599.00},
        ],
        "frete": 19.90,
        "pagamento": {"status": "aprovado", "forma": "pix", "parcelas": 1, "aprovado_em": "2025-05-02"},
        "endereco_entrega": "Rua das Palmeiras, 120 - São Paulo/SP",
    },
    "P300": {
        "customer_id": "C002",
        "criado_em": "2025-06-01",
        "status": "aguardando pagamento",
        "itens": [
            {"sku": "CAF-EXP-1", "descricao": "Cafeteira expresso", "quantidade": 1, "preco_unitario": 349.90},
        ],
        "frete": 25.00,
        "pagamento": {"status": "aguardando pagamento", "forma": "boleto", "parcelas": 1, "vencimento": "2025-06-04"},
        "endereco_entrega": "Av. Atlântica, 500 - Rio de Janeiro/RJ",
    },
}

DELIVERIES: dict[str, dict[str, Any]] = {
    "P100": {
        "transportadora": "Rápido Log",
        "codigo_rastreio": "RL123456789BR",
        "status": "em trânsito",
        "previsao_original": "2025-06-03",
        "previsao_atual": "2025-06-06",
        "entregue_em": None,
        "motivo_atraso": "Alto volume no centro de distribuição de Cajamar/SP.",
        "eventos": [
            {"data_hora": "2025-05-29T10:15:00-03:00", "local": "São Paulo/SP", "descricao": "Pedido coletado"},
            {"data_hora": "2025-05-30T08:40:00-03:00", "local": "Cajamar/SP", "descricao": "Chegou ao centro"},
            {
                "data_hora": "2025-06-02T18:05:00-03:00",
                "local": "Cajamar/SP",
                "descricao": "Atraso na transferência: previsão de entrega alterada para 2025-06-06",
            },
        ],
    },
    "P200": {
        "transportadora": "Correios",
        "codigo_rastreio": "OX987654321BR",
        "status": "entregue",
        "previsao_original": "2025-05-07",
        "previsao_atual": "2025-05-07",
        "entregue_em": "2025-05-06",
        "motivo_atraso": None,
        "eventos": [
            {"data_hora": "2025-05-03T09:00:00-03:00", "local": "Barueri/SP", "descricao": "Objeto postado"},
            {"data_hora": "2025-05-06T11:20:00-03:00", "local": "São Paulo/SP", "descricao": "Saiu para entrega"},
            {"data_hora": "2025-05-06T15:47:00-03:00", "local": "São Paulo/SP", "descricao": "Objeto entregue"},
        ],
    },
}

OrderIdArg = Annotated[str, Field(description="Número do pedido, ex. P100 (order id).")]
CustomerIdArg = Annotated[
    str | None,
    Field(description="Identificador do cliente, ex. C001; confirma que o pedido é dele (customer id, optional)."),
]


def _order(order_id: str) -> tuple[str, dict[str, Any]]:
    key = order_id.strip().lstrip("#").upper()
    if key not in ORDERS:
        raise ToolError(ORDER_NOT_FOUND.format(order_id=order_id))
    return key, ORDERS[key]


def _tracking(order_id: str, order: dict[str, Any]) -> dict[str, Any]:
    """The delivery of an order, with ``atrasado`` and ``dias_de_atraso`` from the fixed forecast dates."""
    delivery = DELIVERIES.get(order_id)
    if delivery is None:
        return {
            "order_id": order_id,
            "status": "não enviado",
            "transportadora": None,
            "codigo_rastreio": None,
            "previsao_original": None,
            "previsao_atual": None,
            "entregue_em": None,
            "atrasado": False,
            "dias_de_atraso": 0,
            "motivo_atraso": None,
            "eventos": [],
            "resumo": f"O pedido {order_id} ainda não foi enviado (pedido {order['status']}).",
        }
    promised = date.fromisoformat(delivery["previsao_original"])
    actual = date.fromisoformat(delivery["entregue_em"] or delivery["previsao_atual"])
    late_days = max((actual - promised).days, 0)
    if delivery["entregue_em"]:
        summary = f"Pedido {order_id} entregue em {delivery['entregue_em']} pela {delivery['transportadora']}."
    else:
        summary = f"Pedido {order_id} {delivery['status']} com a {delivery['transportadora']}"
        summary += f" (rastreio {delivery['codigo_rastreio']}), previsão {delivery['previsao_atual']}."
    if late_days:
        summary += f" Atrasado {late_days} dia(s) em relação à previsão original ({delivery['previsao_original']})"
        summary += f": {delivery['motivo_atraso']}" if delivery["motivo_atraso"] else "."
    return {
        "order_id": order_id,
        **delivery,
        "atrasado": late_days > 0,
        "dias_de_atraso": late_days,
        "resumo": summary,
    }


def consultar_pedido(order_id: OrderIdArg, customer_id: CustomerIdArg = None) -> dict[str, Any]:
    key, order = _order(order_id)
    if customer_id is not None and customer_id.strip().upper() != order["customer_id"]:
        raise ToolError(ORDER_OF_ANOTHER_CUSTOMER.format(order_id=key, customer_id=customer_id))
    items = [{**item, "subtotal": round(item["quantidade"] * item["preco_unitario"], 2)} for item in order["itens"]]
    total = round(sum(item["subtotal"] for item in items) + order["frete"], 2)
    tracking = _tracking(key, order)
    summary = f"Pedido {key} de {order['criado_em']}, {order['status']}, total {brl(total)}"
    summary += f", pagamento {order['pagamento']['status']} ({order['pagamento']['forma']})."
    if tracking["atrasado"] and not tracking["entregue_em"]:
        summary += f" Entrega atrasada: nova previsão {tracking['previsao_atual']}."
    return {
        "order_id": key,
        "customer_id": order["customer_id"],
        "cliente": CUSTOMERS[order["customer_id"]]["nome"],
        "criado_em": order["criado_em"],
        "status": order["status"],
        "itens": items,
        "frete": order["frete"],
        "valor_total": total,
        "moeda": "BRL",
        "valor_formatado": brl(total),
        "pagamento": order["pagamento"],
        "endereco_entrega": order["endereco_entrega"],
        "entrega": {
            "status": tracking["status"],
            "previsao": tracking["previsao_atual"],
            "entregue_em": tracking["entregue_em"],
            "atrasado": tracking["atrasado"],
        },
        "resumo": summary,
    }


def consultar_entrega(order_id: OrderIdArg) -> dict[str, Any]:
    key, order = _order(order_id)
    return _tracking(key, order)


def build_server(*, delay_ms: int = 0, log_level: LogLevel = "INFO") -> MCPServer:
    server = new_server(
        NAME,
        title="Varejo (exemplo)",
        instructions="Pedidos e entregas de uma loja (store orders and deliveries). Dados de demo.",
        delay_ms=delay_ms,
        log_level=log_level,
    )
    server.add_tool(
        consultar_pedido,
        title="Consultar pedido",
        description=(
            "Consulta um pedido de varejo por order_id: itens, valor, status do pagamento e do pedido e um "
            "resumo da entrega. Com customer_id, confirma que o pedido é do cliente. "
            "(Looks up a retail order: items, total, payment and order status, delivery summary; "
            "with customer_id, checks the order belongs to that customer.)"
        ),
        annotations=READ_ONLY,
    )
    server.add_tool(
        consultar_entrega,
        title="Consultar entrega",
        description=(
            "Consulta o rastreio da entrega de um pedido: transportadora, código de rastreio, status, "
            "previsão, atraso e eventos. "
            "(Tracks an order's delivery: carrier, tracking code, status, estimated date, delay and events.)"
        ),
        annotations=READ_ONLY,
    )
    return server


if __name__ == "__main__":
    main(build_server, description=__doc__.splitlines()[0], port_env=PORT_ENV, default_port=DEFAULT_PORT)
