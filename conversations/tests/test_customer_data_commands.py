"""``manage.py export_customer`` and ``manage.py erase_customer``, on PostgreSQL and SQLite, and the export's memory:
a customer with thousands of messages is written a batch at a time, never held whole."""

from __future__ import annotations

import io
import json
import tracemalloc

import pytest
from django.core.management import CommandError, call_command

from conversations.customer_data import customer_export, customer_for
from conversations.models import Conversation, CustomerErasure, Message
from tests.factories import ConversationFactory

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

USER = "cust-cmd-41"
SAID = "CMD41-SAID qual o melhor plano de internet?"


def say(api, text: str, *, user: str = USER, session: str = "cmd-session") -> dict:
    body = {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": session, "user_id": user}}
    response = api.post("/api/gateway/message", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_export_customer_writes_the_document_to_a_file(api, telecom, tmp_path):
    say(api, SAID)
    say(api, "outra pessoa aqui", user="someone-else", session="other")
    target = tmp_path / "customer.json"

    run("export_customer", "--tenant", "tenant_a", "--user", USER, "--output", str(target))

    document = json.loads(target.read_text(encoding="utf-8"))
    (conversation,) = document["conversations"]
    assert conversation["user_id"] == USER
    assert SAID in [message["content"] for message in conversation["messages"]]


def test_erase_customer_dry_run_counts_and_changes_nothing_then_erases(api, telecom):
    say(api, SAID)
    stored = list(Message.objects.order_by("pk").values())

    dry = run("erase_customer", "--tenant", "tenant_a", "--user", USER, "--dry-run")

    assert "conversations.Conversation: 1" in dry and "Dry run" in dry
    assert list(Message.objects.order_by("pk").values()) == stored and not CustomerErasure.objects.exists()

    erased = run("erase_customer", "--tenant", "tenant_a", "--user", USER)

    assert "conversations.Message: 2" in erased
    assert not Message.objects.filter(content__contains="CMD41").exists()
    assert Conversation.objects.get().session_id.startswith("erased:")
    assert CustomerErasure.objects.get().actor.startswith("manage.py erase_customer (")
    assert "nothing erased" in run("erase_customer", "--tenant", "tenant_a", "--user", USER)


def test_an_unknown_tenant_or_a_blank_user_is_refused(tenant):
    with pytest.raises(CommandError, match="nowhere"):
        run("export_customer", "--tenant", "nowhere", "--user", USER)
    with pytest.raises(CommandError, match="user id"):
        run("erase_customer", "--tenant", "tenant_a", "--user", "  ")


def test_the_export_of_thousands_of_messages_holds_a_batch_at_a_time_not_the_document(tenant):
    conversation = ConversationFactory(tenant=tenant, user_id=USER)
    words = "x" * 2000
    Message.objects.bulk_create(
        [Message(conversation=conversation, role="user", content=f"{n} {words}") for n in range(5000)],
        batch_size=500,
    )
    customer = customer_for(tenant_id=tenant.pk, user_id=USER)

    tracemalloc.start()
    try:
        size = sum(len(piece) for piece in customer_export(customer=customer, tenant_slug="tenant_a", user_id=USER))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert size > 10_000_000
    assert peak < size / 3, (peak, size)  # a batch of 500 rows (their objects and text): about 2.5 MB of the 10 written
