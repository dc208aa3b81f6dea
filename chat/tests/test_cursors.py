"""Every list's cursor, forged: the conversations (``GET /api/sessions``, DRF's cursor pagination), a conversation's
messages (``GET /api/sessions/{key}/messages``) and the escalations (``GET /api/escalations``) answer a cursor they did
not give with a 400 naming ``cursor`` — on PostgreSQL and on the embedded SQLite, where a time beyond the calendar
once a zone is applied overflowed — and the cursor they gave with its page."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from rest_framework.test import APIClient

from common.cursors import ERROR_CURSOR
from conversations.models import Message
from tenants.services import api_key_create
from tests import forged_cursors
from tests.factories import ConversationFactory

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

KEY = "tenant_a:telecom_contas:paged"
LISTS = {
    "sessions": ("/api/sessions", forged_cursors.SESSIONS),
    "messages": (f"/api/sessions/{KEY}/messages", forged_cursors.MESSAGES),
    "escalations": ("/api/escalations", forged_cursors.ESCALATIONS),
    "returned escalations": ("/api/escalations?status=returned", forged_cursors.RETURNED_ESCALATIONS),
}
FORGED = {f"{name}: {how}": (path, cursor) for name, (path, forged) in LISTS.items() for how, cursor in forged.items()}


@pytest.fixture
def lists(tenant, telecom) -> APIClient:
    """A key that may answer (it reads the escalations too) of a tenant with conversations and messages to page."""
    for n in range(3):
        ConversationFactory(tenant=tenant, profile=telecom, session_id=f"listed-{n}")
    paged = ConversationFactory(tenant=tenant, profile=telecom, session_id="paged")
    for n in range(3):
        Message.objects.create(conversation=paged, role="user", content=f"message {n}")
    _, raw = api_key_create(tenant_slug=tenant.slug, name="lists", can_answer=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.mark.parametrize(("path", "cursor"), FORGED.values(), ids=FORGED.keys())
def test_a_forged_cursor_is_a_400_naming_it(lists, path, cursor):
    response = lists.get(f"{path}{'&' if '?' in path else '?'}cursor={quote(cursor)}")

    assert response.status_code == 400, response.content
    assert response.json()["error"]["fields"] == {"cursor": [ERROR_CURSOR]}


def test_the_cursor_a_list_gave_reads_its_next_page(lists):
    sessions = lists.get("/api/sessions", {"limit": 2}).json()
    messages = lists.get(f"/api/sessions/{KEY}/messages", {"limit": 2}).json()

    second = lists.get(sessions["next"])
    rest = lists.get(messages["next"])

    assert second.status_code == 200 and len(second.json()["sessions"]) == 2
    assert rest.status_code == 200 and len(rest.json()["messages"]) == 1
