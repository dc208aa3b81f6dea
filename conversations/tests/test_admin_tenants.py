"""The conversation store in the admin, tenant by tenant: an editor or analyst granted tenant A's conversations sees
tenant A's conversations, messages, route decisions, tool calls, remote backend calls, moves between agents and
customer ratings — never a row, a count, a filter entry or a page of tenant B's. Superusers and holders of the
global "read conversations" permission see every tenant; the model's view permission still opens the page."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission

from conversations.models import BackendCall, Conversation, Message, MessageFeedback, RouteDecisionRecord, ToolCall
from conversations.tests.stored_turns import conversation_of, store_reader, stored_turn
from handoffs.models import Handoff
from releases.models import RoutingTestCase
from tenants.models import TenantGrant
from tests.adminkit import change_url, changelist_url
from tests.factories import TenantFactory

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

MODELS = (Conversation, Message, RouteDecisionRecord, ToolCall, BackendCall, Handoff, MessageFeedback)
# Each model's way to its tenant.
TENANT_OF = {
    Conversation: "tenant",
    Message: "conversation__tenant",
    RouteDecisionRecord: "conversation__tenant",
    ToolCall: "conversation__tenant",
    BackendCall: "tenant",
    Handoff: "tenant",
    MessageFeedback: "tenant",
}


def rows_of(model, tenant) -> set:
    return set(model.objects.filter(**{TENANT_OF[model]: tenant}))


SECRET = "segredo do cliente B"


@pytest.fixture
def tenants(db):
    return TenantFactory(slug="tenant_a", name="Alpha Telecom"), TenantFactory(slug="tenant_b", name="Beta Varejo")


@pytest.fixture
def store(tenants):
    """One turn in each tenant, every kind of row, each answer rated down."""
    alpha, beta = tenants
    rows = {}
    for tenant, text in ((alpha, "minha fatura veio alta"), (beta, SECRET)):
        turn = stored_turn(
            conversation_of(tenant),
            text,
            rating="down",
            comment=f"comentário de {tenant.slug}",
            tool="consultar_fatura",
            handoff_to="orders_agent",
            backend="partner_backend",
        )
        rows[tenant.slug] = {
            Conversation: turn.question.conversation,
            Message: turn.question,
            RouteDecisionRecord: turn.decision,
            ToolCall: turn.tool_call,
            BackendCall: turn.backend_call,
            Handoff: turn.handoff,
            MessageFeedback: turn.rating,
        }
    return rows


@pytest.fixture
def alpha_editor(django_user_model, tenants):
    return store_reader(django_user_model, "alpha_editor", tenants[0])


def listed(client, model, **params):
    response = client.get(changelist_url(model), params)
    assert response.status_code == 200
    return response


@pytest.mark.parametrize("model", MODELS, ids=lambda model: model._meta.model_name)
def test_a_granted_editor_lists_and_counts_only_the_tenants_rows(client, alpha_editor, store, tenants, model):
    client.force_login(alpha_editor)
    ours = rows_of(model, tenants[0])

    response = listed(client, model)

    changelist = response.context["cl"]
    assert set(changelist.result_list) == ours
    assert (changelist.result_count, changelist.full_result_count) == (len(ours), len(ours))
    assert SECRET not in response.content.decode()
    assert "tenant_b" not in response.content.decode()  # not in a row, nor in a filter's choices


@pytest.mark.parametrize("model", MODELS, ids=lambda model: model._meta.model_name)
def test_another_tenants_change_and_history_pages_are_404s(client, alpha_editor, store, model):
    client.force_login(alpha_editor)
    theirs, ours = store["tenant_b"][model], store["tenant_a"][model]

    assert client.get(change_url(ours)).status_code == 200
    assert client.get(change_url(theirs)).status_code == 404
    assert client.get(change_url(theirs).replace("/change/", "/history/")).status_code == 404


@pytest.mark.parametrize("model", MODELS, ids=lambda model: model._meta.model_name)
def test_a_search_or_a_filter_naming_another_tenant_shows_none_of_its_rows(client, alpha_editor, store, tenants, model):
    client.force_login(alpha_editor)
    beta = tenants[1]

    assert list(listed(client, model, q="tenant_b").context["cl"].result_list) == []
    filtered = listed(client, model, **{f"{TENANT_OF[model]}__id__exact": beta.pk})
    assert not set(filtered.context["cl"].result_list) & rows_of(model, beta)
    assert SECRET not in filtered.content.decode()


def test_the_tenant_filter_offers_only_the_granted_tenants(client, django_user_model, store, tenants):
    third = TenantFactory(slug="tenant_c", name="Gamma")
    stored_turn(conversation_of(third), "terceiro cliente")
    reader = store_reader(django_user_model, "two_tenants", tenants[0], third)
    client.force_login(reader)

    page = listed(client, Conversation).content.decode()

    assert "?tenant__id__exact=" in page  # two tenants: the filter is offered
    assert "tenant_c" in page and "tenant_a" in page
    assert "tenant_b" not in page


@pytest.mark.parametrize("model", MODELS, ids=lambda model: model._meta.model_name)
def test_a_superuser_and_a_holder_of_the_global_permission_see_every_tenant(
    client, staff_user, django_user_model, store, model
):
    everyone = store_reader(django_user_model, "global_reader")
    everyone.user_permissions.add(Permission.objects.get(codename="read_conversations"))
    for user in (staff_user, everyone):
        client.force_login(user)
        assert set(listed(client, model).context["cl"].result_list) == set(model.objects.all())
        assert len(model.objects.values("pk")) > len(rows_of(model, store["tenant_a"][Conversation].tenant))
        assert client.get(change_url(store["tenant_b"][model])).status_code == 200


def test_without_a_grant_the_lists_are_empty_and_every_page_is_a_404(client, django_user_model, store):
    client.force_login(store_reader(django_user_model, "no_grant"))
    for model in MODELS:
        assert list(listed(client, model).context["cl"].result_list) == []
        assert client.get(change_url(store["tenant_a"][model])).status_code == 404


def test_a_grant_without_the_view_permission_opens_no_page(client, django_user_model, tenants, store):
    client.force_login(store_reader(django_user_model, "granted_only", tenants[0], permissions=()))
    for model in MODELS:
        assert client.get(changelist_url(model)).status_code == 403


def test_a_group_grant_counts_as_the_members_own(client, django_user_model, tenants, store):
    analysts = Group.objects.create(name="Telecom analysts")
    TenantGrant.objects.create(tenant=tenants[1], group=analysts, read_conversations=True)
    member = store_reader(django_user_model, "member")
    member.groups.add(analysts)
    client.force_login(member)

    assert list(listed(client, Conversation).context["cl"].result_list) == [store["tenant_b"][Conversation]]


# What docs/admin.md calls the conversation store: the conversations, their messages, route decisions, tool calls
# and handoffs, and the customers' ratings.
DOCUMENTED_STORE = (Conversation, Message, RouteDecisionRecord, ToolCall, Handoff, MessageFeedback)


@pytest.mark.parametrize("model", DOCUMENTED_STORE, ids=lambda model: model._meta.model_name)
def test_a_release_approver_granted_a_tenant_reads_its_conversation_store(client, approver, tenants, store, model):
    TenantGrant.objects.create(tenant=tenants[0], user=approver, read_conversations=True)
    client.force_login(approver)

    assert set(listed(client, model).context["cl"].result_list) == rows_of(model, tenants[0])
    assert client.get(change_url(store["tenant_a"][model])).status_code == 200
    assert client.get(change_url(store["tenant_b"][model])).status_code == 404


def test_the_decision_action_cannot_reach_another_tenants_decision(client, alpha_editor, store):
    alpha_editor.user_permissions.add(Permission.objects.get(codename="add_routingtestcase"))
    client.force_login(alpha_editor)
    theirs = store["tenant_b"][RouteDecisionRecord]

    client.post(
        changelist_url(RouteDecisionRecord),
        {"action": "add_as_routing_test_cases", "_selected_action": [theirs.pk]},
    )

    assert not RoutingTestCase.objects.filter(message=SECRET).exists()


# -- the route decision and message lists ------------------------------------------------------------------------


def test_route_decisions_are_listed_newest_first_with_their_message_and_filtered_by_profile(
    client, alpha_editor, tenants
):
    alpha = tenants[0]
    telecom = conversation_of(alpha, "telecom_contas", "s-1")
    retail = conversation_of(alpha, "retail_orders", "s-2")
    first = stored_turn(telecom, "minha fatura veio alta")
    second = stored_turn(retail, "onde está meu pedido", intent="order_tracking", agent="orders_agent")
    third = stored_turn(telecom, "quero a segunda via")
    client.force_login(alpha_editor)

    response = listed(client, RouteDecisionRecord)

    assert list(response.context["cl"].result_list) == [third.decision, second.decision, first.decision]
    page = response.content.decode()
    assert "quero a segunda via" in page and "onde está meu pedido" in page  # the message text is a column
    profile = retail.profile
    narrowed = listed(client, RouteDecisionRecord, profile__id__exact=profile.pk).context["cl"].result_list
    assert list(narrowed) == [second.decision]


def test_messages_are_listed_newest_first_and_filtered_by_profile(client, alpha_editor, tenants):
    alpha = tenants[0]
    telecom = conversation_of(alpha, "telecom_contas", "s-1")
    retail = conversation_of(alpha, "retail_orders", "s-2")
    first = stored_turn(telecom, "minha fatura veio alta")
    second = stored_turn(retail, "onde está meu pedido")
    client.force_login(alpha_editor)

    listed_rows = list(listed(client, Message).context["cl"].result_list)

    assert listed_rows == [second.answer, second.question, first.answer, first.question]
    narrowed = listed(client, Message, profile__id__exact=retail.profile_id).context["cl"].result_list
    assert list(narrowed) == [second.answer, second.question]
