"""A supervisor plan's step as plain data, the way it crosses the broker: the payload a Celery worker gets, the
outcome it gives back, and the partial answer it sends a streaming request at once.

The request side (:mod:`conversations.fanout`) and the worker side (:mod:`conversations.tasks`) both speak it;
neither imports the other.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict
from typing import Any

from channels.layers import get_channel_layer

from agents.public import Generation, ToolResult, attachment_scope
from conversations.guardrails import MaskVault
from conversations.runtime import SpecialistOutcome, SpecialistRequest, tools_for_turn
from routing.public import Snapshot

logger = logging.getLogger(__name__)

PARTIAL_MESSAGE_TYPE = "plan.partial"


def payload_from_request(request: SpecialistRequest, vault: MaskVault) -> dict[str, Any]:
    return {
        "agent_id": request.profile.agent_id,
        # A draft's spec has no released number (chat.drafts): the worker must rebuild from the draft, not live.
        "draft": request.profile.version is None,
        "specialist": request.specialist.name,
        "intent": request.intent,
        "intent_description": request.intent_description,
        "text": request.text,
        "history": [list(item) for item in request.history],
        "context": request.context,
        "model_context": request.model_context,
        "tools": [tool.name for tool in request.tools],
        "granted": sorted(request.granted),
        "notes": list(request.notes),
        "vault": vault.entries(),
        "generation": request.generation.as_dict() if request.generation is not None else None,
        "language": request.language,
        "tenant_pk": request.tenant_pk,
        "customer_identified": request.customer_identified,
        "attachments": attachment_scope().as_dict(),  # whose the step's attachments are (agents.mcp)
    }


def request_from_payload(payload: dict[str, Any], current: Snapshot) -> SpecialistRequest | None:
    """The specialist's request rebuilt on a worker from its own snapshot — the profile's draft when the turn ran the
    draft (``payload["draft"]``), else its released version; ``None`` if it no longer exists."""
    profile = current.profile(payload["agent_id"], draft=bool(payload.get("draft")))
    specialist = profile.specialists.get(payload["specialist"]) if profile else None
    if profile is None or specialist is None:
        return None
    vault = MaskVault.from_entries(payload.get("vault", []))
    tools = tools_for_turn(
        profile=profile, specialist=specialist, intent_tools=payload.get("tools", []), all_tools=current.tools
    )
    return SpecialistRequest(
        profile=profile,
        specialist=specialist,
        text=payload["text"],
        intent=payload.get("intent", ""),
        intent_description=payload.get("intent_description", ""),
        history=tuple(tuple(item) for item in payload.get("history", [])),
        context=payload.get("context", {}),
        model_context=payload.get("model_context", {}),
        tools=tools,
        servers=current.servers,
        unmask=vault.unmask,
        mask=vault.mask_value,
        granted=frozenset(payload.get("granted", [])),
        notes=tuple(payload.get("notes", [])),
        generation=Generation.from_dict(payload.get("generation")),
        language=str(payload.get("language") or ""),
        tenant_pk=payload.get("tenant_pk"),
        knowledge_held=profile.pk in current.knowledge,
        customer_identified=bool(payload.get("customer_identified")),
    )


# A plan's part makes no moves; a tool waiting for permission shows in its tool results.
_LOCAL_ONLY = ("control", "refused", "permission_needed", "permission_args")


def outcome_as_dict(outcome: SpecialistOutcome) -> dict[str, Any]:
    data = {key: value for key, value in asdict(outcome).items() if key not in _LOCAL_ONLY}
    data["tool_results"] = [result.as_dict() for result in outcome.tool_results]
    return data


def outcome_from_dict(data: dict[str, Any]) -> SpecialistOutcome:
    results = [ToolResult(**result) for result in data.get("tool_results", [])]
    return SpecialistOutcome(**{**data, "tool_results": results})


def partial_send(payload: dict[str, Any], answer: dict[str, Any], loop: asyncio.AbstractEventLoop) -> None:
    """On a worker: send the step's answer to the request's channel, if it asked (see :class:`CeleryExecutor`)."""
    channel = payload.get("reply_channel")
    if not channel:
        return
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": PARTIAL_MESSAGE_TYPE, "index": payload.get("reply_index", 0), "answer": answer}
    try:
        loop.run_until_complete(layer.send(channel, message))
    except Exception as exc:  # noqa: BLE001 — the result still goes to the backend; the request reports it then
        logger.warning("Could not send a plan step's answer to %s: %s", channel, exc)
