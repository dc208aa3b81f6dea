"""A message body read plainly is read exactly as the serializer reads it (chat.intake.message_read_plain)."""

from __future__ import annotations

import pytest
from django.conf import settings
from hypothesis import HealthCheck, event, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from rest_framework.exceptions import ValidationError

from chat.intake import MessageIn, MessageInputSerializer, message_read, message_read_plain, message_validated


def serializer_read(data) -> MessageIn | None:
    """What the serializer makes of ``data`` (as message_read does with it), or None where it refuses it."""
    serializer = MessageInputSerializer(data=data)
    if not serializer.is_valid():
        return None
    return message_validated(serializer.validated_data)


# Strings around what the fields check: blanks, padding, limits (64 and 200 characters), slugs, refused characters.
texts = st.one_of(
    st.text(max_size=8),
    st.sampled_from(["", " ", "\t\n", "telecom_contas", " telecom_contas ", "tenant-a", "web 001", "Olá!", "ç"]),
    st.sampled_from(["a\x00b", "a\ud800b", "\ud83d", "x" * 63, "x" * 64, "x" * 65, "y" * 199, "y" * 200, "y" * 201]),
    st.builds(lambda core, pad: pad + core + pad, st.sampled_from(["x" * 64, "y" * 200, "z"]), st.sampled_from(" \t")),
)
scalars = st.one_of(texts, st.integers(), st.booleans(), st.none(), st.floats(allow_nan=False))
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3)
)
# Bodies the serializer takes, each field drawn from values near its limits; then each of them with one field
# replaced by any value (or one field too many): where the two readings could part.
slugs = st.sampled_from(["telecom_contas", "retail-orders", " tenant_a ", "x" * 64, "a", "Agent_9"])
words = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), min_size=1, max_size=12)
words = words.filter(str.strip) | st.sampled_from(["web-001", " u1 ", "y" * 200, " " + "y" * 200 + " "])
context_keys = st.sampled_from(["msisdn", "invoice_id", "order_id"])
small_contexts = st.dictionaries(context_keys, words | st.integers(), max_size=3)
contexts = st.one_of(
    small_contexts,
    st.dictionaries(texts, json_values, max_size=4),
    st.just({"blob": "x" * settings.API_MAX_CONTEXT_BYTES}),
    st.just({"blob": "x" * (settings.API_MAX_CONTEXT_BYTES - 11)}),  # {"blob":"…"} is 11 bytes more: at the limit
    json_values,
)
valid_payloads = st.fixed_dictionaries(
    {"text": words},
    optional={
        "session_id": words,
        "user_id": words | st.sampled_from(["", "  "]),
        "channel_id": words | st.just(""),
        "context": small_contexts,
    },
)
valid_bodies = st.fixed_dictionaries(
    {"agent_id": slugs, "payload": valid_payloads},
    optional={"channel": st.sampled_from(["web", " whatsapp ", "x" * 64]), "tenant_id": slugs},
)


@st.composite
def changed(draw: st.DrawFn) -> dict:
    """A valid body with one of its fields, or one of its payload's, replaced or added (known or not)."""
    body = draw(valid_bodies)
    target = body if draw(st.booleans()) else body["payload"]
    fields = ["agent_id", "channel", "tenant_id", "payload", "extra"] if target is body else []
    fields = fields or ["text", "session_id", "user_id", "channel_id", "context", "extra"]
    name = draw(st.sampled_from(fields))
    target[name] = draw(contexts if name == "context" else scalars)
    return body


bodies = st.one_of(valid_bodies, changed(), json_values)


@hypothesis_settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies)
def test_a_body_read_plainly_is_one_the_serializer_takes_and_reads_the_same(body):
    plain = message_read_plain(body)

    event("read plainly" if plain is not None else "left to the serializer")
    if plain is not None:
        assert serializer_read(body) == plain


@pytest.mark.parametrize(
    "body",
    [
        {"agent_id": "telecom_contas", "payload": {"text": "Minha fatura veio alta"}},
        {
            "channel": "web",
            "agent_id": "telecom_contas",
            "payload": {
                "text": "  Minha fatura veio alta ",
                "session_id": "web-001",
                "user_id": "u1",
                "context": {"msisdn": "5511999999999", "invoice_id": "INV001"},
            },
        },
        {
            "agent_id": "retail_orders",
            "tenant_id": "tenant_a",
            "payload": {"text": "Olá", "user_id": "", "context": {}},
        },
    ],
)
def test_the_bodies_clients_send_are_read_plainly_as_the_serializer_reads_them(body):
    plain = message_read_plain(body)

    assert plain is not None
    assert plain == serializer_read(body)
    assert message_read(body) == plain


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"agent_id": "telecom_contas", "payload": {"text": "   "}}, "payload"),
        ({"agent_id": "telecom contas", "payload": {"text": "oi"}}, "agent_id"),
        ({"agent_id": "telecom_contas", "payload": {"text": "oi", "sesion_id": "x"}}, "payload"),
        ({"agent_id": "telecom_contas", "payload": {"text": 7}}, "payload"),
    ],
)
def test_a_body_that_is_not_plain_gets_the_serializers_errors(body, field):
    assert message_read_plain(body) is None

    with pytest.raises(ValidationError) as refused:
        message_read(body)

    assert field in refused.value.detail
