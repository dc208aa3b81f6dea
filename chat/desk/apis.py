"""The escalations API: the desk's face for an external contact-center tool (docs/external-desk.md).

``GET /api/escalations`` lists the queue the caller may answer, ``GET /api/escalations/{id}`` shows one with the
conversation, and ``take``, ``messages``, ``notes``, ``transfer`` and ``hand-back`` act on it. Who may: an API key
made with ``--answer`` (its own tenant's escalations; it names the ``person`` who writes), or a staff session
holding the *answer as a person* right over the escalation's tenant (it writes as its user; CSRF as every session
API). Every check is :mod:`chat.desk.access`'s, every write :mod:`conversations.desk.escalations`'s, every shape
:mod:`conversations.desk.contract`'s — the same an external desk's webhook carries.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.public import ERROR_UNKNOWN_PROFILE, profile_pk
from chat.desk.access import IsDeskClient, desk_tenant_ids, escalation_for, person_for
from chat.intake import KnownFieldsSerializer, StrictCharField
from common.errors import DomainError, error_responses
from conversations.models import Escalation, EscalationPriority
from conversations.public import (
    DETAIL_MESSAGES,
    LIST_OPEN,
    LIST_STATUSES,
    Person,
    desk_history,
    desk_note,
    desk_reply,
    desk_route_decisions,
    escalation_for_desk,
    escalation_get,
    escalation_hand_back,
    escalation_list,
    escalation_take,
    escalation_transfer,
    list_after,
    list_cursor,
    message_public,
    positions,
    queue_position,
    where_of,
)
from tenants.public import ApiClient

LIST_LIMIT = 50
LIST_LIMIT_MAX = 200
NOTE_MAX_CHARS = 2000
ERROR_PERSON_SESSION = "A session writes as its user: leave person out."
PRIORITIES = [choice.label.lower() for choice in EscalationPriority]

ID_PARAMETER = OpenApiParameter(
    "escalation_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The escalation's id."
)


# -- shapes (the schema's; the values come from conversations.desk.contract) -----------------------------------------

PERSON_OUT = inline_serializer(
    "DeskPerson",
    {"name": serializers.CharField(), "id": serializers.CharField(help_text="Your desk's id for them.")},
    allow_null=True,
    help_text="Who has it (null while nobody does).",
)
ESCALATION = inline_serializer(
    "DeskEscalation",
    {
        "id": serializers.UUIDField(),
        "status": serializers.ChoiceField(choices=["queued", "assigned", "returned", "closed"]),
        "team": serializers.CharField(help_text="The queue it waits in."),
        "priority": serializers.ChoiceField(choices=PRIORITIES),
        "position": serializers.IntegerField(allow_null=True, help_text="Its place in line (1: next) while queued."),
        "reason": serializers.CharField(help_text="customer_request, intent, specialist, fallbacks, …"),
        "reason_text": serializers.CharField(),
        "summary": serializers.CharField(help_text="What the person who takes it needs to know first."),
        "language": serializers.CharField(help_text="The customer's language (pt, en, es)."),
        "from_agent": serializers.CharField(help_text="The assistant that answered before."),
        "intent": serializers.CharField(),
        "desk": serializers.CharField(help_text="The external desk's name, or `platform`."),
        "person": PERSON_OUT,
        "tenant": serializers.CharField(),
        "profile": serializers.CharField(),
        "conversation_key": serializers.CharField(),
        "created_at": serializers.DateTimeField(),
        "assigned_at": serializers.DateTimeField(allow_null=True),
        "ended_at": serializers.DateTimeField(allow_null=True),
    },
)
AUTHOR = inline_serializer(
    "DeskAuthor",
    {
        "kind": serializers.ChoiceField(choices=["customer", "assistant", "human"]),
        "agent": serializers.CharField(required=False, help_text="An assistant's name."),
        "name": serializers.CharField(required=False, help_text="A person's name, as the customer reads it."),
        "id": serializers.CharField(required=False, help_text="A person's id (your desk's, for its people)."),
    },
)
MESSAGE = inline_serializer(
    "DeskMessage",
    {
        "id": serializers.IntegerField(),
        "role": serializers.ChoiceField(choices=["user", "assistant", "human", "note"]),
        "agent": serializers.CharField(),
        "content": serializers.CharField(),
        "author": AUTHOR,
        "created_at": serializers.DateTimeField(),
    },
)
ESCALATION_LIST = inline_serializer(
    "DeskEscalationList",
    {
        "escalations": serializers.ListField(child=ESCALATION),
        "next": serializers.CharField(allow_null=True, help_text="The next page's path, or null on the last page."),
    },
)
ESCALATION_DETAIL = inline_serializer(
    "DeskEscalationDetail",
    {
        "escalation": ESCALATION,
        "conversation": inline_serializer(
            "DeskConversation",
            {
                "conversation_key": serializers.CharField(),
                "user_id": serializers.CharField(),
                "channel": serializers.CharField(),
                "state": serializers.CharField(),
                "active_specialist": serializers.CharField(),
                "active_intent": serializers.CharField(),
            },
        ),
        "messages": serializers.ListField(child=MESSAGE),
        "route_decisions": serializers.ListField(child=serializers.DictField()),
    },
)


# -- bodies ------------------------------------------------------------------------------------------------------------


class PersonInputSerializer(KnownFieldsSerializer):
    name = StrictCharField(max_length=150, help_text="What the customer reads as the author.")
    id = StrictCharField(max_length=200, required=False, allow_blank=True, help_text="Your desk's id for the person.")


class PersonBodySerializer(KnownFieldsSerializer):
    """``person`` names who acts: required with an API key; a session acts as its user and leaves it out."""

    person = PersonInputSerializer(
        required=False, help_text="Who writes (an API key: required; a staff session writes as its user)."
    )


class TextBodySerializer(PersonBodySerializer):
    text = StrictCharField(trim_whitespace=False, allow_blank=True, max_length=None)


class TransferBodySerializer(PersonBodySerializer):
    team = StrictCharField(max_length=40, help_text="One of the profile's teams.")
    priority = serializers.ChoiceField(choices=PRIORITIES, required=False, help_text="Keeps its own when left out.")
    note = StrictCharField(max_length=NOTE_MAX_CHARS, required=False, allow_blank=True, default="")


class HandBackBodySerializer(PersonBodySerializer):
    note = StrictCharField(max_length=NOTE_MAX_CHARS, required=False, allow_blank=True, default="")


class ListQuerySerializer(KnownFieldsSerializer):
    status = serializers.ChoiceField(
        choices=LIST_STATUSES,
        required=False,
        default=LIST_OPEN,
        help_text="open (queued and assigned: the default), or one status.",
    )
    team = StrictCharField(max_length=40, required=False, allow_blank=True, default="")
    profile = StrictCharField(max_length=64, required=False, allow_blank=True, default="", help_text="An agent_id.")
    cursor = StrictCharField(max_length=400, required=False, allow_blank=True, default="")
    limit = serializers.IntegerField(min_value=1, max_value=LIST_LIMIT_MAX, required=False, default=LIST_LIMIT)


def _body(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def _person(request: Request, data: dict[str, Any]) -> Person:
    """Who acts: the key's named person, or the session's user (who names nobody else)."""
    if not isinstance(request.user, ApiClient) and "person" in data:
        raise DomainError(ERROR_PERSON_SESSION, fields={"person": [ERROR_PERSON_SESSION]})
    return person_for(request.user, data.get("person"))


def _shown(escalation: Escalation) -> dict[str, Any]:
    return escalation_for_desk(escalation, where=where_of(escalation), position=queue_position(escalation))


def _fresh(escalation_id: Any) -> dict[str, Any]:
    return _shown(escalation_get(escalation_id=escalation_id))


PERSON_EXAMPLE = {"name": "Ana", "id": "agent-4711"}
ACTION_ERRORS = error_responses(400, 401, 403, 404, 409, 413, 415, 429, 503)


# -- the routes --------------------------------------------------------------------------------------------------------


class EscalationsApi(APIView):
    """``GET /api/escalations``: the escalations the caller may answer."""

    permission_classes = [IsDeskClient]

    @extend_schema(
        operation_id="escalations_list",
        summary="The escalations you may answer: the queue, in serving order",
        description=(
            "An answering API key lists its tenant's escalations; a staff session those of the tenants over which it "
            "holds the answer right. By default the open ones (`queued` and `assigned`) in serving order: urgent "
            "first, then the time each was queued (`position` is its place in its team's queue). `status=returned` or "
            "`closed` lists ended ones, newest first. Filters: `team`, `profile` (an agent_id). Pages of `limit` "
            "(default 50, at most 200); `next` is the path of the next page (null on the last)."
        ),
        parameters=[ListQuerySerializer],
        responses={200: ESCALATION_LIST, **error_responses(400, 401, 403, 429, 503)},
    )
    def get(self, request: Request) -> Response:
        query = ListQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        data = query.validated_data
        profile_id = None
        if data["profile"]:
            profile_id = profile_pk(data["profile"])
            if profile_id is None:
                message = ERROR_UNKNOWN_PROFILE.format(profile=data["profile"])
                raise DomainError(message, fields={"profile": [message]})
        after = list_after(data["cursor"], status=data["status"]) if data["cursor"] else None
        page, key = escalation_list(
            tenant_ids=desk_tenant_ids(request.user),
            status=data["status"],
            team=data["team"],
            profile_id=profile_id,
            after=after,
            limit=data["limit"],
        )
        places = positions(page)
        shown = [escalation_for_desk(item, where=where_of(item), position=places.get(item.pk)) for item in page]
        next_page = None
        if key is not None:
            query_params = request.query_params.copy()
            query_params["cursor"] = list_cursor(key)
            next_page = f"{request.path}?{query_params.urlencode()}"
        return Response({"escalations": shown, "next": next_page})


class EscalationApi(APIView):
    """``GET /api/escalations/{id}``: one escalation with its conversation."""

    permission_classes = [IsDeskClient]

    @extend_schema(
        operation_id="escalation_retrieve",
        summary="An escalation with its conversation: messages (notes included) and routing decisions",
        description=(
            "The escalation (its `summary` first), the conversation's live state, its last "
            f"{DETAIL_MESSAGES} messages oldest first — the customer's, the assistants', the people's replies and "
            "their internal notes (`role` `note`, never shown to the customer), each with its `author` — and its "
            "routing decisions. Another tenant's escalation, or one a key may not answer, is a 404."
        ),
        parameters=[ID_PARAMETER],
        responses={200: ESCALATION_DETAIL, **error_responses(401, 403, 404, 429, 503)},
    )
    def get(self, request: Request, escalation_id: str) -> Response:
        escalation = escalation_for(request.user, escalation_id)
        conversation = escalation.conversation
        return Response(
            {
                "escalation": _shown(escalation),
                "conversation": {
                    "conversation_key": conversation.conversation_key,
                    "user_id": conversation.user_id,
                    "channel": conversation.channel,
                    "state": conversation.state,
                    "active_specialist": conversation.active_specialist,
                    "active_intent": conversation.active_intent,
                },
                "messages": desk_history(conversation_id=conversation.pk, limit=DETAIL_MESSAGES),
                "route_decisions": desk_route_decisions(conversation_id=conversation.pk),
            }
        )


class EscalationTakeApi(APIView):
    permission_classes = [IsDeskClient]

    @extend_schema(
        operation_id="escalation_take",
        summary="Take a waiting escalation: it leaves the queue and is this person's",
        description=(
            "The customer is told who answers them now. Taking one's own again changes nothing; one someone else took "
            "first, or that ended, is a 409 naming who has it."
        ),
        parameters=[ID_PARAMETER],
        request=PersonBodySerializer,
        responses={200: ESCALATION, **ACTION_ERRORS},
        examples=[OpenApiExample("A person of your desk", value={"person": PERSON_EXAMPLE}, request_only=True)],
    )
    def post(self, request: Request, escalation_id: str) -> Response:
        escalation = escalation_for(request.user, escalation_id)
        person = _person(request, _body(PersonBodySerializer, request))
        return Response(_shown(escalation_take(escalation_id=escalation.pk, person=person)))


class EscalationMessagesApi(APIView):
    permission_classes = [IsDeskClient]

    @extend_schema(
        operation_id="escalation_reply",
        summary="Reply to the customer as a person",
        description=(
            "Stored as a message of role `human` with its `author` (kind `human`, the person's name and id) and "
            "pushed at once to the customer's socket or event stream. A reply to an escalation still in line takes "
            "it first; one another person holds, or that ended, is a 409. Empty text, or text over the answer "
            "limit, is a 400 naming `text`."
        ),
        parameters=[ID_PARAMETER],
        request=TextBodySerializer,
        responses={201: MESSAGE, **ACTION_ERRORS},
        examples=[
            OpenApiExample(
                "A reply",
                value={"text": "Olá, sou a Ana. Vou verificar sua fatura.", "person": PERSON_EXAMPLE},
                request_only=True,
            )
        ],
    )
    def post(self, request: Request, escalation_id: str) -> Response:
        escalation = escalation_for(request.user, escalation_id)
        data = _body(TextBodySerializer, request)
        message = desk_reply(escalation_id=escalation.pk, person=_person(request, data), text=data["text"])
        return Response(message_public(message), status=201)


class EscalationNotesApi(APIView):
    permission_classes = [IsDeskClient]

    @extend_schema(
        operation_id="escalation_note",
        summary="Write an internal note on the conversation (never shown to the customer)",
        description="Stored as a message of role `note`: the desks see it, the customer never does.",
        parameters=[ID_PARAMETER],
        request=TextBodySerializer,
        responses={201: MESSAGE, **ACTION_ERRORS},
    )
    def post(self, request: Request, escalation_id: str) -> Response:
        escalation = escalation_for(request.user, escalation_id)
        data = _body(TextBodySerializer, request)
        message = desk_note(escalation_id=escalation.pk, person=_person(request, data), text=data["text"])
        return Response(message_public(message), status=201)


class EscalationTransferApi(APIView):
    permission_classes = [IsDeskClient]

    @extend_schema(
        operation_id="escalation_transfer",
        summary="Send the escalation to another team's queue",
        description=(
            "Back in line, unassigned, in `team`'s queue (one of the profile's teams: another is a 400 naming `team`),"
            " keeping the time it was first queued; `priority` changes its priority, `note` is left for the next "
            "person. The customer is told their new place."
        ),
        parameters=[ID_PARAMETER],
        request=TransferBodySerializer,
        responses={200: ESCALATION, **ACTION_ERRORS},
        examples=[
            OpenApiExample(
                "To billing, urgent",
                value={"team": "billing", "priority": "urgent", "note": "Double charge.", "person": PERSON_EXAMPLE},
                request_only=True,
            )
        ],
    )
    def post(self, request: Request, escalation_id: str) -> Response:
        escalation = escalation_for(request.user, escalation_id)
        data = _body(TransferBodySerializer, request)
        priority = EscalationPriority[data["priority"].upper()] if data.get("priority") else None
        moved = escalation_transfer(
            escalation_id=escalation.pk,
            person=_person(request, data),
            team=data["team"],
            priority=priority,
            note=data["note"],
        )
        return Response(_fresh(moved.pk))


class EscalationHandBackApi(APIView):
    permission_classes = [IsDeskClient]

    @extend_schema(
        operation_id="escalation_hand_back",
        summary="Hand the conversation back to the assistants",
        description=(
            "The escalation ends (`returned`); the customer's next message is routed by the assistants again. "
            "`note` is kept as an internal note and in the handoff's summary."
        ),
        parameters=[ID_PARAMETER],
        request=HandBackBodySerializer,
        responses={200: ESCALATION, **ACTION_ERRORS},
    )
    def post(self, request: Request, escalation_id: str) -> Response:
        escalation = escalation_for(request.user, escalation_id)
        data = _body(HandBackBodySerializer, request)
        ended = escalation_hand_back(escalation_id=escalation.pk, person=_person(request, data), note=data["note"])
        return Response(_fresh(ended.pk))
