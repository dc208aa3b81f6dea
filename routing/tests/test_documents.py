"""A profile's document (routing/documents.py): read from the models in bulk, deterministic JSON, and compiled to
the runtime ProfileSpec the snapshot serves."""

from __future__ import annotations

import dataclasses
import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from agents.models import REPAIR_WORD_FIELDS, AgentProfile, McpServer, McpTool, Specialist
from common.config_version import config_version_bump
from knowledge.models import KnowledgeDocument, KnowledgeSource
from releases.versions import version_publish
from routing import snapshot
from routing.documents import profile_compile, profile_documents
from routing.models import Capability, Goal, Intent
from routing.repairs import repair_words
from routing.router import CompiledRouter, IntentSpec, StatePolicySpec
from routing.specs import ProfileSpec, SpecialistSpec, ToolRights
from tests.demo_snapshot import demo_seed
from tests.factories import (
    AgentProfileFactory,
    IntentFactory,
    McpServerFactory,
    McpToolFactory,
    SpecialistFactory,
    StatePolicyFactory,
)

pytestmark = pytest.mark.django_db


def compiled() -> dict[str, ProfileSpec]:
    """Every enabled profile compiled from its document, as the snapshot does."""
    return snapshot.build(version=0, generation=0).profiles


def assert_same_profile(spec: ProfileSpec, expected: ProfileSpec) -> None:
    """Field by field, then the routers: what they were built from and what they match."""
    for field in dataclasses.fields(ProfileSpec):
        if field.name != "router":
            assert getattr(spec, field.name) == getattr(expected, field.name), f"{spec.agent_id}.{field.name}"
    assert spec.router.intents == expected.router.intents
    assert spec.router.state_policies == expected.router.state_policies
    assert (spec.router.fallback_agent, spec.router.llm_enabled, spec.router.llm_threshold) == (
        expected.router.fallback_agent,
        expected.router.llm_enabled,
        expected.router.llm_threshold,
    )
    messages = [keyword for intent in expected.intents for keyword in intent.keywords]
    messages += [example for intent in expected.intents for example in intent.examples]
    messages += [" e ".join(intent.keywords[0] for intent in expected.intents[:3] if intent.keywords), "bom dia"]
    for message in messages:
        assert [hit.describe() for hit in spec.router.match(message)] == [
            hit.describe() for hit in expected.router.match(message)
        ], message


@pytest.fixture
def mixed(telecom):
    """The ``telecom`` fixture with something disabled of every kind, and two more profiles."""
    billing = Specialist.objects.get(profile=telecom, name="billing_agent")
    orders = Specialist.objects.get(profile=telecom, name="orders_agent")
    legacy = SpecialistFactory(profile=telecom, name="legacy_agent", enabled=False, display_name="")
    billing.handoff_targets.set([orders, legacy])
    IntentFactory(profile=telecom, name="legacy_intent", specialist=legacy, keywords=["antigo"])
    IntentFactory(
        profile=telecom,
        name="old_promo",
        specialist=Specialist.objects.get(profile=telecom, name="product_agent"),
        enabled=False,
        keywords=["promoção"],
    )
    invoice = Intent.objects.get(profile=telecom, name="billing_invoice_explanation")
    invoice.examples = ["Minha fatura veio alta", "Quero a segunda via"]
    invoice.save()
    StatePolicyFactory(profile=telecom, state="WAITING_PAYMENT_CONFIRMATION", specialist=billing, intent=invoice)
    StatePolicyFactory(
        profile=telecom, state="WAITING_PROMO", specialist=billing, intent=Intent.objects.get(name="old_promo")
    )
    StatePolicyFactory(profile=telecom, state="WAITING_OFF", specialist=billing, enabled=False)
    StatePolicyFactory(profile=telecom, state="WAITING_LEGACY", specialist=legacy)
    McpTool.objects.filter(name="consultar_pagamentos").update(enabled=False)
    McpTool.objects.filter(name="consultar_fatura").update(needs_permission=True)
    McpServer.objects.filter(name="retail").update(enabled=False)
    telecom.coordinator = legacy
    telecom.guardrails = {"blocked_terms": ["senha"], "max_input_chars": 500}
    telecom.judges = {"min_score": 0.5}
    telecom.save()

    other = AgentProfileFactory(agent_id="other_profile", llm_router_enabled=True, llm_temperature=0.2)
    gone = SpecialistFactory(profile=other, name="gone_agent", enabled=False)
    kept = SpecialistFactory(profile=other, name="b_agent")
    SpecialistFactory(profile=other, name="c_agent")
    other.fallback_specialist, other.coordinator = gone, kept
    other.save()
    tool = McpToolFactory(name="other_tool", server=McpServerFactory(name="other_server"))
    kept.allowed_tools.set([tool])
    IntentFactory(profile=other, name="other_intent", specialist=kept, keywords=["fatura"], tools=[tool])
    AgentProfileFactory(agent_id="switched_off", enabled=False)
    config_version_bump()  # QuerySet.update bypasses the invalidation signals
    return telecom


def test_a_profile_compiles_to_its_enabled_parts_with_usable_tools_only(mixed):
    specs = compiled()

    def specialist(name: str, tools: frozenset[str] = frozenset(), targets: tuple[str, ...] = ()) -> SpecialistSpec:
        title = name.replace("_", " ").title()
        prompt = f"You are {name}. Answer briefly."
        return SpecialistSpec(name, title, "", prompt, 1, tools, targets, 10)

    invoice = IntentSpec(
        name="billing_invoice_explanation",
        agent="billing_agent",
        domain="telecom",
        priority=10,
        keywords=("boleto", "cobrança", "conta", "contestar", "fatura", "segunda via", "valor alto", "vencimento"),
        examples=("Minha fatura veio alta", "Quero a segunda via"),
        mcp_tools=("consultar_fatura",),  # consultar_pagamentos is disabled
    )
    intents = (
        invoice,
        # The retail server is disabled: its tools reach no intent.
        IntentSpec(
            "retail_order_tracking", "orders_agent", "retail", "", 20, ("atraso", "entrega", "pedido", "rastreio")
        ),
        IntentSpec(
            "product_information", "product_agent", "telecom", "", 30, ("internet", "plano", "produto", "serviço")
        ),
        IntentSpec("support_request", "support_agent", "retail", "", 40, ("defeito", "devolução", "garantia", "troca")),
    )  # not old_promo (disabled) nor legacy_intent (its specialist is)
    policies = (
        StatePolicySpec(
            "WAITING_PAYMENT_CONFIRMATION", "billing_agent", invoice.name, "telecom", ("consultar_fatura",)
        ),
        StatePolicySpec("WAITING_PROMO", "billing_agent"),  # its intent is disabled
    )
    expected = ProfileSpec(
        pk=mixed.pk,
        agent_id="telecom_contas",
        name="Agente Telecom Contas",
        domain="telecom",
        description="",
        policy="",
        synthesis_prompt=AgentProfile._meta.get_field("synthesis_prompt").get_default(),
        routing_mode="router",
        fallback_agent="support_agent",
        llm_router_enabled=False,
        llm_router_threshold=0.6,
        handoffs_enabled=True,
        hybrid_followup_max_chars=40,
        llm_model="",
        llm_temperature=None,
        guardrails={"blocked_terms": ["senha"], "max_input_chars": 500},
        judges={"min_score": 0.5},
        specialists={
            "billing_agent": specialist(
                "billing_agent", frozenset({"consultar_fatura", "consultar_pagamentos"}), ("orders_agent",)
            ),
            "orders_agent": specialist("orders_agent", frozenset({"consultar_pedido", "consultar_entrega"})),
            "product_agent": specialist("product_agent"),
            "support_agent": specialist("support_agent"),
        },
        intents=intents,
        router=CompiledRouter(intents=intents, state_policies=policies, fallback_agent="support_agent"),
        coordinator="",  # legacy_agent is disabled
        confirmation_words=tuple(AgentProfile._meta.get_field("confirmation_words").get_default()),
        denial_words=tuple(AgentProfile._meta.get_field("denial_words").get_default()),
        closing_words=tuple(AgentProfile._meta.get_field("closing_words").get_default()),
        repair_words=repair_words(
            {name: AgentProfile._meta.get_field(name).get_default() for name in REPAIR_WORD_FIELDS}
        ),
        tool_rights={
            "consultar_fatura": ToolRights(needs_permission=True, enabled=True),
            "consultar_pagamentos": ToolRights(needs_permission=False, enabled=False),
            "consultar_pedido": ToolRights(needs_permission=False, enabled=False),
            "consultar_entrega": ToolRights(needs_permission=False, enabled=False),
        },
        knowledge_documents=frozenset(),  # its draft holds no documents
        knowledge_synonyms=(),  # nor synonyms
    )

    assert_same_profile(specs["telecom_contas"], expected)
    assert "switched_off" not in specs
    other = specs["other_profile"]
    assert other.fallback_agent == "b_agent" and other.coordinator == "b_agent"  # its fallback is disabled
    assert other.llm_router_enabled and other.router.llm_enabled and other.llm_temperature == 0.2


def test_the_demo_with_synced_goals_compiles_the_same_after_a_json_round_trip(db, finance_mcp):
    demo_seed()
    McpServer.objects.filter(name="finance").update(endpoint=finance_mcp)
    config_version_bump()  # QuerySet.update bypasses the invalidation signals
    call_command("sync_mcp_tools", "finance", stdout=StringIO())
    McpTool.objects.filter(name="get_top_losers").update(enabled=False)
    Capability.objects.filter(name="search_symbol").update(tool=None)
    Goal.objects.filter(name="GET_QUOTE").update(enabled=False)
    # The synced goals and these edits are in the draft of the profile that serves them, and of no other:
    # published, as a routing editor would.
    version_publish(profile=AgentProfile.objects.get(agent_id="finance_assistente"), note="finance synced, edited")

    specs = compiled()

    goals = specs["finance_assistente"].goals
    assert goals.goal("finance", "TOP_MOVERS") is not None and not goals.goal("finance", "GET_QUOTE").enabled
    assert not goals.capabilities["get_top_losers"].enabled and goals.capabilities["get_top_gainers"].enabled
    assert not goals.capabilities["search_symbol"].enabled and goals.capabilities["search_symbol"].tool == ""
    assert goals.capabilities["get_stock_price"].description == McpTool.objects.get(name="get_stock_price").description
    documents = json.loads(json.dumps(profile_documents()))
    assert (
        set(documents) == set(specs) == {"finance_assistente", "retail_orders", "telecom_assistente", "telecom_contas"}
    )
    for agent_id, spec in specs.items():
        assert_same_profile(profile_compile(documents[agent_id], pk=spec.pk, version=spec.version), spec)


def test_a_document_holds_disabled_things_with_their_enabled_flag_and_the_tools_authorisation(mixed):
    document = profile_documents(["telecom_contas"])["telecom_contas"]

    assert set(document) == {
        "schema",
        "profile",
        "specialists",
        "intents",
        "state_policies",
        "goals",
        "capabilities",
        "tools",
        "knowledge",
        "knowledge_synonyms",
    }
    assert document["schema"] == 1
    assert document["profile"]["coordinator"] == "legacy_agent" and document["profile"]["enabled"]
    assert document["specialists"]["legacy_agent"]["enabled"] is False
    assert document["specialists"]["billing_agent"]["handoff_targets"] == ["legacy_agent", "orders_agent"]
    assert document["intents"]["old_promo"] == {
        "specialist": "product_agent",
        "domain": "",
        "description": "",
        "translations": {},
        "priority": 100,
        "enabled": False,
        "keywords": ["promoção"],
        "keyword_exclusions": {},
        "keyword_languages": {},
        "keyword_exclusion_languages": {},
        "examples": [],
        "mcp_tools": [],
        "next_state": "",
        "escalate_to": "",
    }
    assert document["state_policies"]["WAITING_OFF"] == {
        "specialist": "billing_agent",
        "intent": "",
        "description": "",
        "enabled": False,
    }
    assert document["tools"] == {
        "consultar_entrega": {"server": "retail", "needs_permission": False, "enabled": True, "server_enabled": False},
        "consultar_fatura": {"server": "telecom", "needs_permission": True, "enabled": True, "server_enabled": True},
        "consultar_pagamentos": {
            "server": "telecom",
            "needs_permission": False,
            "enabled": False,
            "server_enabled": True,
        },
        "consultar_pedido": {"server": "retail", "needs_permission": False, "enabled": True, "server_enabled": False},
    }


def test_a_document_is_plain_json_the_same_for_the_same_configuration_and_compiles_after_a_round_trip(mixed):
    first = profile_documents()
    text = json.dumps(first, ensure_ascii=False)

    assert json.dumps(profile_documents(), ensure_ascii=False) == text
    assert json.loads(text) == first
    assert list(first) == sorted(first)
    assert list(first["telecom_contas"]["intents"]) == sorted(first["telecom_contas"]["intents"])
    for agent_id, spec in compiled().items():
        assert_same_profile(profile_compile(json.loads(json.dumps(first[agent_id])), pk=spec.pk), spec)


def test_documents_of_named_profiles_only(mixed):
    assert list(profile_documents(["other_profile", "switched_off", "no_such_profile"])) == [
        "other_profile",
        "switched_off",
    ]
    assert profile_documents([]) == {}


def test_reading_documents_costs_the_same_queries_whatever_the_numbers(mixed, django_assert_max_num_queries):
    for index in range(15):
        profile = AgentProfileFactory(agent_id=f"bulk_{index}")
        server = McpServerFactory(name=f"bulk_server_{index}")
        profile.goal_domains.set([server])
        for number in range(3):
            specialist = SpecialistFactory(profile=profile, name=f"agent_{number}")
            tool = McpToolFactory(name=f"bulk_tool_{index}_{number}", server=server)
            specialist.allowed_tools.set([tool])
            IntentFactory(
                profile=profile,
                name=f"intent_{number}",
                specialist=specialist,
                keywords=[f"palavra {number}", f"outra {number}"],
                tools=[tool],
            )
            StatePolicyFactory(profile=profile, state=f"STATE_{number}", specialist=specialist)
            Capability.objects.create(server=server, domain=f"d{index}", name=f"cap_{index}_{number}", tool=tool)
            Goal.objects.create(
                server=server, domain=f"d{index}", name=f"G{number}", capabilities=[f"cap_{index}_{number}"]
            )
            source, now = KnowledgeSource.objects.create(profile=profile, name=f"source {number}"), timezone.now()
            KnowledgeDocument.objects.bulk_create(
                KnowledgeDocument(
                    source=source, title=name, file_name=name, kind="text", content_hash=name, uploaded_at=now
                )
                for name in (f"a{number}.txt", f"b{number}.txt")
            )

    with django_assert_max_num_queries(14):
        documents = profile_documents()
    with django_assert_max_num_queries(14):
        profile_documents(["bulk_3", "telecom_contas"])

    assert len(documents) == 18 and set(documents["bulk_3"]["goals"]) == {"d3"}
    assert documents["bulk_3"]["knowledge"]["source 2"] == {"a2.txt": "a2.txt", "b2.txt": "b2.txt"}
    assert documents["bulk_3"]["tools"]["bulk_tool_3_0"]["server"] == "bulk_server_3"
