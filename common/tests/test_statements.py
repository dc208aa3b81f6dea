"""Django's own INSERT, built to be sent by the caller (common/infra/statements.py)."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections import Counter

import pytest
from django.db import connection
from django.db.models import Field, ForeignKey, JSONField
from django.db.models.expressions import RawSQL
from django.utils.translation import gettext_lazy

from common.infra.statements import SqlValue, db_value, insert_statement, inserted
from conversations.models import Conversation, Message, MessageRole, RouteDecisionRecord, ToolCall
from handoffs.models import Handoff
from tests.stock_paths import fast_path_only

pytestmark = pytest.mark.django_db


@pytest.fixture
def conversation(tenant, telecom):
    return Conversation.objects.create(conversation_key="tenant_a:telecom_contas:s", tenant=tenant, profile=telecom)


def messages(conversation) -> list[Message]:
    return [
        Message(conversation_id=conversation.pk, role="user", content="olá", metadata={"channel": "web"}),
        Message(conversation_id=conversation.pk, role="assistant", content="Oi!", agent="billing_agent", step=0),
    ]


def sent_by_bulk_create(objs: list[Message]) -> list[tuple[str, tuple]]:
    statements = []

    def capture(execute, sql, params, many, context):
        statements.append((sql, tuple(params or ())))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        Message.objects.bulk_create(objs)
    return statements


def comparable(params: tuple | list) -> tuple:
    """Each build's ``auto_now_add`` stamps its own time (SQLite's backend sends it as text); psycopg's JSON wrappers
    compare by identity. Django's own PostgreSQL backend sends a column's values as one array (``UNNEST``)."""
    return tuple(
        comparable(value)
        if isinstance(value, list | tuple)
        else "<time>"
        if isinstance(value, dt.datetime) or (isinstance(value, str) and STAMP.fullmatch(value))
        else getattr(value, "obj", value)
        for value in params
    )


STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?")


@fast_path_only
def test_the_statement_is_the_one_bulk_create_sends(conversation):
    ours = insert_statement(messages(conversation))

    [theirs] = sent_by_bulk_create(messages(conversation))

    assert ours[0] == theirs[0]
    assert comparable(ours[1]) == comparable(theirs[1])
    assert "RETURNING" in ours[0]


def test_sent_and_handed_back_the_rows_are_saved_as_bulk_create_saves_them(conversation):
    objs = messages(conversation)
    with connection.cursor() as cursor:
        cursor.execute(*insert_statement(objs))
        returned = cursor.fetchall()

    inserted(objs, returned)

    assert all(obj.pk and not obj._state.adding and obj._state.db == "default" for obj in objs)
    assert objs[0].created_at is not None  # pre_save ran (auto_now_add)
    stored = Message.objects.in_bulk([obj.pk for obj in objs])
    assert stored[objs[0].pk].metadata == {"channel": "web"}
    assert (stored[objs[1].pk].content, stored[objs[1].pk].agent) == ("Oi!", "billing_agent")
    assert stored[objs[0].pk].created_at == objs[0].created_at


@pytest.mark.parametrize("written_as", [RawSQL, SqlValue], ids=["expression compiled", "value written as sql"])
def test_sql_in_place_of_a_value_goes_into_the_statement_with_its_parameters(conversation, written_as):
    obj = Message(conversation_id=conversation.pk, role="user", content="x")
    obj.content = written_as("upper(%s)", ("written",))

    sql, params = insert_statement([obj])
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        inserted([obj], cursor.fetchall())

    assert "upper(%s)" in sql and "written" in params
    assert Message.objects.get(pk=obj.pk).content == "WRITTEN"


@pytest.mark.parametrize("stock", [False, True], ids=["fast path", "stock path"])
def test_with_conflicts_ignored_a_row_whose_key_is_taken_is_left_out_and_the_callers_columns_come_back(
    conversation, settings, stock
):
    settings.STOCK_PATHS = stock
    taken = Conversation(conversation_key=conversation.conversation_key, tenant_id=conversation.tenant_id)
    taken.profile_id = conversation.profile_id
    free = Conversation(conversation_key="tenant_a:telecom_contas:free", tenant_id=conversation.tenant_id)
    free.profile_id, free.state = conversation.profile_id, "NEW"

    written = []
    for obj in (taken, free):
        sql, params = insert_statement([obj], conflicts_ignored=True, returning="conversation_key, state")
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            written += cursor.fetchall()

    assert written == [("tenant_a:telecom_contas:free", "NEW")]
    assert Conversation.objects.count() == 2


@fast_path_only
def test_with_conflicts_ignored_the_statement_is_the_one_bulk_create_sends_so(conversation):
    objs = messages(conversation)
    ours = insert_statement(objs, conflicts_ignored=True)

    statements = []

    def capture(execute, sql, params, many, context):
        statements.append((sql, tuple(params or ())))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        Message.objects.bulk_create(messages(conversation), ignore_conflicts=True)

    [theirs] = statements
    assert ours[0] == theirs[0] and comparable(ours[1]) == comparable(theirs[1])
    assert "RETURNING" not in ours[0]


def test_returned_rows_that_do_not_match_the_objects_are_refused(conversation):
    with pytest.raises(ValueError):
        inserted(messages(conversation), [(1,)])


def test_with_the_stock_paths_the_statement_is_built_by_djangos_insert_compiler_and_writes_the_same_rows(
    conversation, settings
):
    settings.STOCK_PATHS = True
    [theirs] = sent_by_bulk_create(messages(conversation))
    objs = messages(conversation)
    obj = Message(conversation_id=conversation.pk, role="user", content="x")
    obj.content = SqlValue("upper(%s)", ("written",))

    ours = insert_statement(objs)
    sql, params = insert_statement([obj])
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        inserted([obj], cursor.fetchall())

    assert ours[0] == theirs[0] and comparable(tuple(ours[1])) == comparable(theirs[1])
    assert "upper(%s)" in sql and "written" in params and "RETURNING" in sql
    assert isinstance(obj.content, SqlValue)  # handed to Django as an expression for the statement only
    assert Message.objects.get(pk=obj.pk).content == "WRITTEN"


MODELS_OF_A_TURN = (Message, RouteDecisionRecord, ToolCall, Handoff, Conversation)
VALUES = (
    "texto",
    "",
    MessageRole.USER,
    gettext_lazy("Hello"),
    0,
    7,
    2**40,
    -3,
    True,
    False,
    1.5,
    None,
    dt.datetime(2026, 11, 30, 6, 0, tzinfo=dt.UTC),
    {"a": 1},
    [1, "b"],
    uuid.UUID(int=5),
)


def prepared_as_django_prepares(field, value):
    """What get_db_prep_save gives (the error it raises, by type), comparable across psycopg's JSON wrappers."""
    try:
        prepared = field.get_db_prep_save(value, connection=connection)
    except Exception as exc:  # noqa: BLE001  # the same refusal is what is compared
        return ("raises", type(exc))
    return (type(prepared), getattr(prepared, "obj", prepared))


def prepared_by_db_value(field, value):
    try:
        prepared = db_value(field, value, connection)
    except Exception as exc:  # noqa: BLE001
        return ("raises", type(exc))
    return (type(prepared), getattr(prepared, "obj", prepared))


@pytest.mark.parametrize("model", MODELS_OF_A_TURN, ids=lambda model: model.__name__)
def test_every_column_of_a_turns_rows_gets_each_kind_of_value_as_djangos_own_preparation_gives_it(model):
    for field in model._meta.concrete_fields:
        for value in VALUES:
            assert prepared_by_db_value(field, value) == prepared_as_django_prepares(field, value), (field, value)


def test_a_naive_datetime_is_prepared_by_django_which_warns_and_makes_it_aware():
    field = Message._meta.get_field("created_at")
    naive = dt.datetime(2026, 11, 30, 6, 0)  # the case under test

    with pytest.warns(RuntimeWarning, match="naive datetime"):
        ours = db_value(field, naive, connection)
    with pytest.warns(RuntimeWarning, match="naive datetime"):
        theirs = field.get_db_prep_save(naive, connection=connection)

    assert ours == theirs


@fast_path_only
def test_a_turns_messages_take_djangos_preparation_only_for_their_json_columns(conversation, monkeypatch):
    prepared: Counter[str] = Counter()
    for kind in (Field, ForeignKey, JSONField):  # JSONField's calls Field's: each column counted once, by its name
        original = kind.get_db_prep_save

        def counted(self, value, connection, *, original=original):
            prepared[self.name] += 1
            return original(self, value, connection)

        monkeypatch.setattr(kind, "get_db_prep_save", counted)

    _, params = insert_statement(messages(conversation))

    assert set(prepared) == {"metadata"}  # every other column directly
    assert len(params) == 2 * len(Message._meta.concrete_fields[1:])


@fast_path_only
def test_rows_of_one_shape_get_the_same_statement_text_each_with_its_own_values(conversation):
    first, first_params = insert_statement(messages(conversation))
    other = messages(conversation)
    other[0].content, other[1].content = "outra pergunta", "outra resposta"
    second, second_params = insert_statement(other)
    third, _ = insert_statement(messages(conversation)[:1])

    assert second is first  # made once for the shape: not joined again, its hash kept downstream
    assert "outra pergunta" in second_params and "outra pergunta" not in first_params
    assert third != first


def test_a_value_written_as_sql_in_a_kept_statement_stays_in_its_own_place(conversation):
    rows = messages(conversation)
    rows[1].content = SqlValue("upper(%s)", ("written",))
    sql, params = insert_statement(rows)
    plain, _ = insert_statement(messages(conversation))

    width = len(Message._meta.concrete_fields) - 1  # the id is the database's
    content = [field.attname for field in Message._meta.concrete_fields[1:]].index("content")
    placeholders = re.findall(r"upper\(%s\)|%s", sql.split(" VALUES ", 1)[1])
    assert placeholders.index("upper(%s)") == width + content and placeholders.count("upper(%s)") == 1
    assert sql != plain and "written" in params
