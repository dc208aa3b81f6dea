"""Every admin add and change page, for objects in every state that changes what the page shows, saved as a browser
sends it — the inputs the page renders, with their values — by a superuser and by a routing editor.

For each page the user may save:

* its form holds exactly the fields the page renders as inputs (a field the form declares and the page leaves out is
  required, or validated, against a value no browser sends — how a started rollout plan once could not be saved);
* the page sent back unchanged saves, leaving the object as it was — or answers with errors a person reads on the
  page: the text of every error is outside the page's hidden parts (a hidden input's row, a hidden element);
* an add page sent empty answers errors a person reads, or saves.

The pages come from the admin registry, so a new admin is walked too; the states are the objects :func:`states`
makes (started, paused and finished plans, a candidate and a live version, an inactive key and tenant, synced goals
and capabilities, an inactive prompt version, a desk signed by a variable…). The superuser's walk on SQLite as well
(``sqlite_too``).
"""

from __future__ import annotations

from typing import Any

import pytest
from auditlog.models import LogEntry
from django.contrib import admin
from django.contrib.auth.models import Group
from django.db import models, transaction
from django.test import Client
from django.urls import NoReverseMatch
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
from agents.services import prompt_version_create
from conversations.feedback import feedback_give
from conversations.models import BackendCall, CustomerFact
from knowledge.models import KnowledgeDocument, KnowledgeSource
from knowledge.services import document_ingest
from releases.models import (
    ConversationTest,
    ConversationTestResult,
    ConversationTestRun,
    ReleaseRequest,
    RolloutDecision,
    RolloutPlan,
    RolloutPlanStatus,
    RoutingTestCase,
)
from releases.rollout.commands import plan_command, plan_start
from releases.versions import version_publish
from routing import routing_test_drafts  # its test_case_add_url is no test of pytest's
from routing.models import Capability, Goal, Intent, Keyword, RolloutFlag, RolloutFlagChange
from routing.services import rollout_flag_set, rollout_tenant_override_set, rollout_user_override_set
from tenants.models import ApiKey, RetentionPurge, Tenant, TenantGrant
from tests.adminkit import (
    add_url,
    change_url,
    conversation_with_history,
    error_messages,
    form_data,
    shown_fields,
    unread_errors,
)
from tests.factories import StatePolicyFactory

pytestmark = pytest.mark.django_db


def stored(obj: models.Model) -> dict[str, Any]:
    """The object's stored columns, those an unchanged save may touch (``auto_now``) left out."""
    keep = [f.attname for f in type(obj)._meta.concrete_fields if not getattr(f, "auto_now", False)]
    return type(obj).objects.filter(pk=obj.pk).values(*keep).get()


def page_problems(client: Client, url: str, obj: models.Model | None, said: str, sent: list[str]) -> list[str]:
    """What is wrong with saving the admin page at ``url`` (of ``obj``; ``None``: an add page) as a browser sends it,
    in sentences starting with ``said``; a page that fails (a 500) is one of them. ``said`` is added to ``sent`` when
    the page was sent back."""
    try:
        with transaction.atomic():  # a failed query leaves the test's transaction usable for the next page
            return _page_problems(client, url, obj, said, sent)
    except Exception as exc:  # noqa: BLE001 — the test client re-raises a view's exception (a 500): any of them
        return [f"{said}: failed: {type(exc).__name__}: {exc}"]


def _page_problems(client: Client, url: str, obj: models.Model | None, said: str, sent: list[str]) -> list[str]:
    page = client.get(url)
    if page.status_code in (302, 403) or "adminform" not in (page.context or {}):
        return []  # not this user's page, or not a form
    assert page.status_code == 200, f"{said}: answered {page.status_code}"
    may_save = page.context["has_change_permission"] if obj is not None else page.context["has_add_permission"]
    if not may_save:
        return []  # a read-only page: nothing is sent
    problems = []
    form = page.context["adminform"].form
    unrendered = sorted(set(form.fields) - shown_fields(page))
    if unrendered:
        problems.append(f"{said}: the form holds fields the page does not render: {unrendered}")
    before = stored(obj) if obj is not None else None
    answer = client.post(url, form_data(page))
    sent.append(said)
    if answer.status_code == 302:
        if obj is not None and stored(obj) != before:
            problems.append(f"{said}: saved unchanged, it changed: {before} → {stored(obj)}")
        return problems
    if answer.status_code != 200 or not answer.context or "adminform" not in answer.context:
        return [*problems, f"{said}: the save answered {answer.status_code}"]
    unread = unread_errors(answer)
    if unread:
        problems.append(f"{said}: refused with errors shown nowhere on the page: {unread}")
    elif obj is not None:
        problems.append(f"{said}: refused: {error_messages(answer)}")
    return problems


@pytest.fixture
def states(tenant_key, telecom, django_user_model) -> list[tuple[str, models.Model]]:
    """Objects of every model the project registers in the admin (Django's users and groups aside), in each state
    that changes what its page shows, each with a name."""
    made: list[tuple[str, models.Model]] = []
    tenant = tenant_key.tenant
    support = django_user_model.objects.create_user("support", is_staff=True)
    made += [
        ("a tenant", tenant),
        ("an inactive tenant", Tenant.objects.create(slug="closed", name="Closed", is_active=False)),
        ("an API key", tenant_key),
        (
            "an inactive API key",
            ApiKey.objects.create(tenant=tenant, name="revoked", prefix="0badc0de", key_hash="0" * 64, is_active=False),
        ),
        ("a user's tenant grant", TenantGrant.objects.create(tenant=tenant, user=support, read_conversations=True)),
        (
            "a group's tenant grant",
            TenantGrant.objects.create(tenant=tenant, group=Group.objects.create(name="Desk"), act_for_tenant=True),
        ),
    ]
    billing = Specialist.objects.get(profile=telecom, name="billing_agent")
    invoices = Intent.objects.get(profile=telecom, name="billing_invoice_explanation")
    live = version_publish(profile=telecom, note="first release")
    Keyword.objects.create(intent=invoices, text="segunda via do boleto", exclusions=["boleto pago"])
    first_prompt = billing.prompts.get(is_active=True)
    prompt_version_create(specialist=billing, text="You are billing_agent. Explain invoices.")
    made += [
        ("a profile with a live version and a draft", telecom),
        (
            "a profile that needs a second person",
            AgentProfile.objects.create(agent_id="guarded", name="Guarded", release_needs_approval=True),
        ),
        ("a specialist", billing),
        ("a specialist without a prompt", Specialist.objects.create(profile=telecom, name="bare_agent")),
        ("the active prompt version", billing.prompts.get(is_active=True)),
        ("an inactive prompt version", SpecialistPrompt.objects.get(pk=first_prompt.pk)),
        ("an intent", invoices),
        ("a keyword with exclusions", Keyword.objects.get(intent=invoices, text="segunda via do boleto")),
        ("a state policy", StatePolicyFactory(profile=telecom, state="WAITING_X", specialist=billing, intent=invoices)),
    ]
    finance = McpServer.objects.create(name="finance", endpoint="http://user:pw@127.0.0.1:8300/mcp", enabled=False)
    McpTool.objects.filter(name="consultar_fatura").update(synced_description="The server's words.")
    quote = Capability.objects.create(server=finance, domain="finance", name="get_stock_price")
    synced = Capability.objects.create(
        server=finance,
        domain="finance",
        name="get_news",
        description="News, edited here",
        synced={"description": "News"},
        synced_at=timezone.now(),
    )
    made += [
        ("an MCP server", McpServer.objects.get(name="telecom")),
        ("a disabled MCP server with credentials", finance),
        ("a synced tool edited here", McpTool.objects.get(name="consultar_fatura")),
        (
            "a goal made here",
            Goal.objects.create(server=finance, domain="finance", name="GET_QUOTE", capabilities=["get_stock_price"]),
        ),
        (
            "a synced goal edited here",
            Goal.objects.create(
                server=finance,
                domain="finance",
                name="NEWS",
                description="News, edited",
                capabilities=["get_news"],
                synced={"description": "News", "capabilities": ["get_news"]},
                synced_at=timezone.now(),
            ),
        ),
        ("a capability made here", quote),
        ("a synced capability edited here", synced),
        (
            "a remote backend",
            RemoteBackend.objects.create(
                profile=telecom,
                name="retail_backend",
                base_url="https://user:pw@retail.example.com/a2a?token=t",
                api_key="sk-remote",
                remote_agent_id="retail_orders",
            ),
        ),
        (
            "a desk with a typed secret",
            ExternalDesk.objects.create(name="acme", url="https://desk.example.com/hook?k=1", secret="s" * 20),
        ),
        (
            "a disabled desk signed by a variable",
            ExternalDesk.objects.create(
                name="other", url="https://other.example.com/hook", secret_env="OTHER_DESK_SECRET", enabled=False
            ),
        ),
        ("a model price", ModelPrice.objects.create(model="m", prompt_per_million="1", completion_per_million="2")),
    ]
    rollout_flag_set(key="multi_agent", actor="test", create=True)  # the migration's flag, unless a flush removed it
    rollout_flag_set(key="multi_agent", actor="test", percentage=10)
    rollout_user_override_set(key="multi_agent", user_id="customer-1", enabled=True, actor="test")
    rollout_tenant_override_set(key="multi_agent", tenant_slug=tenant.slug, enabled=False, actor="test")
    rollout_flag_set(key="switched_off", actor="test", create=True)
    rollout_flag_set(key="switched_off", actor="test", kill_switch=True)
    made += [
        ("a flag with overrides", RolloutFlag.objects.get(key="multi_agent")),
        ("a switched-off flag", RolloutFlag.objects.get(key="switched_off")),
        ("a flag's change", RolloutFlagChange.objects.filter(flag_key="multi_agent").latest("pk")),
    ]
    candidate = version_publish(profile=telecom, note="candidate", release=False)
    made += [("the live version", live), ("a candidate version", candidate)]
    made += [(f"a {status.label.lower()} plan", plan) for status, plan in plans(candidate).items()]
    made += [
        ("a ready plan of the multi-agent flag", RolloutPlan.objects.create(name="flag", target="multi_agent")),
        ("a rollout decision", RolloutDecision.objects.filter(plan__candidate=candidate).latest("pk")),
    ]
    made += [
        (
            f"a release request {status}",
            ReleaseRequest.objects.create(profile=telecom, kind="publish", based_on=1, requested_by=support, status=s),
        )
        for status, s in (("waiting", "pending"), ("approved", "approved"), ("declined", "declined"))
    ]
    made += [
        (
            "a routing test",
            RoutingTestCase.objects.create(
                profile=telecom, name="invoice", message="Minha fatura", expect={"intent": invoices.name}
            ),
        ),
        (
            "a routing test expecting a goal",
            RoutingTestCase.objects.create(
                profile=telecom, name="quote", message="cotação", expect={"goal": "GET_QUOTE", "status": "ok"}
            ),
        ),
    ]
    made.append(
        (
            "a conversation test",
            ConversationTest.objects.create(
                profile=telecom,
                name="fatura alta",
                language="pt",
                context={"msisdn": "5511999999999"},
                turns=[
                    {"user": "Minha fatura", "expect": {"intent": invoices.name, "answer_contains": ["fatura"]}},
                    {"user": "e o pix?", "channel": "whatsapp", "expect": {"tools_called": {"consultar_fatura": {}}}},
                    {
                        "user": "obrigado",
                        "expect": {"judge": {"rubric": "Thanks.", "min_score": 0.5}, "no_state": True},
                    },
                ],
            ),
        )
    )
    finished = ConversationTestRun.objects.create(
        profile=telecom, version="draft", source="admin", status="finished", total=1, done=1, failed=1
    )
    ConversationTestResult.objects.create(
        run=finished, name="fatura alta", result={"name": "fatura alta", "failures": ["turn 1 of 1: agent"]}
    )
    made += [
        ("a finished run of conversation tests", finished),
        ("a queued run", ConversationTestRun.objects.create(profile=telecom, version="1", source="api", total=30)),
    ]
    knowledge = KnowledgeSource.objects.create(profile=telecom, name="ajuda", language="pt", tags=["faturas"])
    document_ingest(source=knowledge, file_name="ajuda.md", data=b"# Fatura\n\nA fatura vence todo dia 10.\n")
    made.append(("a knowledge source with a document", knowledge))
    made.append(("a knowledge document", KnowledgeDocument.objects.get(source=knowledge)))
    made.append(("a customer fact", CustomerFact.objects.create(tenant=tenant, user_id="u-1", text="prefers e-mail")))
    purge = RetentionPurge.objects.create(tenant=tenant, window_days=30, cutoff=timezone.now(), counts={"message": 3})
    made.append(("a retention purge", purge))
    conversation = conversation_with_history(tenant=tenant, profile=telecom)
    made += [
        ("a conversation", conversation),
        ("a message", conversation.messages.get(role="user")),
        ("a route decision", conversation.route_decisions.get()),
        ("a tool call", conversation.tool_calls.get()),
        ("a handoff", conversation.handoffs.get()),
        (
            "a backend call",
            BackendCall.objects.create(
                conversation=conversation,
                tenant=tenant,
                profile=telecom,
                backend="retail_backend",
                status="unreachable",
                latency_ms=3.2,
                error="connection refused",
            ),
        ),
        (
            "a rating",
            feedback_give(
                conversation=conversation, message_id=conversation.messages.get(role="assistant").pk, rating="down"
            ).feedback,
        ),
        ("a routing change", LogEntry.objects.latest("pk")),
    ]
    return made


def plans(candidate) -> dict[RolloutPlanStatus, RolloutPlan]:
    """A plan of ``candidate`` in each status: the finished ones first (a profile runs one plan at a time), then a
    running one; a paused one holds its stage as the running one does."""
    made = {}
    for status in (*[s for s in RolloutPlanStatus if s not in ("running", "paused")], RolloutPlanStatus.RUNNING):
        plan = RolloutPlan.objects.create(
            name=f"{status.label} plan",
            profile=candidate.profile,
            candidate=candidate,
            stages=[10, 50, 100],
            webhook_url="https://user:pw@hooks.example.com/rollout?token=t",
        )
        if status != RolloutPlanStatus.READY:
            plan_start(plan, actor="operator")
        if status in (RolloutPlanStatus.ABORTED, RolloutPlanStatus.COMPLETED, RolloutPlanStatus.ROLLED_BACK):
            plan_command(plan, "abort", actor="operator")
            RolloutPlan.objects.filter(pk=plan.pk).update(status=status)  # how the guard leaves it, in one step
        made[status] = plan
    running = RolloutPlan.objects.get(pk=made[RolloutPlanStatus.RUNNING].pk)
    paused = RolloutPlan.objects.create(
        name="paused plan", profile=candidate.profile, candidate=candidate, stages=[10, 50, 100]
    )
    copied = ("control", "started_at", "started_as", "stage", "stage_started_at")
    RolloutPlan.objects.filter(pk=paused.pk).update(
        status=RolloutPlanStatus.PAUSED, **{name: getattr(running, name) for name in copied}
    )
    made[RolloutPlanStatus.PAUSED] = paused
    return {status: RolloutPlan.objects.get(pk=plan.pk) for status, plan in made.items()}


# The superuser opens every page: on SQLite (sqlite_too) its walk finds a lookup SQLite lacks; the editor's adds
# read-only fields, the same queries.
@pytest.mark.parametrize("who", [pytest.param("staff_user", marks=pytest.mark.sqlite_too), "editor"])
def test_every_admin_page_saves_as_a_browser_sends_it_or_shows_why(request, rf, states, who):
    walked = {type(obj) for _, obj in states}
    assert [m for m in admin.site._registry if m._meta.app_label != "auth" and m not in walked] == []  # a new admin
    user = request.getfixturevalue(who)
    client = Client()
    client.force_login(user)
    problems: list[str] = []
    sent: list[str] = []
    for model in admin.site._registry:
        try:
            url = add_url(model)
        except NoReverseMatch:
            continue
        problems += page_problems(client, url, None, f"{who}, the {model._meta.verbose_name} add page", sent)
    message = next(obj for label, obj in states if label == "a message")
    from_message = routing_test_drafts.RoutingTestDraft(
        profile_id=message.conversation.profile_id,
        message=message.content,
        expect={"intent": "billing_invoice_explanation"},
        source_message_id=message.pk,
        source_intent="billing_invoice_explanation",
        source_agent="billing_agent",
    )
    add_from_message = routing_test_drafts.test_case_add_url(from_message)
    problems += page_problems(client, add_from_message, None, f"{who}, a routing test from a message", sent)
    for label, obj in states:
        problems += page_problems(client, change_url(obj), obj, f"{who}, {label}", sent)

    assert problems == [], "\n".join(problems)
    asked = rf.get("/")
    asked.user = user
    changeable = [
        f"{who}, {label}" for label, obj in states if admin.site._registry[type(obj)].has_change_permission(asked, obj)
    ]
    assert changeable and set(changeable) <= set(sent)  # every page the user may save was sent back
