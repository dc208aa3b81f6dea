"""No API key and no personal data in any log of a production-like run (tests/production_stack.py).

Personal data (a CPF, a card, an e-mail, a phone) goes in through every face — the gateway, its Server-Sent
Events, ``/v1/chat/completions`` streamed and not, the WebSocket with ``?key=`` and with the ``bearer.<key>``
subprotocol — in the text, the context and as the user id; a tool errors with the phone in its message; a
supervisor turn fans out to the Celery worker. Then every log the stack wrote (web server, Celery workers, MCP
servers, PostgreSQL, Redis, manage.py) is searched for each key in full and each raw spelling of the data. Run after
the fault tests on the same stack, it searches their logs too.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from tests.production_stack import ROUTER_PROFILE, SUPERVISOR_PROFILE, ProductionStack, conversation_key

pytestmark = [pytest.mark.slow, pytest.mark.faults]

CPF, CARD, EMAIL, PHONE = "123.456.789-09", "4111 1111 1111 1111", "joao.silva@example.com", "(11) 98765-4321"
PII_TEXT = f"Meu CPF é {CPF}, cartão {CARD}, email {EMAIL}, telefone {PHONE}."
# The phone is the line whose invoice is asked for: no such line, so the telecom tool errors naming it.
PII_CONTEXT = {"cpf": CPF, "email": EMAIL, "msisdn": PHONE, "card": CARD}
# Every spelling of the data a log line could carry.
RAW_FORMS = {
    "CPF": CPF,
    "CPF digits": "12345678909",
    "card": CARD,
    "card digits": "4111111111111111",
    "e-mail": EMAIL,
    "e-mail, URL-encoded": "joao.silva%40example.com",
    "phone": PHONE,
    "phone number": "98765-4321",
    "phone digits": "11987654321",
}
TIMEOUT = 60.0


async def send_everywhere(stack: ProductionStack) -> dict[str, object]:
    """The PII message through every face; what each answered (status or final event), by face."""
    import httpx
    import websockets

    key, debug_key, other_key = stack.keys["tenant_a"], stack.keys["tenant_a_debug"], stack.keys["tenant_b"]
    bearer = {"Authorization": f"Bearer {key}"}

    def message(agent_id: str, session_id: str, text: str = PII_TEXT) -> dict[str, object]:
        payload = {"text": text, "session_id": session_id, "user_id": EMAIL, "context": PII_CONTEXT}
        return {"channel": "web", "agent_id": agent_id, "payload": payload}

    def completion(stream: bool) -> dict[str, object]:
        # No X-Session-Id: the conversation is named by ``user``, as OpenAI clients send it.
        content = f"Minha fatura veio alta. {PII_TEXT}"
        return {
            "model": "telecom_assistente",
            "user": EMAIL,
            "stream": stream,
            "messages": [{"role": "user", "content": content}],
        }

    async def ws_turn(url: str, **connect: object) -> str:
        async with websockets.connect(url, open_timeout=15, **connect) as socket:
            frame = {"text": f"Minha fatura veio alta. {PII_TEXT}", "user_id": EMAIL, "context": PII_CONTEXT}
            await socket.send(json.dumps(frame))
            async with asyncio.timeout(TIMEOUT):
                while (event := json.loads(await socket.recv()))["type"] not in ("done", "error"):
                    pass
            return event["type"]

    outcome: dict[str, object] = {}
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=TIMEOUT) as client:

        async def post(name: str, path: str, body: dict[str, object], **headers: str) -> None:
            response = await client.post(path, json=body, headers={**bearer, **headers})
            outcome[name] = response.status_code
            if response.headers.get("content-type", "").startswith("text/event-stream"):
                outcome[name] = (response.status_code, "done" in response.text or "[DONE]" in response.text)

        ws_base = f"{stack.ws_url}/ws/chat/telecom_assistente"
        results = await asyncio.gather(
            post("gateway, supervisor fan-out", "/api/gateway/message", message(SUPERVISOR_PROFILE, "pii-fanout",
                 f"Minha fatura e meu pedido, quero saber do plano e fazer uma troca. {PII_TEXT}")),
            post("gateway, router", "/api/gateway/message", message(ROUTER_PROFILE, "pii-router")),
            post("gateway, tool error", "/api/gateway/message", message("telecom_assistente", "pii-tool",
                 f"Minha fatura veio alta. {PII_TEXT}")),
            post("gateway SSE", "/api/gateway/message/stream", message(SUPERVISOR_PROFILE, "pii-sse")),
            post("chat SSE", "/api/chat/message/stream", message("telecom_assistente", "pii-chat-sse")),
            post("openai", "/v1/chat/completions", completion(stream=False)),
            post("openai stream", "/v1/chat/completions", completion(stream=True)),
            post("debug MCP call", "/api/debug/mcp/call/consultar_fatura", {"msisdn": PHONE},
                 Authorization=f"Bearer {debug_key}"),
            ws_turn(f"{ws_base}/pii-ws-key/?key={debug_key}"),
            ws_turn(f"{ws_base}/pii-ws-bearer/", subprotocols=[f"bearer.{other_key}"]),
            return_exceptions=True,
        )  # fmt: skip
        outcome["websocket ?key="], outcome["websocket bearer subprotocol"] = results[-2], results[-1]
        for result in results:
            if isinstance(result, BaseException):
                raise result
    return outcome


@pytest.mark.timeout(180)
def test_no_log_of_the_stack_carries_an_api_key_or_raw_personal_data(production_stack):
    stack = production_stack
    outcome = asyncio.run(send_everywhere(stack))

    assert outcome == {
        "gateway, supervisor fan-out": 200,
        "gateway, router": 200,
        "gateway, tool error": 200,
        "gateway SSE": (200, True),
        "chat SSE": (200, True),
        "openai": 200,
        "openai stream": (200, True),
        "debug MCP call": 200,
        "websocket ?key=": "done",
        "websocket bearer subprotocol": "done",
    }
    # The paths the data had to take were taken: the tool got the phone and failed; the fan-out ran on a worker.
    tool_errors = stack.query(
        "SELECT t.status FROM routing_toolcall t JOIN routing_conversation c ON c.id = t.conversation_id"
        " WHERE c.conversation_key = %s",
        conversation_key("telecom_assistente", "pii-tool"),
    )
    assert ("error",) in tool_errors, tool_errors
    logs = {path: path.read_text(encoding="utf-8", errors="replace") for path in stack.log_files()}
    web_log = "".join(text for path, text in logs.items() if path.name.startswith("web-"))
    worker_log = "".join(text for path, text in logs.items() if path.name.startswith("celery-worker-"))
    assert "routing.specialist_step" in worker_log, "the fan-out never reached the worker"
    # The lines that once carried a key and the phone are written (the search below has something to find).
    assert "/pii-ws-key/" in web_log and "MCP telecom.consultar_fatura" in web_log

    secrets = {f"API key {name}": raw for name, raw in stack.keys.items()} | RAW_FORMS
    found = []
    for path, text in logs.items():
        # Whitespace runs as one space: a console handler wraps long messages, a value may straddle a line break.
        flat = re.sub(r"\s+", " ", text)
        for name, secret in secrets.items():
            if (hits := flat.count(secret)) == 0:
                continue
            at = flat.index(secret)
            shown = flat[max(0, at - 100) : at + len(secret) + 60]
            for other_name, other in secrets.items():
                shown = shown.replace(other, f"<{other_name}>")
            found.append(f"{path.name}: {name} × {hits}, first: …{shown}…")
    assert not found, f"{len(found)} secrets in the logs:\n" + "\n".join(found)
