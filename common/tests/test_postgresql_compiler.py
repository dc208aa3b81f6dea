"""The PostgreSQL backend inserts a few rows as VALUES rows and many through UNNEST
(common/infra/postgresql/compiler.py)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from common.infra.postgresql.compiler import VALUES_ROWS
from conversations.models import Conversation, Message
from tests.stock_paths import fast_path_only

pytestmark = pytest.mark.django_db


@pytest.fixture
def conversation(tenant, telecom):
    if connection.vendor != "postgresql":
        pytest.skip("the backend's compiler is PostgreSQL's")
    return Conversation.objects.create(conversation_key="tenant_a:telecom_contas:s", tenant=tenant, profile=telecom)


def inserted(conversation, rows: int) -> tuple[str, list[Message]]:
    messages = [Message(conversation=conversation, role="user", content=f"m{n}") for n in range(rows)]
    with CaptureQueriesContext(connection) as queries:
        Message.objects.bulk_create(messages)
    (sql,) = [query["sql"] for query in queries if query["sql"].startswith("INSERT")]
    return sql, messages


@fast_path_only
def test_a_turns_few_messages_are_inserted_as_values_rows_with_their_ids_in_order(conversation):
    sql, messages = inserted(conversation, 3)

    assert "UNNEST" not in sql
    assert sql.count("), (") == 2  # three VALUES rows
    assert [m.pk for m in messages] == sorted(m.pk for m in messages)
    assert list(Message.objects.order_by("id").values_list("content", flat=True)) == ["m0", "m1", "m2"]


def test_many_rows_still_go_through_unnest(conversation):
    sql, messages = inserted(conversation, VALUES_ROWS + 1)

    assert "UNNEST" in sql
    assert Message.objects.count() == VALUES_ROWS + 1
    assert all(m.pk for m in messages)
