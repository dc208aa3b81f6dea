"""Feedback on an answer: up or down, with a comment."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_field, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from chat.intake import KnownFieldsSerializer, StrictCharField
from chat.openai.turns import TURN_ID_PATTERN, TurnRef, turn_ref_read
from chat.rest.sessions import conversation_for
from common.errors import error_responses
from conversations.models import FEEDBACK_COMMENT_MAX_LENGTH, Conversation, FeedbackRating
from conversations.public import (
    ERROR_INVALID_MESSAGE,
    ERROR_NOT_AN_ANSWER,
    NotAnAnswer,
    answer_of_turn,
    escalation_public,
    feedback_give,
)
from tenants.models import TenantRight
from tenants.public import ApiClient

ERROR_ANSWER_ID = "Must be an answer's message_id, or a completion's or response's id (chatcmpl-…, resp_…)."


@extend_schema_field(
    {
        "oneOf": [
            {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
            {"type": "string", "pattern": TURN_ID_PATTERN},
        ]
    }
)
class AnswerIdField(serializers.Field):
    """An answer: its ``message_id``, or the id an OpenAI-compatible face gave it (``chatcmpl-…``, ``resp_…``,
    ``msg_…``: :mod:`chat.openai.turns`), read as the turn it names."""

    default_error_messages = {"invalid": ERROR_ANSWER_ID}

    def to_internal_value(self, data: Any) -> int | TurnRef:
        # A whole number written 43.0 is an integer as JSON Schema reads one: the A2A face's metadata is a protobuf
        # Struct, whose numbers are all doubles, so its message_id reaches a client so.
        if isinstance(data, float) and data.is_integer() and 1 <= data <= 2**63 - 1:
            data = int(data)
        if isinstance(data, int) and not isinstance(data, bool) and 1 <= data <= 2**63 - 1:
            return data
        ref = turn_ref_read(data) if isinstance(data, str) else None
        if ref is None:
            self.fail("invalid")
        return ref

    def to_representation(self, value: Any) -> Any:
        return value


class FeedbackInputSerializer(KnownFieldsSerializer):
    """``{message_id, rating: "up"|"down", comment?}``: one answer of the conversation, rated."""

    message_id = AnswerIdField(
        help_text="The answer rated: `message_id` of the message POST's answer (or of the stream's `done` event), or "
        "the `id` of an OpenAI-compatible completion or response (`chatcmpl-…`, `resp_…`).",
    )
    rating = serializers.ChoiceField(choices=FeedbackRating.values, help_text="up: helpful; down: not helpful.")
    comment = StrictCharField(
        max_length=FEEDBACK_COMMENT_MAX_LENGTH,
        required=False,
        allow_blank=True,
        default="",
        help_text="Optional: what was wrong or right.",
    )


FEEDBACK_RESPONSE = inline_serializer(
    "Feedback",
    {
        "conversation_key": serializers.CharField(),
        "message_id": serializers.IntegerField(),
        "rating": serializers.ChoiceField(choices=FeedbackRating.values),
        "comment": serializers.CharField(allow_blank=True),
        "replaced": serializers.BooleanField(help_text="True: this answer had a rating, which this one replaced."),
        "cohort": serializers.CharField(allow_blank=True),
        "routing_version": serializers.IntegerField(allow_null=True),
        "created_at": serializers.DateTimeField(),
        "updated_at": serializers.DateTimeField(),
        "escalation": inline_serializer(
            "FeedbackEscalation",
            {
                "id": serializers.UUIDField(),
                "status": serializers.CharField(),
                "queue": serializers.CharField(),
                "position": serializers.IntegerField(allow_null=True),
                "reason": serializers.CharField(),
                "priority": serializers.CharField(),
                "desk": serializers.CharField(),
                "person": serializers.CharField(allow_null=True),
            },
            allow_null=True,
            help_text="The rating handed the conversation to a person (the profile's escalation.on_thumbs_down): "
            "its escalation as the conversation's metadata.escalation shows it; null otherwise.",
        ),
    },
)


def _answer_pk(conversation: Conversation, answer: int | TurnRef) -> int:
    """The number of the answer a feedback names; a turn of another conversation, or one that stored no answer, is
    refused as any id that names no answer of the conversation."""
    if isinstance(answer, int):
        return answer
    same = answer.conversation_pk == conversation.pk
    message = answer_of_turn(conversation_pk=conversation.pk, turn=answer.turn) if same else None
    if message is None:
        raise NotAnAnswer(ERROR_INVALID_MESSAGE, fields={"message_id": [ERROR_NOT_AN_ANSWER]})
    return message.pk


class SessionFeedbackApi(APIView):
    """``POST /api/sessions/{conversation_key}/feedback``: a user's rating of one answer of the conversation."""

    @extend_schema(
        summary="Rate an answer of the conversation: up or down, with an optional comment",
        description=(
            "`message_id` names an answer of this conversation (the message routes answer it as `message_id`, "
            "the streams in their `done` event). One rating per answer: rating it again replaces the rating and "
            "the comment (200; the first rating answers 201). The rating keeps the answer's cohort and routing "
            "version, which `GET /api/analytics/feedback` counts. An API key rates its own tenant's conversations; "
            "a staff session those of a tenant it may chat as (tenants.act_for_tenant). Another tenant's "
            "conversation is a 404, as an unknown key; a `message_id` that is no answer of this conversation is a "
            "400 naming it. A rating down hands the conversation to a person when its profile says so "
            "(`escalation.on_thumbs_down`) and nobody holds it yet: `escalation` is then its place in the queue "
            "(null otherwise)."
        ),
        request=FeedbackInputSerializer,
        responses={
            201: FEEDBACK_RESPONSE,
            200: FEEDBACK_RESPONSE,
            **error_responses(400, 401, 403, 404, 413, 415, 429, 503),
        },
        examples=[
            OpenApiExample(
                "Not helpful",
                value={"message_id": 42, "rating": "down", "comment": "It did not answer my question."},
                request_only=True,
            )
        ],
    )
    def post(self, request, conversation_key: str):
        conversation = conversation_for(request, conversation_key, right=TenantRight.ACT)
        serializer = FeedbackInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        user = request.user
        given = feedback_give(
            conversation=conversation,
            message_id=_answer_pk(conversation, data["message_id"]),
            rating=data["rating"],
            comment=data["comment"],
            user_id=conversation.user_id,
            staff_user_id=None if isinstance(user, ApiClient) else user.pk,
        )
        feedback = given.feedback
        return Response(
            {
                "conversation_key": conversation.conversation_key,
                "message_id": feedback.message_id,
                "rating": feedback.rating,
                "comment": feedback.comment,
                "replaced": not given.created,
                "cohort": feedback.cohort,
                "routing_version": feedback.routing_version,
                "created_at": feedback.created_at,
                "updated_at": feedback.updated_at,
                "escalation": (
                    escalation_public(given.escalation, position=given.position) if given.escalation else None
                ),
            },
            status=201 if given.created else 200,
        )
