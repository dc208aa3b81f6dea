"""The A2A task store (chat/a2a.py ``TaskRows``), through the official ``a2a-sdk`` client against ``platform.asgi``
served by uvicorn: what it keeps of a customer's personal data, as the conversation store keeps it; its pages and
their tokens; and a body that cannot be parsed."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from a2a.helpers import get_message_text
from a2a.types import InvalidParamsError, ListTasksRequest, Role
from google.protobuf.json_format import MessageToDict

from chat.a2a import ERROR_PAGE_TOKEN
from chat.tests.test_a2a import TEXT, Caller, answered, message
from conversations.models import A2ATask, Conversation

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

CPF, CARD, EMAIL = "123.456.789-09", "4111 1111 1111 1111", "maria.souza@example.com"
PERSONAL = f"meu cpf é {CPF}, cartão {CARD}, email {EMAIL}"


@pytest.fixture
def agent(asgi_server, telecom) -> str:
    return f"{asgi_server}/a2a/telecom_contas/"


def listed(caller: Caller, **request):
    return asyncio.run(caller._call(lambda client, context: client.list_tasks(ListTasksRequest(**request))))


def test_the_task_store_keeps_personal_data_masked_as_the_conversation_store_does(agent, tenant_key, tenant):
    caller = Caller(agent, tenant_key.raw)

    task = answered(caller.send(message(PERSONAL, context_id="ctx-pii", user_id=EMAIL)))
    read = caller.get(task.id)
    (in_list,) = listed(caller).tasks

    conversation = Conversation.objects.get(conversation_key=f"{tenant.slug}:telecom_contas:ctx-pii")
    kept = conversation.messages.get(role="user").content
    assert CPF not in kept and "[CARD ••••1111]" in kept  # the conversation store's masking
    row = A2ATask.objects.get(task_id=task.id).document
    for document in (row, MessageToDict(read), MessageToDict(in_list)):
        shown = json.dumps(document, ensure_ascii=False)
        assert CPF not in shown and CARD not in shown and EMAIL not in shown, shown
    (asked,) = [entry for entry in read.history if entry.role == Role.ROLE_USER]
    assert get_message_text(asked) == kept
    assert MessageToDict(asked.metadata)["user_id"] == conversation.user_id != EMAIL  # its keyed pseudonym
    assert read.id == task.id and read.context_id == "ctx-pii"


def test_a_profile_that_keeps_the_original_input_keeps_it_in_the_task_store_too(agent, tenant_key, tenant, telecom):
    telecom.guardrails = {**telecom.guardrails, "store_original_input": True}
    telecom.save(update_fields=["guardrails"])
    caller = Caller(agent, tenant_key.raw)

    task = answered(caller.send(message(PERSONAL, context_id="ctx-kept", user_id=EMAIL)))
    read = caller.get(task.id)

    conversation = Conversation.objects.get(conversation_key=f"{tenant.slug}:telecom_contas:ctx-kept")
    (asked,) = [entry for entry in read.history if entry.role == Role.ROLE_USER]
    assert get_message_text(asked) == conversation.messages.get(role="user").content == PERSONAL
    assert MessageToDict(asked.metadata)["user_id"] == conversation.user_id != EMAIL  # an id is never kept raw


@pytest.mark.sqlite_too  # SQLite refused a huge offset with its own message ("datatype mismatch")
@pytest.mark.parametrize("token", ["1" + "0" * 23, "9" * 19, "-1", "²", "abc", "1.5"])
def test_a_page_token_the_server_never_gave_is_invalid_params_naming_it(agent, tenant_key, token):
    caller = Caller(agent, tenant_key.raw)
    answered(caller.send(message(TEXT, context_id="ctx-paged")))

    with pytest.raises(InvalidParamsError) as refused:
        listed(caller, page_token=token)

    assert refused.value.data["fields"] == {"pageToken": [ERROR_PAGE_TOKEN]}


def test_the_page_token_a_list_gave_reads_the_next_page(agent, tenant_key):
    caller = Caller(agent, tenant_key.raw)
    sent = [answered(caller.send(message(TEXT, context_id=f"ctx-{n}"))).id for n in range(3)]

    first = listed(caller, page_size=2)
    rest = listed(caller, page_size=2, page_token=first.next_page_token)

    assert [task.id for task in (*first.tasks, *rest.tasks)] == sent[::-1]
    assert first.total_size == 3 and not rest.next_page_token


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"message/send","params":' + b"[" * 3000 + b"]" * 3000 + b"}",
        b'{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","messageId":"x",'
        b'"parts":[{"kind":"text","text":"\xff\xfe"}]}}}',
        b"{not json",
    ],
    ids=["nested 3,000 deep", "not UTF-8", "not JSON"],
)
def test_a_body_that_cannot_be_parsed_is_the_protocols_parse_error(agent, tenant_key, body):
    response = httpx.post(
        agent,
        content=body,
        headers={"Authorization": f"Bearer {tenant_key.raw}", "Content-Type": "application/json"},
        timeout=30,
    )

    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["id"] is None and answer["error"]["code"] == -32700, answer
    assert not A2ATask.objects.exists()
