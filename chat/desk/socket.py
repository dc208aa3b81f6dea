"""The desk socket, ``/ws/desk/``: a person's desk, live (docs/desk.md).

Authentication: a logged-in staff session (the session cookie, through ``AuthMiddlewareStack``, as the chat page's
socket) whose user may answer as a person (:class:`tenants.models.TenantRight`, ``ANSWER``) for at least one active
tenant. Refusals are sent after the handshake, so that browsers see why: one ``{"type": "error", "error": {...}}``
event, then the close — 4401 (no session, or not active staff), 4403 (staff without the right) or 4429 (the user
opens sockets faster than ``API_RATE_PER_KEY``).

Out, once it is open:

* ``{"type": "snapshot", "tenants", "queues", "mine", "reasons", "priorities"}`` first
  (:func:`conversations.desk.reads.desk_snapshot`): the tenants the user answers for, their waiting conversations in
  serving order with their places, the conversations the user holds;
* then the tenants' desk events as they happen (:mod:`conversations.delivery`), one frame each,
  ``{"type": <kind>, ...}``: ``queued``, ``taken``, ``transferred``, ``returned``, ``closed`` with the escalation's
  desk row as ``escalation`` (its ``tenant`` slug added), and ``message`` (the customer's or a person's) and ``note``
  with the escalation's id as ``escalation`` and the ``message``. Escalations sent to an external desk are not
  shown. A client tells a repeated event by the message's or the escalation's id and status.

In, action frames, each answered once with the ``id`` the client sent (a string or a number):
``{"id", "action": "open" | "take" | "reply" | "note" | "transfer" | "hand_back", "escalation": <id>, ...}`` —
``reply`` and ``note`` with ``text``, ``transfer`` with ``team``, ``priority`` (1–4 or ``urgent``, ``high``,
``normal``, ``low``) and ``note`` optional, ``hand_back`` with ``note`` optional. The answer is
``{"type": "result", "id", "action", ...}``: ``open`` the conversation's detail
(:func:`conversations.desk.reads.escalation_detail`), ``reply`` and ``note`` the stored ``message``, the others the
escalation's new desk row as ``escalation``. A frame that cannot be done is answered
``{"type": "error", "id", "error": {"code", "message", "fields"}}``, the fields naming the frame's own (``action``,
``escalation``, ``text``, ``team``, ``priority``, ``note``, ``id``): ``not_found`` for an escalation of a tenant the
user may not answer for (as for an unknown id), ``conflict`` when someone else holds it or it has ended. The socket
stays open.

Every frame checks the right again (:func:`chat.desk.access.may_answer`) and calls the services of
:mod:`conversations.desk.escalations` in a thread, one frame at a time (a person's replies reach the customer in the
order written). A reply costs the right's check and the service's own queries: the tenant of an escalation the socket
has seen (in its snapshot, an event or an answer) is remembered, so it is not read again.

Every event, before it is forwarded, and every frame check that the person still may see what the socket was opened
on (:meth:`Desk.refusal`): the user active staff, answering for the same tenants. The rights are read again only when
the configuration version moved (:mod:`common.config_version`, one cache read; a grant, a group, a permission or the
user saved or deleted, or a grant updated in bulk, moves it at once). Once they changed the socket closes after one
error event: 4401 (no longer active staff), 4403 (no tenant left) or :data:`CLOSE_RIGHTS_CHANGED` (``rights_changed``:
other tenants than it opened on; the desk page opens it again, on a fresh snapshot). Nothing is forwarded after.

The events come through the channel layer's groups of the tenants' desks, joined on one channel when the socket
opens (:func:`chat.pushes.group_listen`): a layer that fails costs the socket its events (it keeps trying and the
client may reopen for a fresh snapshot), never its actions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.db import close_old_connections
from rest_framework.exceptions import Throttled

from chat.consumers import CLOSE_FORBIDDEN, CLOSE_RATE_LIMITED, CLOSE_UNAUTHORIZED, Refused
from chat.desk.access import (
    ERROR_DESK_FORBIDDEN,
    desk_tenants,
    desk_user_reread,
    escalation_for,
    may_answer,
    person_for,
)
from chat.pushes import LISTEN_READY_SECONDS, group_listen, listen_stop
from common.config_version import config_version
from common.errors import DomainError, NotFound, error_body
from common.parsers import JsonTooDeep, json_loads_limited
from conversations.models import Escalation, EscalationPriority
from conversations.public import (
    ERROR_ESCALATION_NOT_FOUND,
    PRIORITY_WORDS,
    DeskTenant,
    Person,
    desk_entry,
    desk_group,
    desk_note,
    desk_reply,
    desk_snapshot,
    escalation_detail,
    escalation_hand_back,
    escalation_take,
    escalation_transfer,
    message_public,
)
from tenants.public import API_SCOPE, principal_ident, request_throttle

logger = logging.getLogger(__name__)

ERROR_DESK_LOGIN = "Log in as staff: the desk socket opens with the session of a staff user who may answer as a person."
ERROR_DESK_MALFORMED_JSON = "The frame is not valid JSON."
ERROR_DESK_NOT_AN_OBJECT = 'A frame must be a JSON object: {"id", "action", "escalation", ...}.'
ERROR_DESK_BINARY = "Send text frames of JSON, not binary frames."
ERROR_ACTION = "Name the action: one of {actions}."
ERROR_ESCALATION_REQUIRED = "Name the escalation: its id."
ERROR_FRAME_ID = "id must be a string of at most 100 characters or a number (it comes back with the answer)."
ERROR_TEAM_REQUIRED = "Name the team to transfer to: one of the profile's teams."
ERROR_PRIORITY = "priority must be 1 (urgent) to 4 (low), or one of urgent, high, normal, low."
ERROR_NOTE = "note must be text."
ERROR_SERVER = "The action could not be done."
ERROR_DESK_RIGHTS_CHANGED = (
    "Your rights to answer as a person changed: the desk opens again on the tenants you may answer for now."
)
CLOSE_RIGHTS_CHANGED = 4205  # as HTTP's 205 Reset Content: open again, for a fresh snapshot
FRAME_ID_MAX = 100
# The desk rows' kinds of event (the others, message and note, name the escalation by its id).
ROW_EVENTS = frozenset({"queued", "taken", "transferred", "returned", "closed"})
# A desk row's ``desk`` for the platform's own (conversations.desk.escalations.escalation_public).
PLATFORM_DESK = "platform"


def _priority(value: Any) -> int | None:
    """A transfer's priority: ``None`` (keep it), a number 1–4 or its word; raises a :class:`DomainError` naming
    ``priority``."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().lower() in PRIORITY_WORDS:
        return PRIORITY_WORDS[value.strip().lower()]
    if isinstance(value, int) and not isinstance(value, bool) and value in EscalationPriority.values:
        return value
    raise DomainError(ERROR_PRIORITY, fields={"priority": [ERROR_PRIORITY]})


def _note(frame: Mapping[str, Any]) -> str:
    value = frame.get("note", "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DomainError(ERROR_NOTE, fields={"note": [ERROR_NOTE]})
    return value


def _escalation_key(value: Any) -> str:
    """The frame's escalation id in its one spelling; raises :class:`NotFound` (or a missing one, naming the field)."""
    if value in (None, ""):
        raise DomainError(ERROR_ESCALATION_REQUIRED, fields={"escalation": [ERROR_ESCALATION_REQUIRED]})
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise NotFound(ERROR_ESCALATION_NOT_FOUND, fields={"escalation": [ERROR_ESCALATION_NOT_FOUND]}) from None


@dataclass
class Desk:
    """One open desk socket's person: the user, who they are to the customer, the tenants they answer for (as it
    opened), the tenant of each escalation seen (it never changes), and the configuration version the rights were
    last read at (``None``: read them on the next check)."""

    user: Any
    person: Person
    tenants: dict[int, DeskTenant]
    tenant_of: dict[str, int] = field(default_factory=dict)
    version: int | None = None

    def refusal(self) -> Refused | None:
        """Why the socket may no longer show what it opened on — the user gone, inactive or no longer staff, no tenant
        left, or other tenants than it opened on — or ``None``. One cache read while the configuration version stays
        (:func:`common.config_version.config_version`); the user and their rights read again once it moved."""
        version = config_version()  # before the rights: a change made while they are read moves it again
        if version == self.version:
            return None
        user = desk_user_reread(self.user.pk)
        refused = _user_refusal(user)
        if refused is not None:
            return refused
        tenants = desk_tenants(user)
        if not tenants:
            return Refused("permission_denied", ERROR_DESK_FORBIDDEN, CLOSE_FORBIDDEN)
        if tenants.keys() != self.tenants.keys():
            return Refused("rights_changed", ERROR_DESK_RIGHTS_CHANGED, CLOSE_RIGHTS_CHANGED)
        self.user, self.version = user, version
        return None

    def seen(self, row: Mapping[str, Any]) -> None:
        if row.get("id") and row.get("tenant_id") is not None:
            self.tenant_of[str(row["id"])] = int(row["tenant_id"])

    def snapshot(self) -> dict[str, Any]:
        state = desk_snapshot(tenants=self.tenants, user_id=self.user.pk)
        for row in (*state["queues"], *state["mine"]):
            self.seen(row)
        return state

    def _allowed(self, key: str) -> Escalation | None:
        """The right checked for the escalation ``key``: ``None`` when its tenant is known and the user may answer for
        it; else the escalation read and checked (:func:`chat.desk.access.escalation_for`); raises :class:`NotFound`."""
        tenant_id = self.tenant_of.get(key)
        if tenant_id is None:
            escalation = escalation_for(self.user, key)
            self.tenant_of[key] = escalation.tenant_id
            return escalation
        if not may_answer(self.user, tenant_id):
            raise NotFound(ERROR_ESCALATION_NOT_FOUND, fields={"escalation": [ERROR_ESCALATION_NOT_FOUND]})
        return None

    def entry(self, escalation: Escalation) -> dict[str, Any]:
        row = desk_entry(escalation, tenants=self.tenants)
        self.seen(row)
        return row

    def act(self, action: str, frame: Mapping[str, Any]) -> dict[str, Any]:
        """Do one action frame (the right checked first): what its answer carries. Raises :class:`DomainError`
        (:class:`NotFound`, :class:`~conversations.desk.escalations.EscalationConflict`), its fields naming the
        frame's."""
        key = _escalation_key(frame.get("escalation"))
        loaded = self._allowed(key)
        if action == "reply":
            message = desk_reply(escalation_id=key, person=self.person, text=frame.get("text"))
            return {"message": message_public(message)}
        if action == "note":
            message = desk_note(escalation_id=key, person=self.person, text=frame.get("text"))
            return {"message": message_public(message)}
        if action == "open":
            escalation = loaded or escalation_for(self.user, key)
            return escalation_detail(escalation=escalation, tenants=self.tenants)
        if action == "take":
            return {"escalation": self.entry(escalation_take(escalation_id=key, person=self.person))}
        if action == "transfer":
            team = frame.get("team")
            if not isinstance(team, str) or not team.strip():
                raise DomainError(ERROR_TEAM_REQUIRED, fields={"team": [ERROR_TEAM_REQUIRED]})
            moved = escalation_transfer(
                escalation_id=key,
                person=self.person,
                team=team.strip(),
                priority=_priority(frame.get("priority")),
                note=_note(frame),
            )
            return {"escalation": self.entry(moved)}
        returned = escalation_hand_back(escalation_id=key, person=self.person, note=_note(frame))
        return {"escalation": self.entry(returned)}


def released(work: Any, *args: Any) -> Any:
    """``work(*args)`` (:meth:`Desk.act`, :meth:`Desk.refusal`) on a thread of the event loop's own pool, whose
    database connection is given back when it is done: that thread may idle for long, and a pooled connection it kept
    would be one of the pool's few out of use (Channels' wrapper gives it back too, but its test communicator turns
    that off, and a pool that lost one connection a frame ran dry)."""
    try:
        return work(*args)
    finally:
        close_old_connections()


# What each action does, in the order the error names them; every one names an escalation.
ACTIONS = ("open", "take", "reply", "note", "transfer", "hand_back")


def _user_refusal(user: Any) -> Refused | None:
    """A user who may not have a desk at all (none, not logged in, inactive, not staff): the refusal."""
    if not (
        getattr(user, "is_authenticated", False)
        and getattr(user, "is_active", False)
        and getattr(user, "is_staff", False)
    ):
        return Refused("not_authenticated", ERROR_DESK_LOGIN, CLOSE_UNAUTHORIZED)
    return None


def desk_admitted(scope: Mapping[str, Any]) -> Desk:
    """The desk of the socket's staff session; raises :class:`~chat.consumers.Refused`."""
    user = scope.get("user")
    refused = _user_refusal(user)
    if refused is not None:
        raise refused
    ident = principal_ident(user)
    try:
        if ident is not None:
            request_throttle(scope=API_SCOPE, ident=ident)
    except Throttled as exc:
        raise Refused(exc.default_code, str(exc.detail), CLOSE_RATE_LIMITED) from None
    version = config_version()  # before the rights (Desk.refusal)
    tenants = desk_tenants(user)
    if not tenants:
        raise Refused("permission_denied", ERROR_DESK_FORBIDDEN, CLOSE_FORBIDDEN)
    return Desk(user=user, person=person_for(user), tenants=tenants, version=version)


def _frame_id(frame: Mapping[str, Any]) -> str | int | None:
    value = frame.get("id")
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, str) and len(value) <= FRAME_ID_MAX:
        return value
    raise DomainError(ERROR_FRAME_ID, fields={"id": [ERROR_FRAME_ID]})


class DeskConsumer(AsyncJsonWebsocketConsumer):
    # The consumer's own layer handling is off: the desks' events come through group_listen, which survives a layer
    # that fails (Channels' own closes the socket).
    channel_layer_alias = None  # type: ignore[assignment]  # None: no layer (Channels allows it; the stubs say str)

    async def connect(self) -> None:
        self.gone = False
        self.desk: Desk | None = None
        self.listener: asyncio.Task | None = None
        # The events that arrive before the snapshot is sent wait for it (the snapshot may be older than they are).
        self.early: list[dict[str, Any]] | None = []
        await self.accept()
        try:
            self.desk = await database_sync_to_async(desk_admitted)(self.scope)
        except Refused as refused:
            await self._refuse(refused)
            return
        ready = asyncio.Event()
        groups = [desk_group(tenant_id) for tenant_id in self.desk.tenants]
        self.listener = asyncio.create_task(group_listen(groups, self._pushed, ready=ready, gone=lambda: self.gone))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ready.wait(), timeout=LISTEN_READY_SECONDS)
        state = await database_sync_to_async(self.desk.snapshot)()
        await self._send({"type": "snapshot", **state})
        early, self.early = self.early or [], None
        for event in early:
            await self._forward(event)

    async def _pushed(self, event: dict[str, Any]) -> None:
        if self.early is not None:
            self.early.append(event)
        else:
            await self._forward(event)

    async def _forward(self, event: dict[str, Any]) -> None:
        """A desk event as the socket shows it: its kind as the frame's type; a desk row with its tenant's slug. Only
        while the person may still see it (:meth:`_still_admitted`)."""
        desk = self.desk
        kind = event.get("kind")
        if desk is None or not isinstance(kind, str) or not await self._still_admitted():
            return
        shown = {"type": kind, **{name: value for name, value in event.items() if name != "kind"}}
        row = event.get("escalation")
        if kind in ROW_EVENTS and isinstance(row, dict):
            if row.get("desk") != PLATFORM_DESK:
                return
            tenant = desk.tenants.get(row.get("tenant_id"))  # type: ignore[arg-type]
            shown["escalation"] = {**row, "tenant": tenant.slug if tenant is not None else ""}
            desk.seen(row)
        await self._send(shown)

    async def receive(self, text_data=None, bytes_data=None, **kwargs) -> None:
        if self.desk is None:
            return  # refused: nothing more is read
        if text_data is None:
            await self._send_error(None, DomainError(ERROR_DESK_BINARY, fields={"frame": [ERROR_DESK_BINARY]}))
            return
        try:
            frame = json_loads_limited(text_data)
        except JsonTooDeep as exc:
            await self._send_error(None, DomainError(str(exc.detail), fields={"frame": [str(exc.detail)]}))
            return
        except ValueError as exc:
            await self._send_error(None, DomainError(ERROR_DESK_MALFORMED_JSON, fields={"frame": [str(exc)]}))
            return
        if not isinstance(frame, dict):
            await self._send_error(
                None, DomainError(ERROR_DESK_NOT_AN_OBJECT, fields={"frame": [ERROR_DESK_NOT_AN_OBJECT]})
            )
            return
        await self._act(frame)

    async def _act(self, frame: dict[str, Any]) -> None:
        """One action frame, answered (frames are read one at a time: this finishes before the next is read)."""
        desk = self.desk
        assert desk is not None
        try:
            frame_id = _frame_id(frame)
        except DomainError as exc:
            await self._send_error(None, exc)
            return
        if not await self._still_admitted():
            return
        action = frame.get("action")
        if action not in ACTIONS:
            message = ERROR_ACTION.format(actions=", ".join(ACTIONS))
            await self._send_error(frame_id, DomainError(message, fields={"action": [message]}))
            return
        try:
            # Not on the process's one thread-sensitive thread, where every turn's reads and writes queue: a
            # person's reply would wait behind the customers' turns (docs/benchmarks.md, the desk). A frame's work is
            # one transaction on its own connection; the socket reads its next frame once this one is answered.
            done = await database_sync_to_async(released, thread_sensitive=False)(desk.act, action, frame)
        except DomainError as exc:
            await self._send_error(frame_id, exc)
            return
        except Exception:
            logger.exception("Desk action %s failed", action)
            await self._send_error(frame_id, DomainError(ERROR_SERVER), code="server_error")
            return
        await self._send({"type": "result", "id": frame_id, "action": action, **done})

    async def _still_admitted(self) -> bool:
        """Whether the person may still see what the socket opened on (:meth:`Desk.refusal`, off the thread-sensitive
        thread, as a frame's work); if not, the socket is refused and closed, and nothing more is sent."""
        if self.gone or self.desk is None:
            return False
        try:
            refused = await database_sync_to_async(released, thread_sensitive=False)(self.desk.refusal)
        except Exception:
            logger.exception("Desk rights check failed")
            refused = Refused("server_error", ERROR_SERVER, CLOSE_RIGHTS_CHANGED)
        if refused is None:
            return True
        await self._refuse(refused)
        return False

    async def _refuse(self, refused: Refused) -> None:
        """One error event, then the close: the socket sends nothing more."""
        await self._send({"type": "error", **error_body(refused.code, refused.message, refused.fields)})
        self.gone = True
        await self.close(code=refused.close_code)

    async def _send_error(self, frame_id: Any, exc: DomainError, code: str = "") -> None:
        answer = {"type": "error", **error_body(code or exc.code, exc.message, exc.fields)}
        if frame_id is not None:
            answer["id"] = frame_id
        await self._send(answer)

    async def _send(self, content: dict[str, Any]) -> None:
        if self.gone:
            return
        try:
            await self.send_json(content)
        except Exception as exc:  # noqa: BLE001 — a desk gone; what was done is stored
            logger.info("Desk socket send failed: %s", exc)
            self.gone = True

    async def disconnect(self, code) -> None:
        self.gone = True
        await listen_stop(self.listener)
