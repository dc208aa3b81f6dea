"""The shape of what :func:`conversations.selectors.usage_report` answers, for the APIs that answer it: the debug
usage API (``chat/usage_apis.py``) and the analytics' usage API, which document it in their OpenAPI schema."""

from __future__ import annotations

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

_TOKENS: dict[str, serializers.Field] = {
    "answers": serializers.IntegerField(),
    "prompt_tokens": serializers.IntegerField(),
    "completion_tokens": serializers.IntegerField(),
    "total_tokens": serializers.IntegerField(),
    "cost": serializers.FloatField(allow_null=True, help_text="null: the model has no price (unpriced_models)."),
    "currency": serializers.CharField(allow_blank=True),
}
USAGE_ROW = inline_serializer(
    "UsageRow",
    {
        "tenant": serializers.CharField(),
        "profile": serializers.CharField(),
        "day": serializers.DateField(),
        "model": serializers.CharField(),
        "purpose": serializers.CharField(
            help_text="conversation: customers' turns; else work outside them (publish_gate, routing_tests, "
            "route_preview, impact_preview, debug), whose answers are 0."
        ),
        **_TOKENS,
    },
    many=True,
)
# What usage_report answers.
USAGE_FIELDS: dict[str, serializers.Field] = {
    "totals": inline_serializer(
        "UsageTotals", {**_TOKENS, "cost_by_currency": serializers.DictField(child=serializers.FloatField())}
    ),
    "rows": USAGE_ROW,
    "unpriced_models": serializers.ListField(child=serializers.CharField()),
}
USAGE_DESCRIPTION = (
    "Answers written by a model, with the tokens every model call of their turns reported (prompt and completion), "
    "per profile, UTC day and the model that made the calls (a routing model of its own has its own row, answers 0 "
    "on a day it answered nothing), newest day first; and the tokens of model calls made outside a turn, under "
    "their purpose (the publish gate's routing tests, routing tests run by hand, previews: the operators', read "
    "with every tenant; debug calls: the asking tenant's). cost = prompt_tokens × prompt price + "
    "completion_tokens × completion price, per million tokens (the admin's model prices), computed when read: a "
    "price edited re-prices the past. A model with no price has cost null and is listed in unpriced_models; "
    "totals.cost adds up the priced rows when their prices share one currency (else null; cost_by_currency has "
    "each)."
)
