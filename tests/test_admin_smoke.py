"""Smoke tests of every admin page of every model the project registers: list, search, add, change, history.

The models come from the admin registry itself, so registering a model without
saying here what its pages should do fails :func:`test_every_registered_model_has_expectations`
(and every smoke test of that model). :func:`test_every_page_of_every_model_opens` visits them all in one test, on
SQLite as well (``sqlite_too``, tests/test_sqlite_too.py). What each app's admin does beyond these
pages — the keyword rule, prompt versions, API keys, editors' permissions — is
tested in the app's own ``tests/test_admin.py``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import pytest
from auditlog.models import LogEntry
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import models, transaction
from django.utils import timezone

from agents.models import (
    AgentProfile,
    ExternalDesk,
    McpServer,
    McpTool,
    ModelPrice,
    RemoteBackend,
    Specialist,
    SpecialistPrompt,
)
from conversations.feedback import feedback_give
from conversations.models import (
    BackendCall,
    Conversation,
    CustomerFact,
    Message,
    MessageFeedback,
    RouteDecisionRecord,
    ToolCall,
)
from handoffs.models import Handoff
from releases.models import (
    ConversationTest,
    ConversationTestRun,
    ReleaseRequest,
    RolloutDecision,
    RolloutPlan,
    RoutingTestCase,
)
from releases.versions import version_publish
from routing.models import (
    Capability,
    Goal,
    Intent,
    Keyword,
    RolloutFlag,
    RolloutFlagChange,
    RoutingVersion,
    StatePolicy,
)
from routing.services import rollout_flag_set, rollout_tenant_override_set, rollout_user_override_set
from tenants.models import ApiKey, RetentionPurge, Tenant, TenantGrant
from tenants.services import api_key_create
from tests.adminkit import (
    add_url,
    change_url,
    changelist_url,
    conversation_with_history,
    delete_url,
    error_messages,
    form_data,
    history_url,
)
from tests.factories import StatePolicyFactory
from tests.fixtures import telecom_build
from tests.shared_rows import rows_shared

pytestmark = pytest.mark.django_db

PROJECT_APPS = {"common", "tenants", "handoffs", "agents", "routing", "conversations", "releases", "chat", "analytics"}

Samples = Mapping[type[models.Model], models.Model]


class OnChange(enum.Enum):
    """What posting the change page does."""

    SAVES = "saves"
    IGNORED = "ignored"  # every field is read-only and the save is a no-op (prompt versions are never edited)
    REFUSED = "refused"  # 403: written by the chat API only


@dataclass(frozen=True)
class Expect:
    """What one model's admin pages should do with the sample object of :func:`samples`."""

    search: tuple[str, ...]  # terms that each find the sample in the changelist
    change: dict[str, str]  # posted over the rendered change form
    on_change: OnChange = OnChange.SAVES
    # Posted over the rendered add form (given the samples, for foreign keys); None: adding is refused.
    add: Callable[[Samples], dict[str, Any]] | None = None
    added: dict[str, Any] = field(default_factory=dict)  # what the new object holds besides the posted values

    @property
    def read_only(self) -> bool:
        return self.add is None and self.on_change is OnChange.REFUSED


EXPECT: dict[type[models.Model], Expect] = {
    # -- tenants
    Tenant: Expect(
        search=("tenant_a",),
        add=lambda s: {"slug": "acme", "name": "Acme"},
        change={"name": "Tenant A renamed"},
    ),
    ApiKey: Expect(
        search=("test key",),
        add=lambda s: {"tenant": s[Tenant].pk, "name": "website chat"},
        change={"name": "renamed key"},
    ),
    TenantGrant: Expect(
        search=("tenant_a", "support"),
        add=lambda s: {"tenant": s[Tenant].pk, "group": s[Group].pk},
        change={"act_for_tenant": "True"},
    ),
    RetentionPurge: Expect(search=("tenant_a",), change={"window_days": "1"}, on_change=OnChange.REFUSED),
    Intent: Expect(
        search=("segunda via",),
        add=lambda s: {
            "profile": s[AgentProfile].pk,
            "name": "cancel_request",
            "specialist": s[Specialist].pk,
            "priority": "50",
        },
        change={"priority": "5", "description": "Invoices and charges"},
    ),
    Keyword: Expect(
        search=("fatura",),
        add=lambda s: {"intent": s[Intent].pk, "text": "Débito automático"},
        change={"text": "faturas"},
    ),
    StatePolicy: Expect(
        search=("WAITING",),
        add=lambda s: {
            "profile": s[AgentProfile].pk,
            "state": "WAITING_ORDER_NUMBER",
            "specialist": s[Specialist].pk,
            "intent": s[Intent].pk,
        },
        change={"description": "Short replies confirm the payment."},
    ),
    Goal: Expect(
        search=("GET_QUOTE", "finance"),
        add=lambda s: {
            "server": s[Capability].server_id,
            "domain": "finance",
            "name": "TOP_MOVERS",
            "capabilities": "get_stock_price",  # one per line
        },
        added={"capabilities": ["get_stock_price"]},
        change={"description": "Quotes", "confidence_threshold": "0.8"},
    ),
    Capability: Expect(
        search=("get_stock_price", "finance"),
        add=lambda s: {"server": s[Capability].server_id, "domain": "finance", "name": "search_symbol"},
        change={"description": "Reads a quote."},
    ),
    Conversation: Expect(search=("s-1",), change={"state": "HACKED"}, on_change=OnChange.REFUSED),
    Message: Expect(search=("fatura",), change={"content": "edited"}, on_change=OnChange.REFUSED),
    RouteDecisionRecord: Expect(search=("billing",), change={"reason": "edited"}, on_change=OnChange.REFUSED),
    ToolCall: Expect(search=("consultar_fatura",), change={"error": "edited"}, on_change=OnChange.REFUSED),
    BackendCall: Expect(
        search=("retail_backend", "connection refused"), change={"error": "edited"}, on_change=OnChange.REFUSED
    ),
    # Customers' ratings: by the comment, the rated answer or the conversation.
    # What the platform remembers of a customer: staff correct it, add to it, delete it.
    CustomerFact: Expect(
        search=("e-mail", "cust-facts"),
        add=lambda s: {"tenant": s[Tenant].pk, "user_id": "cust-facts", "text": "prefere ligação à tarde"},
        added={"source": "edited"},
        change={"text": "prefere ser contatado por SMS"},
    ),
    MessageFeedback: Expect(
        search=("demorou", "roaming", "tenant_a:telecom_contas:s-1"),
        change={"comment": "edited"},
        on_change=OnChange.REFUSED,
    ),
    RolloutFlag: Expect(
        search=("multi_agent", "admin_user", "tenant_a"),
        # A percentage given or changed is saved once confirmed (routing/tests/test_rollout_admin.py).
        add=lambda s: {"key": "new_checkout", "percentage": "0", "stickiness": "session_id"},
        change={"description": "The multi-agent graph."},
    ),
    RolloutFlagChange: Expect(
        search=("multi_agent", "percentage"), change={"new_value": "99"}, on_change=OnChange.REFUSED
    ),
    # A published version is immutable: publish a new one (or revert) from the profile's page.
    RoutingVersion: Expect(
        search=("first release", "telecom_contas"), change={"note": "edited"}, on_change=OnChange.REFUSED
    ),
    RolloutPlan: Expect(
        search=("invoices rollout", "telecom_contas"),
        add=lambda s: {
            "name": "new plan",
            "target": "version",
            "profile": s[AgentProfile].pk,
            "candidate": s[RolloutPlan].candidate_id,
            "stages": "5, 100",  # a list of percentages; the guards table keeps its defaults
            "hold_minutes": "30",
            "min_conversations": "50",
            "max_errors": "5",
            "alpha": "0.01",
        },
        change={"name": "invoices rollout, renamed", "hold_minutes": "90"},
    ),
    # A request for a second person is made from the publish page and decided on its review page.
    ReleaseRequest: Expect(
        search=("telecom_contas", "rules of the invoice"), change={"note": "edited"}, on_change=OnChange.REFUSED
    ),
    # The guard's decisions are its record: written by it, read in the admin.
    RolloutDecision: Expect(
        search=("Holding", "invoices rollout"), change={"reason": "edited"}, on_change=OnChange.REFUSED
    ),
    RoutingTestCase: Expect(
        search=("fatura alta", "Minha fatura"),
        add=lambda s: {
            "profile": s[AgentProfile].pk,
            "name": "modem",
            "message": "meu modem",
            "expect_intent": "retail_order_tracking",
        },
        added={"expect": {"intent": "retail_order_tracking"}},
        change={"message": "Minha fatura veio muito alta"},
    ),
    # A conversation test's turns are a formset inside its form: each row's fields, "turn-<n>-<field>".
    ConversationTest: Expect(
        search=("fatura alta",),
        add=lambda s: {
            "profile": s[AgentProfile].pk,
            "name": "modem",
            "language": "pt",
            "turn-0-user": "meu modem parou",
            "turn-0-intent": "retail_order_tracking",
        },
        change={"name": "fatura alta, renamed"},
    ),
    # A run is written by playing (the admin's "Run tests", the command, the API): its pages are read-only.
    ConversationTestRun: Expect(search=("telecom_contas",), change={"version": "live"}, on_change=OnChange.REFUSED),
    # -- handoffs: by either agent or by the conversation
    Handoff: Expect(
        search=("support_agent", "billing_agent", "tenant_a:telecom_contas:s-1"),
        change={"reason": "edited"},
        on_change=OnChange.REFUSED,
    ),
    # -- agents
    AgentProfile: Expect(
        search=("telecom",),
        add=lambda s: {"agent_id": "retail_orders", "name": "Retail orders", "routing_mode": "supervisor"},
        added={"guardrails": {}},
        change={"name": "Telecom renamed", "llm_router_threshold": "0.7"},
    ),
    Specialist: Expect(
        search=("billing",),
        add=lambda s: {"profile": s[AgentProfile].pk, "name": "retention_agent"},
        change={"display_name": "Billing", "step_limit": "5"},
    ),
    SpecialistPrompt: Expect(
        search=("You are billing_agent",),
        add=lambda s: {"specialist": s[Specialist].pk, "text": "You explain invoices in detail."},
        change={"text": "rewritten"},
        on_change=OnChange.IGNORED,
    ),
    McpServer: Expect(
        search=("8100",),
        add=lambda s: {"name": "billing_mcp", "endpoint": "http://127.0.0.1:8300/mcp"},
        change={"timeout": "3.5"},
    ),
    McpTool: Expect(
        search=("fatura",),
        add=lambda s: {"name": "segunda_via", "server": s[McpServer].pk},
        change={"description": "Reads an invoice."},
    ),
    RemoteBackend: Expect(
        search=("retail_backend", "retail.example"),
        add=lambda s: {
            "profile": s[AgentProfile].pk,
            "name": "offers_backend",
            "base_url": "https://offers.example.com",
            "remote_agent_id": "offers",
        },
        change={"timeout": "4.5"},
    ),
    ExternalDesk: Expect(
        search=("acme_desk", "desk.example"),
        add=lambda s: {"name": "new_desk", "url": "https://new.example.com/hook", "secret": "a-new-signing-secret"},
        change={"timeout": "4.5"},
    ),
    ModelPrice: Expect(
        search=("gpt-4o-mini", "list price"),
        add=lambda s: {"model": "gpt-4.1", "prompt_per_million": "2", "completion_per_million": "8"},
        added={"currency": "USD"},
        change={"completion_per_million": "0.750000"},
    ),
}

REGISTERED = sorted(
    (model for model in admin.site._registry if model._meta.app_label in PROJECT_APPS),
    key=lambda model: model._meta.label,
)
SEARCHES = [
    pytest.param(model, term, id=f"{model._meta.label}-{term}")
    for model in REGISTERED
    for term in (EXPECT[model].search if model in EXPECT else (None,))
]
READ_ONLY = [model for model in REGISTERED if model in EXPECT and EXPECT[model].read_only]


def label(model: type[models.Model]) -> str:
    return model._meta.label


def expect_for(model: type[models.Model]) -> Expect:
    if model not in EXPECT:
        pytest.fail(f"{label(model)} is registered in the admin: say in EXPECT what its pages should do.")
    return EXPECT[model]


def row(obj: models.Model) -> dict[str, Any]:
    """The object's stored column values."""
    return type(obj).objects.filter(pk=obj.pk).values().get()


def created_lookup(model: type[models.Model], posted: dict[str, Any]) -> dict[str, Any]:
    """The posted values that are columns of ``model`` (extra form fields, many-to-many and JSON left out: a JSON
    field's posted text is not its stored value, which ``Expect.added`` says)."""
    columns = {f.name for f in model._meta.concrete_fields if not isinstance(f, models.JSONField)}
    return {name: value for name, value in posted.items() if name in columns}


@pytest.fixture(scope="module")
def shared_samples(request, django_db_setup, django_db_blocker) -> Iterator[dict[type[models.Model], Any]]:
    """The primary key of each sample (:func:`samples_build`), built once for the module's tests (tests/shared_rows.py):
    each test sees them as built and nothing another test wrote."""
    with rows_shared(request, django_db_blocker, samples_build) as built:
        yield {model: obj.pk for model, obj in built.items()}


@pytest.fixture
def samples(shared_samples, db) -> Samples:
    """The samples, fetched afresh for this test: what an earlier test changed of its objects was rolled back."""
    return {model: model._base_manager.get(pk=pk) for model, pk in shared_samples.items()}


def samples_build() -> Samples:
    """One object of every registered model, built from the fixtures' cast (``tenant_key``'s, ``telecom``'s)."""
    tenant_key = api_key_create(tenant_slug="tenant_a", name="test key")[0]
    telecom = telecom_build()
    support = get_user_model().objects.create_user("support", is_staff=True)
    conversation = conversation_with_history(tenant=tenant_key.tenant, profile=telecom)
    rollout_flag_set(key="multi_agent", actor="test", create=True)  # the migration's flag, unless a flush removed it
    rollout_flag_set(key="multi_agent", actor="test", percentage=10)
    rollout_user_override_set(key="multi_agent", user_id="admin_user", enabled=True, actor="test")
    rollout_tenant_override_set(key="multi_agent", tenant_slug=tenant_key.tenant.slug, enabled=False, actor="test")
    billing = Specialist.objects.get(profile=telecom, name="billing_agent")
    invoices = Intent.objects.get(profile=telecom, name="billing_invoice_explanation")
    finance = McpServer.objects.create(name="finance", endpoint="http://127.0.0.1:8300/mcp")
    price = Capability.objects.create(server=finance, domain="finance", name="get_stock_price", keywords=["preço"])
    found: Samples = {
        Tenant: tenant_key.tenant,
        ApiKey: tenant_key,
        TenantGrant: TenantGrant.objects.create(tenant=tenant_key.tenant, user=support, read_conversations=True),
        RetentionPurge: RetentionPurge.objects.create(
            tenant=tenant_key.tenant, window_days=30, cutoff=timezone.now(), counts={"conversations.Conversation": 2}
        ),
        Group: Group.objects.create(name="Support desk"),  # not registered here: what a new grant is for
        Intent: invoices,
        Keyword: Keyword.objects.get(intent=invoices, text="fatura"),
        StatePolicy: StatePolicyFactory(
            profile=telecom, state="WAITING_PAYMENT_CONFIRMATION", specialist=billing, intent=invoices
        ),
        Conversation: conversation,
        Message: conversation.messages.get(role="user"),
        RouteDecisionRecord: conversation.route_decisions.get(),
        ToolCall: conversation.tool_calls.get(),
        BackendCall: BackendCall.objects.create(
            conversation=conversation,
            tenant=conversation.tenant,
            profile=telecom,
            backend="retail_backend",
            status="unreachable",
            latency_ms=3.2,
            error="connection refused",
        ),
        CustomerFact: CustomerFact.objects.create(
            tenant=tenant_key.tenant, user_id="cust-facts", text="prefere ser contatado por e-mail"
        ),
        MessageFeedback: feedback_give(
            conversation=conversation,
            message_id=conversation.messages.get(role="assistant").pk,
            rating="down",
            comment="Demorou e não explicou nada",
        ).feedback,
        RolloutFlag: RolloutFlag.objects.get(key="multi_agent"),
        RolloutFlagChange: RolloutFlagChange.objects.get(flag_key="multi_agent", what="percentage"),
        RoutingVersion: version_publish(profile=telecom, note="first release"),
        RoutingTestCase: RoutingTestCase.objects.create(
            profile=telecom,
            name="fatura alta",
            message="Minha fatura veio alta",
            expect={"intent": "billing_invoice_explanation"},
        ),
        ConversationTest: ConversationTest.objects.create(
            profile=telecom,
            name="fatura alta",
            language="pt",
            turns=[{"user": "Minha fatura veio alta", "expect": {"intent": "billing_invoice_explanation"}}],
        ),
        ConversationTestRun: ConversationTestRun.objects.create(
            profile=telecom, version="draft", source="admin", status="finished", total=1, done=1, passed=1
        ),
        Handoff: conversation.handoffs.get(),
        AgentProfile: telecom,
        Specialist: billing,
        SpecialistPrompt: billing.prompts.get(is_active=True),
        McpServer: McpServer.objects.get(name="telecom"),
        McpTool: McpTool.objects.get(name="consultar_fatura"),
        Goal: Goal.objects.create(
            server=finance, domain="finance", name="GET_QUOTE", capabilities=["get_stock_price"], examples=["preço?"]
        ),
        Capability: price,
        RemoteBackend: RemoteBackend.objects.create(
            profile=telecom,
            name="retail_backend",
            base_url="https://retail.example.com",
            api_key="sk-remote",
            remote_agent_id="retail_orders",
        ),
        ExternalDesk: ExternalDesk.objects.create(
            name="acme_desk", url="https://desk.example.com/hook", secret="a-signing-secret-0123"
        ),
        ModelPrice: ModelPrice.objects.create(
            model="gpt-4o-mini", prompt_per_million="0.15", completion_per_million="0.6", note="list price"
        ),
    }
    Keyword.objects.create(intent=invoices, text="rollout sample")
    candidate = version_publish(profile=telecom, note="candidate", release=False)
    plan = RolloutPlan.objects.create(name="invoices rollout", profile=telecom, candidate=candidate)
    found[RolloutPlan] = plan
    found[ReleaseRequest] = ReleaseRequest.objects.create(
        profile=telecom, kind="publish", based_on=1, note="rules of the invoice", requested_by=support
    )
    found[RolloutDecision] = RolloutDecision.objects.create(
        plan=plan, action="hold", stage=0, percentage=5, reason="Holding: samples 0 of 200.", actor="beat"
    )
    return found


def test_every_registered_model_has_expectations():
    assert {label(model) for model in REGISTERED} == {label(model) for model in EXPECT}


@pytest.mark.parametrize("model", REGISTERED, ids=label)
def test_the_changelist_lists_the_object(staff_client, samples, model):
    expect_for(model)
    response = staff_client.get(changelist_url(model))
    assert response.status_code == 200
    assert samples[model] in response.context["cl"].result_list


@pytest.mark.parametrize(("model", "term"), SEARCHES)
def test_the_changelist_search_finds_the_object(staff_client, samples, model, term):
    expect_for(model)
    response = staff_client.get(changelist_url(model), {"q": term})
    assert response.status_code == 200
    assert samples[model] in response.context["cl"].result_list


@pytest.mark.parametrize("model", REGISTERED, ids=label)
def test_the_add_page_opens_unless_adding_is_refused(staff_client, samples, model):
    expected = 403 if expect_for(model).add is None else 200
    assert staff_client.get(add_url(model)).status_code == expected


@pytest.mark.parametrize("model", REGISTERED, ids=label)
def test_the_add_page_creates_the_object_unless_adding_is_refused(staff_client, samples, model):
    expect = expect_for(model)
    if expect.add is None:
        count = model.objects.count()
        assert staff_client.post(add_url(model), {}).status_code == 403
        assert model.objects.count() == count
        return
    posted = expect.add(samples)
    data = form_data(staff_client.get(add_url(model)))
    data.update(posted)
    response = staff_client.post(add_url(model), data)
    # A new API key is answered with the page that shows its secret once (tenants/admin.py), not a redirect.
    assert response.status_code == (200 if model is ApiKey else 302), error_messages(response)
    assert model.objects.filter(**created_lookup(model, posted), **expect.added).count() == 1


@pytest.mark.parametrize("model", REGISTERED, ids=label)
def test_the_change_page_opens(staff_client, samples, model):
    expect_for(model)
    assert staff_client.get(change_url(samples[model])).status_code == 200


@pytest.mark.parametrize("model", REGISTERED, ids=label)
def test_the_change_page_saves_ignores_or_refuses_changes_as_expected(staff_client, samples, model):
    expect = expect_for(model)
    obj = samples[model]
    before = row(obj)
    data = form_data(staff_client.get(change_url(obj)))
    data.update(expect.change)
    response = staff_client.post(change_url(obj), data)
    if expect.on_change is OnChange.SAVES:
        assert response.status_code == 302, error_messages(response)
        obj.refresh_from_db()
        assert {name: str(getattr(obj, name)) for name in expect.change} == expect.change
        return
    assert response.status_code == (302 if expect.on_change is OnChange.IGNORED else 403)
    assert row(obj) == before


@pytest.mark.parametrize("model", READ_ONLY, ids=label)
def test_a_read_only_model_refuses_deletion(staff_client, samples, model):
    obj = samples[model]
    assert staff_client.post(delete_url(obj), {"post": "yes"}).status_code == 403
    assert model.objects.filter(pk=obj.pk).exists()


@pytest.mark.sqlite_too
def test_every_page_of_every_model_opens(staff_client, samples):
    """The list (and each search), add, change and history pages of every registered model and of the routing
    changes, in one test: what tests/test_sqlite_too.py runs on SQLite too, where a lookup PostgreSQL has and SQLite
    lacks answers 500 (a History page did)."""
    Keyword.objects.filter(text="rollout sample").delete()  # a deleted inline row: its intent's history finds it
    entry = LogEntry.objects.latest("pk")
    pages: list[tuple[str, str, int]] = []
    for model in REGISTERED:
        expect = expect_for(model)
        obj = samples[model]
        shown = label(model)
        pages += [(shown, changelist_url(model), 200)]
        searches = [f"{changelist_url(model)}?{urlencode({'q': term})}" for term in expect.search]
        pages += [(f"{shown} search {term!r}", url, 200) for term, url in zip(expect.search, searches, strict=True)]
        pages += [(f"{shown} add", add_url(model), 403 if expect.add is None else 200)]
        pages += [(f"{shown} change", change_url(obj), 200), (f"{shown} history", history_url(obj), 200)]
    pages += [
        ("routing changes", changelist_url(LogEntry), 200),
        ("routing changes search", f"{changelist_url(LogEntry)}?q=telecom", 200),
        ("routing change", change_url(entry), 200),
    ]

    answered = []
    for name, url, expected in pages:
        try:
            with transaction.atomic():  # a failed query leaves the test's transaction usable for the next page
                status = staff_client.get(url).status_code
        except Exception as exc:  # noqa: BLE001 — the test client re-raises a view's exception (a 500): any of them
            answered.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        if status != expected:
            answered.append(f"{name}: {status}, expected {expected}")

    assert answered == []


SAVED = [model for model in REGISTERED if model in EXPECT and EXPECT[model].on_change is OnChange.SAVES]
LINES = "First line.\nSecond line."


@pytest.mark.parametrize("model", SAVED, ids=label)
def test_saving_a_change_page_as_a_browser_sends_it_changes_nothing(staff_client, samples, model):
    """A browser sends a text box's lines ended by CRLF: posted back unedited, the page stores nothing new (no field
    rewritten with CRLF, no history entry, no prompt version)."""
    obj = samples[model]
    texts = {
        f.name: LINES
        for f in model._meta.concrete_fields
        if isinstance(f, models.TextField) and not f.choices and f.editable
    }
    model.objects.filter(pk=obj.pk).update(**texts)  # several lines in every text box (a queryset update: no entry)
    SpecialistPrompt.objects.update(text=LINES)  # and in a specialist's prompt, edited on its page
    keep = [f.attname for f in model._meta.concrete_fields if not getattr(f, "auto_now", False)]
    before = model.objects.filter(pk=obj.pk).values(*keep).get()
    entries = LogEntry.objects.count()

    data = form_data(staff_client.get(change_url(obj)), newline="\r\n")
    response = staff_client.post(change_url(obj), data)

    assert response.status_code == 302, error_messages(response)
    assert model.objects.filter(pk=obj.pk).values(*keep).get() == before
    assert list(LogEntry.objects.filter(pk__gt=0).order_by("pk")[entries:]) == []
