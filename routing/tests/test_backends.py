"""Remote backends in a gateway profile's routing: each enabled backend is an intent-like entry of the compiled
router (``backend:<name>``), so the state, keyword, examples and classifier tiers and the hybrid follow-up treat it
as they treat a specialist, and the decision names it in ``metadata["backend"]``."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from agents.models import RemoteBackend
from releases.routing_tests import Case, routing_tests_run, routing_tests_spec
from releases.versions import version_publish
from routing import snapshot
from routing.admin_views import route_preview
from routing.decide import route_decide
from routing.router import Classification

pytestmark = pytest.mark.django_db


@pytest.fixture
def gateway(telecom):
    """telecom_contas as a gateway: its local specialists, and a remote backend for mobile offers."""
    RemoteBackend.objects.create(
        profile=telecom,
        name="offers_backend",
        description="Ofertas de planos móveis, portabilidade e chips",
        base_url="http://127.0.0.1:9",
        remote_agent_id="offers",
        keywords=["portabilidade", "chip"],
        examples=["quero trazer meu número de outra operadora"],
        priority=15,
    )
    return telecom


def decide(profile_id: str, text: str, **kwargs):
    spec = snapshot.current().profiles[profile_id]
    return async_to_sync(route_decide)(profile=spec, text=text, **kwargs)


def test_a_keyword_of_a_backend_routes_the_message_to_it(gateway):
    decision = decide("telecom_contas", "Quero fazer a portabilidade do meu número")
    assert (decision.agent, decision.intent, decision.method) == ("offers_backend", "backend:offers_backend", "keyword")
    assert decision.metadata["backend"] == "offers_backend"


def test_a_local_keyword_still_routes_to_the_local_specialist(gateway):
    decision = decide("telecom_contas", "Minha fatura veio alta")
    assert decision.agent == "billing_agent"
    assert "backend" not in decision.metadata


def test_a_backend_competes_with_intents_by_priority(gateway):
    # "chip" (backend, priority 15) and "pedido" (retail_order_tracking, priority 20): the lower number wins.
    assert decide("telecom_contas", "o pedido do chip").agent == "offers_backend"
    RemoteBackend.objects.filter(name="offers_backend").update(priority=30)
    snapshot.invalidate()
    assert decide("telecom_contas", "o pedido do chip").agent == "orders_agent"


def test_a_short_follow_up_stays_with_the_active_backend_without_a_model_call(gateway):
    gateway.routing_mode = "hybrid"
    gateway.llm_router_enabled = True
    gateway.save(update_fields=["routing_mode", "llm_router_enabled"])
    decision = decide("telecom_contas", "e quanto custa?", active_agent="offers_backend")
    assert (decision.agent, decision.method) == ("offers_backend", "followup")
    assert decision.metadata["backend"] == "offers_backend"
    assert "classifier" not in decision.metadata  # no model asked
    assert not decision.handoff


def test_a_message_that_hits_a_local_intent_leaves_the_active_backend(gateway):
    gateway.routing_mode = "hybrid"
    gateway.save(update_fields=["routing_mode"])
    decision = decide("telecom_contas", "e a fatura?", active_agent="offers_backend")
    assert decision.agent == "billing_agent"
    assert decision.handoff and decision.metadata["previous_agent"] == "offers_backend"


def test_the_classifier_is_offered_the_backend_with_its_description(gateway):
    spec = snapshot.current().profiles["telecom_contas"]
    offered = {}

    async def classifier(text, intents):
        offered.update({intent.name: intent.description for intent in intents})
        return Classification(intent="backend:offers_backend", confidence=0.9, reason="offers")

    spec.router.llm_enabled = True
    decision = async_to_sync(spec.router.route)("uma mensagem sem palavra-chave", classifier=classifier)
    assert offered["backend:offers_backend"] == "Ofertas de planos móveis, portabilidade e chips"
    assert (decision.agent, decision.method) == ("offers_backend", "llm")


def test_the_examples_tier_routes_to_a_backend_by_its_examples(gateway):
    gateway.examples_enabled = True
    gateway.examples_threshold = 0.5
    gateway.save(update_fields=["examples_enabled", "examples_threshold"])
    spec = snapshot.current().profiles["telecom_contas"]
    assert spec.router.examples is not None
    assert "backend:offers_backend" in spec.router.examples.intents


def test_a_disabled_backend_is_not_routed_to(gateway):
    RemoteBackend.objects.filter(name="offers_backend").update(enabled=False)
    snapshot.invalidate()
    assert decide("telecom_contas", "portabilidade").agent != "offers_backend"
    assert snapshot.current().profiles["telecom_contas"].backends == {}


def test_backends_take_effect_without_a_new_version(gateway):
    version_publish(profile=gateway, note="before the backend changed")
    RemoteBackend.objects.filter(name="offers_backend").update(keywords=["eSIM"])
    snapshot.invalidate()
    assert decide("telecom_contas", "quero um eSIM").agent == "offers_backend"


def test_the_route_preview_shows_a_backend_decision(gateway):
    preview = route_preview(profile=gateway, text="quero portabilidade")
    assert preview.decision.agent == "offers_backend"
    assert '"backend": "offers_backend"' in preview.decision_json


def test_saved_routing_tests_see_backends_in_every_version(gateway):
    version_publish(profile=gateway, note="live")
    case = Case(name="porta", message="portabilidade", expect={"agent": "offers_backend"})
    for version in ("draft", "live", 1):
        assert routing_tests_run(routing_tests_spec(gateway, version), [case]).failed == 0, version


def supervising(profile, **fields) -> None:
    profile.routing_mode = "supervisor"
    for name, value in fields.items():
        setattr(profile, name, value)
    profile.save(update_fields=["routing_mode", *fields])


def test_a_supervisor_plan_leaves_a_remote_backend_to_the_gateway(gateway):
    supervising(gateway)
    # "fatura" → billing (priority 10), "portabilidade" → offers_backend (15), "pedido" → orders (20).
    decision = decide("telecom_contas", "A fatura veio alta, o pedido atrasou e quero a portabilidade")

    assert decision.is_plan
    assert [step.agent for step in decision.plan] == ["billing_agent", "orders_agent"]
    assert decision.metadata["backends_set_aside"] == ["offers_backend"]


def test_a_message_whose_best_hit_is_a_backend_goes_to_it_whole_in_supervisor_mode(gateway):
    supervising(gateway)
    # "chip" (offers_backend, priority 15) beats "pedido" and "entrega" (orders, 20).
    decision = decide("telecom_contas", "O pedido do chip e a entrega")

    assert not decision.is_plan
    assert (decision.agent, decision.method, decision.metadata["backend"]) == (
        "offers_backend",
        "keyword",
        "offers_backend",
    )


def test_the_supervisors_model_planner_is_not_asked_about_a_message_for_a_backend(gateway, scripted_llm):
    supervising(gateway, supervisor_planner="model")

    decision = decide("telecom_contas", "Quero a portabilidade do chip")

    assert (decision.agent, decision.metadata["backend"]) == ("offers_backend", "offers_backend")
    assert scripted_llm.requests == []
