"""What the memory tests say through the message API and read of what the scripted model received."""

from __future__ import annotations


def said(api, text: str, *, user: str, session: str) -> dict:
    """The answer to ``text`` from ``user`` in ``session`` of telecom_contas (the gateway's message route)."""
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": session, "user_id": user}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def system_notes(request: dict) -> str:
    """Every system message of a chat completion request the scripted server received, joined."""
    return "\n".join(m["content"] for m in request["messages"] if m["role"] == "system")
