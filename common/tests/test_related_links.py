"""A page links a related object only for users who may open that object's page (common.adminkit's
RelatedLinksMixin, and the routing changes' object and author): a routing editor or an analyst reads the name of a
tenant, a user or an MCP server, never a link that answers 403."""

from __future__ import annotations

import pytest
from auditlog.context import set_actor
from auditlog.models import LogEntry
from django.test import Client
from django.urls import reverse

from agents.models import McpServer, McpTool
from routing.models import RolloutFlag, RolloutFlagChange
from routing.services import rollout_flag_set, rollout_tenant_override_set
from tenants.models import TenantGrant
from tests.adminkit import change_url, conversation_with_history

pytestmark = pytest.mark.django_db

LOG = "/admin/auditlog/logentry/"


@pytest.fixture
def conversation(tenant, telecom):
    return conversation_with_history(tenant=tenant, profile=telecom)


@pytest.fixture
def operator(django_user_model):
    return django_user_model.objects.create_user("operator", "operator@example.com", "pw", is_staff=True)


@pytest.fixture
def flag(operator, outsider):
    rollout_flag_set(key="multi_agent", actor="admin: operator", user=operator, percentage=10, create=True)
    rollout_tenant_override_set(
        key="multi_agent", tenant_slug=outsider.slug, enabled=False, actor="admin: operator", user=operator
    )
    return RolloutFlag.objects.get(key="multi_agent")


def test_an_analyst_reads_a_conversations_tenant_and_profile_by_name(client, tenant_analyst, conversation):
    client.force_login(tenant_analyst)

    page = client.get(change_url(conversation)).content.decode()

    assert change_url(conversation.tenant) not in page and change_url(conversation.profile) not in page
    assert f'<div class="readonly">{conversation.tenant.slug}</div>' in page
    assert 'class="form-row field-tenant' in page  # the field keeps its place and its label


def test_an_editor_is_linked_the_profile_but_not_the_tenant(editor_client, editor, conversation):
    TenantGrant.objects.create(tenant=conversation.tenant, user=editor, read_conversations=True)
    page = editor_client.get(change_url(conversation)).content.decode()

    assert change_url(conversation.profile) in page
    assert change_url(conversation.tenant) not in page


def test_a_superuser_is_linked_both(staff_client, conversation):
    page = staff_client.get(change_url(conversation)).content.decode()

    assert change_url(conversation.profile) in page and change_url(conversation.tenant) in page


def test_an_editor_reads_a_flags_tenant_overrides_and_author_by_name(editor_client, flag, outsider, operator):
    flag_page = editor_client.get(change_url(flag)).content.decode()
    change = RolloutFlagChange.objects.filter(changed_by=operator).first()
    change_page = editor_client.get(change_url(change)).content.decode()

    assert outsider.slug in flag_page and change_url(outsider) not in flag_page
    assert "operator" in change_page and reverse("admin:auth_user_change", args=[operator.pk]) not in change_page
    assert change_url(flag) in change_page  # the flag itself the editor may open


def test_an_editor_reads_a_tools_server_by_name(editor_client, telecom):
    tool = McpTool.objects.get(name="consultar_fatura")

    page = editor_client.get(change_url(tool)).content.decode()

    assert change_url(tool.server) not in page and "telecom" in page


def test_the_routing_changes_link_only_what_the_reader_may_open(editor, staff_user, telecom, operator):
    server = McpServer.objects.get(name="telecom")
    with set_actor(operator):
        server.timeout = 7
        server.save()
    entry = LogEntry.objects.get_for_object(server).filter(actor=operator).get()
    operator_url = reverse("admin:auth_user_change", args=[operator.pk])

    pages = {}
    for role, user in (("editor", editor), ("superuser", staff_user)):
        client = Client()
        client.force_login(user)
        pages[role] = [client.get(url).content.decode() for url in (LOG, change_url(entry))]

    for page in pages["editor"]:
        assert change_url(server) not in page and operator_url not in page
        assert "telecom" in page and "operator" in page
    assert change_url(telecom.intents.first()) in pages["editor"][0]  # what the editor may open stays linked
    for page in pages["superuser"]:
        assert change_url(server) in page and operator_url in page
