"""``Idempotency-Key`` on the message POSTs: a retry gets the stored answer instead of running a second turn.

A key is scoped by the turn's tenant (the API key's) and the endpoint's path, and kept in the database
(:class:`conversations.models.IdempotentRequest`), so it holds across processes and restarts:

* first request with a key → the turn runs; its answer is stored with the body's fingerprint;
* the same key and body again → the stored answer, the same status and body, with ``Idempotent-Replayed: true``;
* the same key with another body → 422 naming the header (:data:`ERROR_KEY_REUSED`);
* the same key while the first request is still being answered → 409 (:data:`ERROR_IN_PROGRESS`): retry later;
  a claim whose request died (older than ``CONVERSATION_TURN_LEASE_SECONDS``, still unanswered) is taken over;
* the transaction that stores the turn records its result on the key's row (``turn``), and stores nothing if the
  row was taken over meanwhile: a request that died after its turn was stored (its host killed) is answered from
  that record on its retry, at once, never with a second turn;
* a turn that raised leaves no answer: the key is free again;
* a key expires ``IDEMPOTENCY_KEY_TTL_SECONDS`` after its first use; an expired row is replaced when its key
  comes back, and ``manage.py idempotency_purge`` deletes the rest.

The streaming routes refuse the header (400 naming it): a stream cannot be replayed; retry them with the JSON route.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from common.errors import DomainError
from common.infra.crossing import on_the_request_thread
from conversations.models import IdempotentRequest
from conversations.public import ClaimTakenOver, TurnInput, TurnResult

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
MAX_KEY_CHARS = 255

ERROR_KEY_TOO_LONG = f"{HEADER} must be at most {MAX_KEY_CHARS} characters."
ERROR_KEY_REUSED = f"This {HEADER} was already used with a different request body; send a new key for a new message."
ERROR_IN_PROGRESS = f"A request with this {HEADER} is still being answered; retry in a moment for its answer."
ERROR_NOT_ON_STREAMS = f"{HEADER} is not accepted on streaming routes; send it to the JSON route to retry safely."

PARAMETER = OpenApiParameter(
    HEADER,
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description=(
        "Any unique string (a UUID) per message, up to 255 characters. A retry with the same key and body gets the "
        "stored answer (header `Idempotent-Replayed: true`) instead of a second turn; the same key with another "
        "body is a 422; while the first request is still answered, a 409. Keys are per tenant and route, kept "
        "for IDEMPOTENCY_KEY_TTL_SECONDS (24 h by default)."
    ),
)


class KeyReused(DomainError):
    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    code = "idempotency_key_reused"


class InProgress(DomainError):
    status_code = status.HTTP_409_CONFLICT
    code = "idempotency_key_in_progress"


def _error(error: type[DomainError], message: str) -> DomainError:
    return error(message, fields={HEADER: [message]})


def idempotency_key(request: Request) -> str | None:
    """The request's key, or ``None`` without one; a key too long is a 400 naming the header."""
    key = (request.headers.get(HEADER) or "").strip()
    if not key:
        return None
    if len(key) > MAX_KEY_CHARS:
        raise _error(DomainError, ERROR_KEY_TOO_LONG)
    return key


def refuse_on_streams(request: Request) -> None:
    """A streaming route with a key: 400 naming the header (a stream is not replayed)."""
    if idempotency_key(request) is not None:
        raise _error(DomainError, ERROR_NOT_ON_STREAMS)


def body_fingerprint(data: Any) -> str:
    """The request body's SHA-256, key order ignored."""
    canonical = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Claim:
    """Either the row this request now holds (``pk``: run the turn, or answer from ``recorded``, the turn a request
    that died stored), or the stored answer to give back."""

    pk: int | None = None
    status_code: int = 200
    response: Any = None
    recorded: TurnResult | None = None


def idempotency_claim(*, tenant_pk: int, endpoint: str, key: str, fingerprint: str) -> Claim:
    """Hold ``key`` for this request, or return the stored answer; raises :class:`KeyReused`, :class:`InProgress`.

    Exactly one of concurrent requests with the same (tenant, endpoint, key) gets the row: the unique
    constraint decides. An expired row, or an unanswered one older than the turn lease (its request died),
    is deleted and claimed afresh.
    """
    scope = {"tenant_id": tenant_pk, "endpoint": endpoint[:100], "key": key}
    for _ in range(3):
        now = timezone.now()
        try:
            with transaction.atomic():
                row = IdempotentRequest.objects.create(
                    **scope,
                    body_sha256=fingerprint,
                    expires_at=now + dt.timedelta(seconds=settings.IDEMPOTENCY_KEY_TTL_SECONDS),
                )
            return Claim(pk=row.pk)
        except IntegrityError:
            existing = IdempotentRequest.objects.filter(**scope).first()
        if existing is None:
            continue  # deleted in between: claim again
        abandoned = existing.status_code is None and existing.created_at < now - dt.timedelta(
            seconds=settings.CONVERSATION_TURN_LEASE_SECONDS
        )
        if existing.expires_at <= now:
            IdempotentRequest.objects.filter(pk=existing.pk, status_code=existing.status_code).delete()
            continue
        if abandoned and existing.turn is None:
            # Taken over: the turn of the request that held it, if it comes back late, finds it gone, stores nothing.
            IdempotentRequest.objects.filter(pk=existing.pk, status_code=None, turn__isnull=True).delete()
            continue
        if existing.body_sha256 != fingerprint:
            raise _error(KeyReused, ERROR_KEY_REUSED)
        if existing.status_code is None and existing.turn is not None:  # the turn is stored, its answer not yet
            return Claim(pk=existing.pk, recorded=TurnResult.from_recorded(existing.turn))
        if existing.status_code is None:
            raise _error(InProgress, ERROR_IN_PROGRESS)
        return Claim(status_code=existing.status_code, response=existing.response)
    raise _error(InProgress, ERROR_IN_PROGRESS)


def idempotency_store(*, pk: int, status_code: int, response: Any) -> Claim:
    """Keep the answer of the request holding row ``pk``, unless a request answering from the same recorded turn
    stored one first: the answer kept either way."""
    if not IdempotentRequest.objects.filter(pk=pk, status_code=None).update(status_code=status_code, response=response):
        stored = IdempotentRequest.objects.filter(pk=pk).values_list("status_code", "response").first()
        if stored is not None and stored[0] is not None:
            return Claim(status_code=stored[0], response=stored[1])
    return Claim(status_code=status_code, response=response)


def idempotency_release(*, pk: int) -> None:
    """Free the key of a request that produced no answer (its turn raised)."""
    IdempotentRequest.objects.filter(pk=pk, status_code__isnull=True).delete()


def idempotency_purge(*, now: dt.datetime | None = None) -> int:
    """Delete every expired key; returns how many."""
    deleted, _ = IdempotentRequest.objects.filter(expires_at__lte=now or timezone.now()).delete()
    return deleted


async def idempotent(
    request: Request,
    *,
    data: TurnInput,
    run: Callable[[TurnInput], Awaitable[TurnResult]],
    body: Callable[[TurnResult], dict[str, Any]],
) -> Response:
    """``body(await run(data))`` as a 200 JSON response, once per ``Idempotency-Key`` (without the header: every
    time). ``run`` gets ``data`` with the key's row, which the turn's persisting transaction records its result on."""
    key = idempotency_key(request)
    if key is None:
        return Response(body(await run(data)))
    claim = await on_the_request_thread(idempotency_claim)(
        tenant_pk=data.tenant_pk, endpoint=request.path, key=key, fingerprint=body_fingerprint(request.data)
    )
    if claim.pk is None:
        return Response(claim.response, status=claim.status_code, headers={REPLAYED_HEADER: "true"})
    if claim.recorded is not None:
        result = claim.recorded
    else:
        try:
            result = await run(replace(data, idempotency_claim=claim.pk))
        except ClaimTakenOver as exc:  # a retry took the key over while this turn ran: its turn answers
            raise _error(InProgress, ERROR_IN_PROGRESS) from exc
        except BaseException:
            await on_the_request_thread(idempotency_release)(pk=claim.pk)
            raise
    kept = await on_the_request_thread(idempotency_store)(
        pk=claim.pk, status_code=status.HTTP_200_OK, response=body(result)
    )
    return Response(kept.response, status=kept.status_code)
