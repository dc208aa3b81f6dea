"""Hand-built ``metadata["goal"]`` records of goal-mode answers, as the graph writes them (the shapes goal mode stores).

Shared by the goal records' tests and the goal analytics' tests, which work out their figures from these.

==================  =============  ===============================================================================
record              status         steps (capability: status, latency ms)
==================  =============  ===============================================================================
quote_and_notify    success        1 get_stock_price: success 120; 2 get_stock_price: success 80;
                                   3 send_notification (optional): failure 40 "notifier down"; plan 160 ms
ambiguous_quote     clarification  1 get_stock_price: clarification 30 (Nordea has two listings); plan 30 ms
unsure_quote        clarification  no plan (low_confidence, asked before planning)
failed_movers       failure        1 get_top_gainers: failure 5000 "timeout"; 2 send_notification (optional):
                                   no output, skipped; plan 5000 ms
small_talk          general        no plan (domain general, answered by a specialist)
==================  =============  ===============================================================================
"""

from __future__ import annotations

from typing import Any


def _intent(domain: str, goal: str, entities: dict[str, Any], confidence: float, query: str) -> dict[str, Any]:
    return {
        "primary_domain": domain,
        "goal": goal,
        "entities": entities,
        "confidence": confidence,
        "original_query": query,
    }


def _step(step_id: int, capability: str, params: dict[str, Any], *, depends_on=(), required=True) -> dict[str, Any]:
    return {
        "id": step_id,
        "domain": "finance",
        "capability": capability,
        "params": params,
        "depends_on": list(depends_on),
        "required": required,
        "output_key": "primary" if step_id == 1 else f"step_{step_id}",
    }


def _output(status: str, capability: str, latency_ms: float, *, required=True, error=None, result=None):
    metadata: dict[str, Any] = {
        "capability": capability,
        "domain": "finance",
        "latency_ms": latency_ms,
        "required": required,
    }
    if error is not None:
        metadata["error"] = error
    return {
        "status": status,
        "result": result,
        "explanation": f"{capability}: {status}",
        "confidence": 1.0 if status == "success" else 0.0,
        "metadata": metadata,
    }


def quote_and_notify() -> dict[str, Any]:
    query = "cotação de PETR4 e VALE3 e me avise"
    steps = [
        _step(1, "get_stock_price", {"symbol_text": "PETR4"}),
        _step(2, "get_stock_price", {"symbol_text": "VALE3"}),
        _step(3, "send_notification", {"message": "${1.explanation}"}, depends_on=(1, 2), required=False),
    ]
    return {
        "status": "success",
        "intent_output": _intent("finance", "GET_QUOTE", {"symbol_text": ["PETR4", "VALE3"]}, 0.97, query),
        "execution_intents": [
            {
                "domain": "finance",
                "capability": "get_stock_price",
                "parameters": {"symbol_text": ["PETR4", "VALE3"]},
                "confidence": 0.97,
                "original_query": query,
            }
        ],
        "plan": {"execution_mode": "dag", "combine_mode": "report", "max_concurrency": 4, "steps": steps},
        "outputs": {
            "1": _output("success", "get_stock_price", 120.0, result={"symbol": "PETR4.SA", "price": 38.1}),
            "2": _output("success", "get_stock_price", 80.0, result={"symbol": "VALE3.SA", "price": 61.2}),
            "3": _output("failure", "send_notification", 40.0, required=False, error="notifier down"),
        },
        "clarification": None,
        "latency_ms": 160.0,
    }


def ambiguous_quote() -> dict[str, Any]:
    query = "qual o preço da Nordea?"
    candidates = [{"symbol": "NDA-SE.ST", "market": "Stockholm"}, {"symbol": "NDA-FI.HE", "market": "Helsinki"}]
    return {
        "status": "clarification",
        "intent_output": _intent("finance", "GET_QUOTE", {"symbol_text": "Nordea"}, 0.96, query),
        "execution_intents": [],
        "plan": {
            "execution_mode": "sequential",
            "combine_mode": "last",
            "max_concurrency": 4,
            "steps": [_step(1, "get_stock_price", {"symbol_text": "Nordea"})],
        },
        "outputs": {"1": _output("clarification", "get_stock_price", 30.0, result={"candidates": candidates})},
        "clarification": {"reason": "ambiguous", "question": "Qual Nordea?", "candidates": candidates},
        "latency_ms": 30.0,
    }


def unsure_quote() -> dict[str, Any]:
    """Asked before any plan: no ``plan``, ``outputs`` or ``execution_intents`` keys at all."""
    return {
        "status": "clarification",
        "intent_output": _intent("finance", "GET_QUOTE", {}, 0.41, "e aquela ação?"),
        "clarification": {"reason": "low_confidence", "question": "Qual ação?", "candidates": []},
        "latency_ms": 0,
    }


def failed_movers() -> dict[str, Any]:
    query = "maiores altas do Brasil e me avise"
    return {
        "status": "failure",
        "intent_output": _intent(
            "finance", "TOP_MOVERS", {"direction": "GAINERS", "market_text": "Brasil"}, 0.95, query
        ),
        "execution_intents": [],
        "plan": {
            "execution_mode": "sequential",
            "combine_mode": "last",
            "max_concurrency": 4,
            "steps": [
                _step(1, "get_top_gainers", {"market_text": "Brasil"}),
                _step(2, "send_notification", {"message": "${1.explanation}"}, depends_on=(1,), required=False),
            ],
        },
        "outputs": {"1": _output("failure", "get_top_gainers", 5000.0, error="timeout")},
        "clarification": None,
        "latency_ms": 5000.0,
    }


def small_talk() -> dict[str, Any]:
    return {
        "status": "success",
        "intent_output": _intent("general", "", {}, 0.99, "bom dia!"),
        "execution_intents": [],
        "plan": None,
        "outputs": {},
        "clarification": None,
        "latency_ms": 0,
    }
