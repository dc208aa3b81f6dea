"""``POST /api/profiles/{agent_id}/conversation-tests/runs`` and ``GET …/runs/{id}``: run a profile's saved
conversation tests against a version from CI or a script, and read the run back (:mod:`releases.evals.runs`).

Who may: a debug key (for its own tenant), or a staff session holding the debug right over the tenant it names in
``tenant`` — as the debug routes check it, tenant by tenant. A run belongs to the tenant that asked: another tenant's
is a 404. The tests play in isolation (nothing reaches the tenant's conversations, analytics or usage); the run's
model usage is kept on the run."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.models import AgentProfile
from agents.public import ERROR_UNKNOWN_PROFILE
from chat.intake import tenant_resolve
from chat.permissions import IsDebugClient
from common.errors import DomainError, NotFound, error_responses
from releases.models import ConversationTestRun, ConversationTestRunSource, ConversationTestRunStatus
from releases.public import conversation_test_run_start, run_report
from tenants.models import TenantRight
from tenants.public import ApiClient

BODY_KEYS = ("version", "names", "compare", "tenant")
ERROR_BODY = "The body must be a JSON object."
ERROR_UNKNOWN_KEY = "Unknown key: it takes {keys}."
ERROR_TEXT = "Must be a string."
ERROR_NAMES = "Must be a list of strings."
ERROR_UNKNOWN_RUN = "No run {run_id} of {agent_id} for this tenant."

RUN_REQUEST = inline_serializer(
    "ConversationTestRunRequest",
    {
        "version": serializers.CharField(
            required=False, help_text='draft (default), live, or a published version\'s number as a string ("3").'
        ),
        "names": serializers.ListField(
            child=serializers.CharField(), required=False, help_text="Only these tests (default: every enabled one)."
        ),
        "compare": serializers.CharField(
            required=False,
            help_text="Play the tests against this version too (draft, live or a number): each result then has "
            "`compared`, with both sides and the answers that changed.",
        ),
        "tenant": serializers.CharField(required=False, help_text="Staff sessions: the tenant's slug."),
    },
)
RUN_RESPONSE = inline_serializer(
    "ConversationTestRun",
    {
        "id": serializers.IntegerField(),
        "profile": serializers.CharField(),
        "version": serializers.CharField(),
        "version_number": serializers.IntegerField(allow_null=True, help_text="null: the draft."),
        "compared_with": serializers.CharField(allow_null=True),
        "names": serializers.ListField(child=serializers.CharField()),
        "source": serializers.CharField(),
        "status": serializers.ChoiceField(choices=ConversationTestRunStatus.values),
        "total": serializers.IntegerField(),
        "done": serializers.IntegerField(help_text="Tests played so far."),
        "passed": serializers.IntegerField(),
        "failed": serializers.IntegerField(),
        "required_failed": serializers.IntegerField(help_text="Failed tests that would block a publish."),
        "changed": serializers.IntegerField(
            required=False, help_text="With compare: tests whose result or answers differ."
        ),
        "created_at": serializers.DateTimeField(),
        "started_at": serializers.DateTimeField(allow_null=True),
        "finished_at": serializers.DateTimeField(allow_null=True),
        "error": serializers.CharField(required=False, help_text="Why the run could not be played."),
        "results": serializers.ListField(
            child=serializers.DictField(),
            required=False,
            help_text="Once finished, failures first: each test's name, required, passed, runs, pass_rate, failures "
            "(each failed check in a line), error, turns (each turn's answer, agent, decision, state, tools, "
            "handoffs, failures, judge) and, with compare, compared.",
        ),
        "usage": serializers.DictField(required=False, help_text="The model calls of the run's turns and judges."),
        "coverage": serializers.DictField(
            required=False,
            help_text="Per area (intents, goals, flows, tools, languages, repairs): what the profile has, what the "
            "suite exercised, what it missed.",
        ),
    },
)
QUEUED_RESPONSE = inline_serializer(
    "ConversationTestRunQueued",
    {"id": serializers.IntegerField(), "status": serializers.CharField(), "url": serializers.CharField()},
)
TENANT_PARAMETER = OpenApiParameter("tenant", OpenApiTypes.STR, description="Staff sessions: the tenant's slug.")


def _profile(agent_id: str) -> AgentProfile:
    profile = AgentProfile.objects.filter(agent_id=agent_id).first()
    if profile is None:
        message = ERROR_UNKNOWN_PROFILE.format(profile=agent_id)
        raise NotFound(message, fields={"agent_id": [message]})
    return profile


def _body(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise DomainError(ERROR_BODY, fields={"body": [ERROR_BODY]})
    for key in data:
        if key not in BODY_KEYS:
            message = ERROR_UNKNOWN_KEY.format(keys=", ".join(BODY_KEYS))
            raise DomainError(f"{key}: {message}", fields={str(key): [message]})
    for key in ("version", "compare", "tenant"):
        if key in data and not isinstance(data[key], str):
            raise DomainError(f"{key}: {ERROR_TEXT}", fields={key: [ERROR_TEXT]})
    names = data.get("names", [])
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise DomainError(f"names: {ERROR_NAMES}", fields={"names": [ERROR_NAMES]})
    return data


class ConversationTestRunsApi(APIView):
    permission_classes = [IsDebugClient]

    @extend_schema(
        summary="Run a profile's conversation tests against a version",
        description=(
            "Plays the profile's enabled saved conversation tests (or those named) against its draft, its live "
            "version or a published version, each in isolation, and keeps the run. A suite small enough is played "
            "at once: 200 with the run's results, failures first. A large one, where a worker runs them, is queued: "
            "202 with the run's id and the URL to GET. A failed test is a 200 (its results say it); a debug key "
            "runs for its own tenant, a staff session names one it holds the debug right over in `tenant`."
        ),
        request=RUN_REQUEST,
        responses={200: RUN_RESPONSE, 202: QUEUED_RESPONSE, **error_responses(400, 401, 403, 404, 413, 415, 429, 503)},
        examples=[
            OpenApiExample("Draft against live", value={"version": "draft", "compare": "live"}, request_only=True)
        ],
    )
    def post(self, request, agent_id: str):
        body = _body(request.data)
        tenant = tenant_resolve(
            principal=request.user,
            tenant_slug=str(body.get("tenant") or ""),
            field_name="tenant",
            right=TenantRight.DEBUG,
        )
        run = conversation_test_run_start(
            profile=_profile(agent_id),
            source=ConversationTestRunSource.API,
            version=body.get("version", "draft"),
            names=body.get("names") or [],
            compare=body.get("compare", ""),
            started_by=None if isinstance(request.user, ApiClient) else request.user,
            tenant=tenant,
        )
        if run.status == ConversationTestRunStatus.QUEUED:
            url = request.build_absolute_uri(f"{request.path.rstrip('/')}/{run.pk}")
            return Response({"id": run.pk, "status": run.status, "url": url}, status=status.HTTP_202_ACCEPTED)
        return Response(run_report(run))


class ConversationTestRunApi(APIView):
    permission_classes = [IsDebugClient]

    @extend_schema(
        summary="A run of a profile's conversation tests: its progress, then its results",
        description="While it runs, its status and progress (`done` of `total`); once finished, what the POST answers.",
        parameters=[TENANT_PARAMETER],
        responses={200: RUN_RESPONSE, **error_responses(400, 401, 403, 404, 429, 503)},
    )
    def get(self, request, agent_id: str, run_id: int):
        tenant = tenant_resolve(
            principal=request.user,
            tenant_slug=request.query_params.get("tenant", ""),
            field_name="tenant",
            right=TenantRight.DEBUG,
        )
        profile = _profile(agent_id)
        run = ConversationTestRun.objects.filter(pk=run_id, profile=profile, tenant=tenant).first()
        if run is None:
            message = ERROR_UNKNOWN_RUN.format(run_id=run_id, agent_id=agent_id)
            raise NotFound(message, fields={"run_id": [message]})
        return Response(run_report(run))
