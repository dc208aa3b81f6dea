"""JSON by orjson where it is encoded per message (common/infra/fastjson.py, common/infra/renderers.py, the jsonb
values)."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid

import pytest
from django.utils import timezone
from django.utils.translation import gettext_lazy
from rest_framework import renderers

from common.infra import fastjson
from common.infra.renderers import JSONRenderer

METADATA = {
    "mode": "router",
    "route_decision": {"agent": "billing_agent", "confidence": 0.87, "scores": [1, 2.5, None, True]},
    "trace": [{"node": "input_guardrails", "ms": 0.013}, {"node": "persist", "ms": 5.1}],
    "answer": "Faturas e pagamentos (offline model): você disse “olá” — ñ, 日本",
    7: "a number as a key",
}


def test_it_encodes_what_json_encodes_as_json_reads_it_back():
    assert json.loads(fastjson.dumps(METADATA)) == json.loads(json.dumps(METADATA))


def test_an_integer_beyond_64_bits_falls_back_to_the_standard_library():
    value = {"n": 2**70, "text": "ç"}

    assert json.loads(fastjson.dumps(value)) == value


def test_the_renderer_writes_what_drfs_writes_for_datetimes_decimals_lazy_text_and_ids():
    data = {
        "at": dt.datetime(2026, 11, 24, 1, 2, 3, 456789, tzinfo=dt.UTC),
        "local": timezone.localtime(dt.datetime(2026, 11, 24, 1, 2, 3, tzinfo=dt.UTC)),
        "day": dt.date(2026, 11, 24),
        "price": decimal.Decimal("289.90"),
        "label": gettext_lazy("Enter a valid value."),
        "id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        **{str(key): value for key, value in METADATA.items()},
    }

    ours = JSONRenderer().render(data)
    theirs = renderers.JSONRenderer().render(data)

    assert json.loads(ours) == json.loads(theirs)
    assert b'"2026-11-24T01:02:03.456789Z"' in ours  # DRF's ISO form, Z for UTC


def test_line_and_paragraph_separators_are_escaped_as_drf_escapes_them():
    rendered = JSONRenderer().render({"text": "a\u2028b\u2029c"})

    assert rendered == renderers.JSONRenderer().render({"text": "a\u2028b\u2029c"}) == b'{"text":"a\\u2028b\\u2029c"}'


def test_an_indented_rendering_is_drfs_own():
    rendered = JSONRenderer().render({"a": [1]}, "application/json; indent=2")

    assert rendered == renderers.JSONRenderer().render({"a": [1]}, "application/json; indent=2")
    assert b"\n" in rendered


@pytest.mark.django_db
def test_a_jsonb_value_orjson_cannot_encode_is_stored_all_the_same(tenant, telecom):
    from conversations.models import Conversation

    conversation = Conversation.objects.create(
        conversation_key="tenant_a:telecom_contas:big", tenant=tenant, profile=telecom, goal_state={"n": 2**70}
    )

    conversation.refresh_from_db()
    assert conversation.goal_state == {"n": 2**70}
