"""``GET /api/analytics/feedback``: users' ratings of answers per cohort and per routing version (seed 003's A/B
phase), counted by :func:`conversations.feedback.feedback_rates`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from analytics.apis import ERRORS, FILTER_PARAMETERS, AnalyticsApi
from conversations.feedback import FeedbackRate, feedback_rates


def _order(group: Any) -> tuple[bool, Any]:
    """Cohorts by name, versions by number, ``None`` (a draft's version) last."""
    return (group is None, group or (0 if isinstance(group, int) else ""))


def feedback_summary(rates: Iterable[FeedbackRate]) -> dict[str, Any]:
    """The window's figures per (cohort, version) pair, merged per cohort, per version and in total."""
    pairs = list(rates)

    def merged(key: str | None) -> list[dict[str, Any]]:
        groups: dict[Any, list[int]] = {}
        for rate in pairs:
            group = getattr(rate, key) if key else None
            figures = groups.setdefault(group, [0, 0, 0])
            figures[0] += rate.answers
            figures[1] += rate.up
            figures[2] += rate.down
        return [
            FeedbackRate(answers=answers, up=up, down=down, **({key: group} if key else {})).as_dict()
            for group, (answers, up, down) in sorted(groups.items(), key=lambda item: _order(item[0]))
        ]

    total = merged(None) or [FeedbackRate(answers=0, up=0, down=0).as_dict()]
    return {
        "total": total[0],
        "cohorts": merged("cohort"),
        "versions": merged("routing_version"),
        "pairs": [rate.as_dict() for rate in pairs],
    }


def _rate(name: str) -> serializers.Serializer:
    return inline_serializer(
        name,
        {
            "cohort": serializers.CharField(allow_null=True, allow_blank=True),
            "routing_version": serializers.IntegerField(allow_null=True),
            "answers": serializers.IntegerField(),
            "rated": serializers.IntegerField(),
            "up": serializers.IntegerField(),
            "down": serializers.IntegerField(),
            "negative_rate_percentage": serializers.FloatField(allow_null=True),
        },
        many=name != "FeedbackTotal",
    )


FEEDBACK_RESPONSE = inline_serializer(
    "FeedbackAnalytics",
    {
        "total": _rate("FeedbackTotal"),
        "cohorts": _rate("FeedbackByCohort"),
        "versions": _rate("FeedbackByVersion"),
        "pairs": _rate("FeedbackByCohortAndVersion"),
    },
)


class FeedbackApi(AnalyticsApi):
    @extend_schema(
        summary="Users' feedback on answers per cohort and per routing version: answers, up, down, negative rate",
        description=(
            "Answers given in the window (assistant messages) and the ratings they got (POST "
            "/api/sessions/{conversation_key}/feedback), counted by when the answer was given. `rated` = up + down; "
            "`negative_rate_percentage` = 100 × down / rated, 2 decimals (null when nothing was rated). `cohorts`: "
            "per side of the multi_agent flag (multi_agent, single_agent, blank: not decided); `versions`: per "
            "published routing version (null: a draft, or a profile never published); `pairs`: per cohort and "
            "version; `total`: everything. In `cohorts` the version is null, in `versions` the cohort is."
        ),
        parameters=FILTER_PARAMETERS,
        responses={200: FEEDBACK_RESPONSE, **ERRORS},
    )
    def get(self, request):
        filters = self.filters(request)
        rates = feedback_rates(
            start=filters.start, end=filters.end, tenant_id=filters.tenant_id, profile_id=filters.profile_id
        )
        return Response(feedback_summary(rates))
