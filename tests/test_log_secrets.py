"""No secret, no API key and no personal data in any log of a production-like run (tests/production_stack.py).

Secrets: the stack holds canaries in its settings and data (``stack.canaries``: the Django secret key, the database
password, the metrics token, an OTLP header, the events webhook's URL credentials and signing key, model keys, the
telecom MCP endpoint's user, password and token, a remote backend's credentials and key, a profile's model endpoint
credentials, an external desk's URL credentials and signing secret). Every path that logs an address is taken — tool
calls through the real example MCP servers in the web process and on the Celery worker, the webhook, the backend hop,
the profile's model, an escalation posted to the external desk by the worker, health, the debug routes, metrics —
and no log any process wrote (web, worker, beat, MCP servers, PostgreSQL, Redis, manage.py), no answer and no
history entry holds one.

Personal data (a CPF, a card, an e-mail, a phone) goes in through every face — the gateway, its Server-Sent
Events, ``/v1/chat/completions`` streamed and not, the WebSocket with ``?key=`` and with the ``bearer.<key>``
subprotocol — in the text, the context and as the user id; a tool errors with the phone in its message; a
supervisor turn fans out to the Celery worker. Then every log the stack wrote (web server, Celery workers, MCP
servers, PostgreSQL, Redis, manage.py) is searched for each key in full and each raw spelling of the data. Run after
the fault tests on the same stack, it searches their logs too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re

import pytest

from tests.production_stack import (
    BACKEND_WORD,
    ON_THE_STACKS_WORKER,
    ROUTER_PROFILE,
    STACK_TEST_TIMEOUT,
    SUPERVISOR_PROFILE,
    ProductionStack,
    StackError,
    conversation_key,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.faults, ON_THE_STACKS_WORKER]

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


def found_in_logs(stack: ProductionStack, secrets: dict[str, str]) -> list[str]:
    """``"<log>: <secret> × n, first: …context…"`` for each secret some log of the stack holds."""
    found = []
    for path in stack.log_files():
        # Whitespace runs as one space: a console handler wraps long messages, a value may straddle a line break.
        flat = re.sub(r"\s+", " ", path.read_text(encoding="utf-8", errors="replace"))
        for name, secret in secrets.items():
            if (hits := flat.count(secret)) == 0:
                continue
            at = flat.index(secret)
            shown = flat[max(0, at - 100) : at + len(secret) + 60]
            for other_name, other in secrets.items():
                shown = shown.replace(other, f"<{other_name}>")
            found.append(f"{path.name}: {name} × {hits}, first: …{shown}…")
    return found


@pytest.mark.timeout(STACK_TEST_TIMEOUT)
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
    found = found_in_logs(stack, secrets)
    assert not found, f"{len(found)} secrets in the logs:\n" + "\n".join(found)


async def take_every_path_that_logs_an_address(stack: ProductionStack) -> dict[str, tuple[int, str]]:
    """Tool calls (web and worker), the backend hop, the profile's model, health, the debug routes and metrics:
    each one's status and body."""
    import httpx

    bearer = {"Authorization": f"Bearer {stack.keys['tenant_a']}"}
    debug = {"Authorization": f"Bearer {stack.keys['tenant_a_debug']}"}
    metrics = {"Authorization": f"Bearer {stack.canaries['metrics token']}"}
    line = {"msisdn": "5511999999999"}

    def message(agent_id: str, session_id: str, text: str) -> dict[str, object]:
        payload = {"text": text, "session_id": session_id, "context": line}
        return {"channel": "web", "agent_id": agent_id, "payload": payload}

    async with httpx.AsyncClient(base_url=stack.base_url, timeout=TIMEOUT) as client:
        requests = {
            "tool call, web": client.post("/api/gateway/message", headers=bearer,
                json=message("telecom_assistente", "canary-tool", "Minha fatura veio alta")),
            "tool calls, worker": client.post("/api/gateway/message", headers=bearer,
                json=message(SUPERVISOR_PROFILE, "canary-fanout", "Minha fatura e meu pedido, quero uma troca.")),
            "backend hop": client.post("/api/gateway/message", headers=bearer,
                json=message(ROUTER_PROFILE, "canary-backend", f"Quero saber do {BACKEND_WORD}")),
            "profile's model": client.post("/api/gateway/message", headers=bearer,
                json=message("finance_assistente", "canary-model", "Olá, o que você sabe fazer?")),
            "external desk": client.post("/api/gateway/message", headers=bearer,
                json=message("finance_assistente", "canary-desk", "Quero falar com um atendente")),
            "debug MCP tools": client.get("/api/debug/mcp/tools", headers=debug),
            "debug MCP call": client.post("/api/debug/mcp/call/consultar_fatura", headers=debug, json=line),
            "debug environment": client.get("/api/debug/env", headers=debug),
            "health": client.get("/api/health"),
            "readiness": client.get("/api/health/ready"),
            "metrics": client.get("/metrics", headers=metrics),
        }  # fmt: skip
        answers = await asyncio.gather(*requests.values())
    return {name: (answer.status_code, answer.text) for name, answer in zip(requests, answers, strict=True)}


def desk_state(stack: ProductionStack) -> str:
    """What became of the escalation sent to the external desk: its rows, its events, the worker's lines on them."""
    escalations = stack.query(
        "SELECT e.status, e.desk, e.reason FROM conversations_escalation e"
        " JOIN routing_conversation c ON c.id = e.conversation_id WHERE c.conversation_key LIKE %s",
        "%canary-desk%",
    )
    events = stack.query("SELECT type, attempts, due_at, leased_until, last_error FROM conversations_externaldeskevent")
    logs = "".join(
        path.read_text(encoding="utf-8", errors="replace")
        for path in stack.log_files()
        if path.name.startswith(("celery-worker-", "web-"))
    )
    desk_lines = [line for line in logs.splitlines() if "desk" in line.lower()][-20:]
    worker = f"worker alive: {stack.worker.alive()}, pid {stack.worker.pid}"
    return f"{worker}\nescalations: {escalations}\nevents: {events}\nlog lines on desks:\n" + "\n".join(desk_lines)


@pytest.mark.timeout(STACK_TEST_TIMEOUT)
def test_no_log_answer_or_history_entry_of_the_stack_carries_a_planted_secret(production_stack):
    stack = production_stack
    assert stack.sink is not None
    posted_before = len(stack.sink.posts)

    answered = asyncio.run(take_every_path_that_logs_an_address(stack))

    assert {name: status for name, (status, _) in answered.items()} == dict.fromkeys(answered, 200), answered
    assert '"status":"ok"' in answered["debug MCP call"][1].replace(" ", "")  # through the endpoint with credentials

    # The webhook, the backend hop, the profile's model and the external desk reached the receiver: their addresses
    # were used.
    def not_called() -> set[str]:
        headers = {header.lower() for headers, _ in stack.sink.posts[posted_before:] for header in headers}
        wanted = {"x-platform-event", "x-gateway-hops", "x-stainless-lang", "x-platform-event-id"}
        return wanted - headers  # webhook, backend, model, desk

    with contextlib.suppress(StackError):
        wait_for(lambda: not not_called(), timeout=30, what="the webhook, the backend, the model and the desk called")
    state = desk_state(stack)  # read now: the failure below says what became of the escalation
    assert not not_called(), f"never called: {not_called()}\n{state}"
    canaries = stack.canaries
    leaked = {name: [secret for secret in canaries.values() if secret in body] for name, (_, body) in answered.items()}
    assert not any(leaked.values()), leaked
    history = " ".join(changes for (changes,) in stack.query("SELECT changes::text FROM auditlog_logentry"))
    assert "@127.0.0.1" in history and not [name for name, secret in canaries.items() if secret in history]
    found = found_in_logs(stack, {**canaries, **{f"API key {name}": raw for name, raw in stack.keys.items()}})
    assert not found, f"{len(found)} secrets in the logs:\n" + "\n".join(found)

    logs = {path.name: path.read_text(encoding="utf-8", errors="replace") for path in stack.log_files()}
    web = "".join(text for name, text in logs.items() if name.startswith("web-"))
    worker = "".join(text for name, text in logs.items() if name.startswith("celery-worker-"))
    # The lines that carried the credentials were written (the search above had something to find).
    assert "HTTP Request: POST http://***@127.0.0.1:" in web and "HTTP Request: POST http://***@127.0.0.1:" in worker
    assert "beat: Starting" in "".join(text for name, text in logs.items() if name.startswith("celery-beat-"))
