"""The routing admin: adding intents and keys, the keyword rule, read-only conversations,
the routing editors' permissions and the route preview.

Every page's smoke test (list, search, add, change) is in ``tests/test_admin_smoke.py``.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from agents.models import McpServer, McpTool, Specialist
from conversations.models import Conversation
from handoffs.models import Handoff
from routing.forms import ERROR_KEYWORD_DUPLICATE, ERROR_SPECIALIST_OTHER_PROFILE
from routing.models import Intent, Keyword, StatePolicy
from routing.services import ERROR_KEYWORD_TAKEN
from tenants.auth import key_hash
from tenants.models import ApiKey, Tenant, TenantGrant
from tests.adminkit import (
    add_url,
    change_url,
    changelist_url,
    conversation_with_history,
    delete_url,
    error_messages,
    form_data,
)
from tests.factories import AgentProfileFactory, IntentFactory, SpecialistFactory, StatePolicyFactory

pytestmark = pytest.mark.django_db

PREVIEW_URL = "/admin/routing/intent/preview/"


@pytest.fixture
def billing(telecom) -> Intent:
    return Intent.objects.get(profile=telecom, name="billing_invoice_explanation")


@pytest.fixture
def orders(telecom) -> Intent:
    return Intent.objects.get(profile=telecom, name="retail_order_tracking")


@pytest.fixture
def waiting_policy(telecom) -> StatePolicy:
    return StatePolicyFactory(
        profile=telecom,
        state="WAITING_PAYMENT_CONFIRMATION",
        specialist=Specialist.objects.get(profile=telecom, name="billing_agent"),
        intent=Intent.objects.get(profile=telecom, name="billing_invoice_explanation"),
    )


@pytest.fixture
def conversation(tenant, telecom) -> Conversation:
    return conversation_with_history(tenant=tenant, profile=telecom)


def add_intent(client, profile, *, name: str, keywords: list[str], specialist: str = "support_agent", **fields):
    """Post the add-intent page as rendered, filled in: the intent of ``profile`` answered by its
    ``specialist`` (a name), ``keywords`` in the inline rows, ``enabled=False`` unticks the box and
    other ``fields`` are posted as given."""
    data = form_data(client.get(add_url(Intent)))
    if not fields.pop("enabled", True):
        del data["enabled"]
    data.update({key: str(value) for key, value in fields.items()})
    data.update(
        profile=str(profile.pk),
        name=name,
        specialist=str(Specialist.objects.get(profile=profile, name=specialist).pk),
    )
    for index, text in enumerate(keywords):
        data[f"keywords-{index}-text"] = text
    data["keywords-TOTAL_FORMS"] = str(max(len(keywords), int(data["keywords-TOTAL_FORMS"])))
    return client.post(add_url(Intent), data)


def errors_of(response) -> str:
    """Every error the admin form and its inlines show, as one string."""
    return "\n".join(error_messages(response))


# -- adding --------------------------------------------------------------------------


def test_adding_an_intent_with_keywords_creates_both(staff_client, telecom):
    response = add_intent(
        staff_client,
        telecom,
        name="cancel_request",
        priority=50,
        examples="Quero cancelar\nCancelar minha linha",
        keywords=["cancelar", "cancelamento"],
    )
    assert response.status_code == 302, errors_of(response)
    intent = Intent.objects.get(name="cancel_request")
    assert sorted(intent.keywords.values_list("text", flat=True)) == ["cancelamento", "cancelar"]
    assert intent.examples == ["Quero cancelar", "Cancelar minha linha"]
    assert intent.enabled


def test_adding_a_keyword_on_its_own_page_creates_it(staff_client, billing):
    data = form_data(staff_client.get(add_url(Keyword)))
    data.update({"intent": billing.pk, "text": "Débito automático"})
    response = staff_client.post(add_url(Keyword), data)
    assert response.status_code == 302
    assert Keyword.objects.get(intent=billing, text="Débito automático").normalized == "debito automatico"


def test_a_state_policy_refuses_a_specialist_of_another_profile(staff_client, telecom):
    other = SpecialistFactory(profile=AgentProfileFactory(agent_id="retail_orders"), name="orders_agent")
    data = form_data(staff_client.get(add_url(StatePolicy)))
    data.update({"profile": telecom.pk, "state": "WAITING_X", "specialist": other.pk})
    response = staff_client.post(add_url(StatePolicy), data)
    assert response.status_code == 200
    expected = ERROR_SPECIALIST_OTHER_PROFILE.format(
        specialist="orders_agent", profile="retail_orders", expected="telecom_contas"
    )
    assert expected in response.context["adminform"].form.errors["specialist"]


# -- API keys ----------------------------------------------------------------------------


def test_adding_an_api_key_shows_the_raw_key_once_and_stores_only_its_hash(staff_client, tenant):
    data = form_data(staff_client.get(add_url(ApiKey)))
    data.update({"tenant": tenant.pk, "name": "website chat", "is_debug": "on"})
    response = staff_client.post(add_url(ApiKey), data)
    assert response.status_code == 200

    key = ApiKey.objects.get(name="website chat")
    raw = response.context["raw_key"]  # shown in this response only (tenants/tests/test_admin.py: no cookie holds it)
    assert raw in response.content.decode()
    assert key.prefix in raw
    assert key_hash(raw) == key.key_hash
    assert key.is_debug and key.tenant == tenant

    again = staff_client.get(change_url(key))
    assert raw not in again.content.decode()
    assert raw not in staff_client.get(changelist_url(ApiKey)).content.decode()


def test_the_api_key_change_page_keeps_hash_and_prefix_read_only(staff_client, tenant_key):
    response = staff_client.get(change_url(tenant_key))
    form = response.context["adminform"].form
    assert "key_hash" not in form.fields and "prefix" not in form.fields and "tenant" not in form.fields
    assert tenant_key.key_hash in response.content.decode()


# -- the keyword rule ----------------------------------------------------------------


def test_an_intent_may_not_take_a_keyword_another_enabled_intent_of_the_profile_uses(staff_client, telecom):
    response = add_intent(staff_client, telecom, name="invoice_dispute", keywords=["disputa", "FATURA"])
    assert response.status_code == 200
    expected = ERROR_KEYWORD_TAKEN.format(keyword="FATURA", intent="billing_invoice_explanation")
    assert expected in errors_of(response)
    assert "billing_invoice_explanation" in response.content.decode()
    assert not Intent.objects.filter(name="invoice_dispute").exists()


def test_adding_a_taken_keyword_on_the_change_page_is_refused(staff_client, orders):
    data = form_data(staff_client.get(change_url(orders)))
    total = int(data["keywords-TOTAL_FORMS"])
    initial = int(data["keywords-INITIAL_FORMS"])
    assert total > initial
    data[f"keywords-{initial}-text"] = "Cobranca"
    response = staff_client.post(change_url(orders), data)
    assert response.status_code == 200
    assert ERROR_KEYWORD_TAKEN.format(keyword="Cobranca", intent="billing_invoice_explanation") in errors_of(response)
    assert not orders.keywords.filter(normalized="cobranca").exists()


def test_the_same_keyword_twice_in_one_intent_is_refused(staff_client, telecom):
    response = add_intent(staff_client, telecom, name="cancel_request", keywords=["cancelar", "Cancelar!"])
    assert response.status_code == 200
    assert ERROR_KEYWORD_DUPLICATE.format(keyword="Cancelar!", other="cancelar") in errors_of(response)
    assert not Intent.objects.filter(name="cancel_request").exists()


def test_a_disabled_intent_may_share_a_keyword(staff_client, telecom):
    response = add_intent(staff_client, telecom, name="invoice_draft", keywords=["fatura"], enabled=False)
    assert response.status_code == 302, errors_of(response)
    assert not Intent.objects.get(name="invoice_draft").enabled


def test_the_same_keyword_in_another_profile_is_allowed(staff_client, telecom):
    retail = AgentProfileFactory(agent_id="retail_orders")
    SpecialistFactory(profile=retail, name="orders_agent")
    response = add_intent(staff_client, retail, name="retail_invoice", specialist="orders_agent", keywords=["fatura"])
    assert response.status_code == 302, errors_of(response)


def test_enabling_a_conflicting_intent_on_its_change_page_is_refused(staff_client, telecom):
    draft = IntentFactory(profile=telecom, name="invoice_draft", enabled=False, keywords=["fatura", "rascunho"])
    data = form_data(staff_client.get(change_url(draft)))
    data["enabled"] = "on"
    response = staff_client.post(change_url(draft), data)
    assert response.status_code == 200
    assert ERROR_KEYWORD_TAKEN.format(keyword="fatura", intent="billing_invoice_explanation") in errors_of(response)
    draft.refresh_from_db()
    assert not draft.enabled


def test_enabling_and_dropping_the_conflicting_keyword_in_one_save_is_allowed(staff_client, telecom):
    draft = IntentFactory(profile=telecom, name="invoice_draft", enabled=False, keywords=["fatura", "rascunho"])
    data = form_data(staff_client.get(change_url(draft)))
    data["enabled"] = "on"
    fatura_row = next(k for k, v in data.items() if k.startswith("keywords-") and v == "fatura")
    data[fatura_row.replace("-text", "-DELETE")] = "on"
    response = staff_client.post(change_url(draft), data)
    assert response.status_code == 302, errors_of(response)
    draft.refresh_from_db()
    assert draft.enabled
    assert list(draft.keywords.values_list("text", flat=True)) == ["rascunho"]


def test_the_enable_action_refuses_a_conflicting_intent_and_names_the_other_intent(staff_client, telecom):
    draft = IntentFactory(profile=telecom, name="invoice_draft", enabled=False, keywords=["boleto"])
    clean = IntentFactory(profile=telecom, name="roaming_info", enabled=False, keywords=["roaming"])
    response = staff_client.post(
        changelist_url(Intent),
        {"action": "enable_intents", "_selected_action": [draft.pk, clean.pk]},
        follow=True,
    )
    notes = [str(message) for message in response.context["messages"]]
    refusal = next(note for note in notes if "invoice_draft" in note)
    assert "billing_invoice_explanation" in refusal
    assert ERROR_KEYWORD_TAKEN.format(keyword="boleto", intent="billing_invoice_explanation") in refusal
    assert "Enabled 1 intent(s)." in notes
    draft.refresh_from_db()
    clean.refresh_from_db()
    assert not draft.enabled
    assert clean.enabled


def test_the_enable_action_refuses_the_second_of_two_selected_intents_sharing_a_keyword(staff_client, telecom):
    first = IntentFactory(profile=telecom, name="a_first", enabled=False, keywords=["roaming"])
    second = IntentFactory(profile=telecom, name="b_second", enabled=False, keywords=["roaming"])
    staff_client.post(changelist_url(Intent), {"action": "enable_intents", "_selected_action": [first.pk, second.pk]})
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.enabled and not second.enabled


def test_the_disable_action_disables(staff_client, orders):
    staff_client.post(changelist_url(Intent), {"action": "disable_intents", "_selected_action": [orders.pk]})
    orders.refresh_from_db()
    assert not orders.enabled


def test_ticking_enabled_in_the_changelist_is_refused_for_a_conflicting_intent(staff_client, telecom):
    draft = IntentFactory(profile=telecom, name="invoice_draft", enabled=False, priority=90, keywords=["boleto"])
    url = changelist_url(Intent) + "?enabled__exact=0"
    data = {
        "form-TOTAL_FORMS": "1",
        "form-INITIAL_FORMS": "1",
        "form-0-id": str(draft.pk),
        "form-0-priority": "90",
        "form-0-enabled": "on",
        "_save": "Save",
    }
    response = staff_client.post(url, data)
    assert response.status_code == 200
    errors = str(response.context["cl"].formset.errors)
    assert ERROR_KEYWORD_TAKEN.format(keyword="boleto", intent="billing_invoice_explanation") in errors
    draft.refresh_from_db()
    assert not draft.enabled


def test_editing_priority_in_the_changelist_saves(staff_client, orders):
    url = changelist_url(Intent) + f"?q={orders.name}"
    data = {
        "form-TOTAL_FORMS": "1",
        "form-INITIAL_FORMS": "1",
        "form-0-id": str(orders.pk),
        "form-0-priority": "15",
        "form-0-enabled": "on",
        "_save": "Save",
    }
    response = staff_client.post(url, data)
    assert response.status_code == 302
    orders.refresh_from_db()
    assert orders.priority == 15


def test_a_keyword_added_on_its_own_page_follows_the_rule_too(staff_client, orders):
    data = form_data(staff_client.get(add_url(Keyword)))
    data.update({"intent": orders.pk, "text": "Fatura"})
    response = staff_client.post(add_url(Keyword), data)
    assert response.status_code == 200
    assert ERROR_KEYWORD_TAKEN.format(keyword="Fatura", intent="billing_invoice_explanation") in errors_of(response)


def test_intent_search_finds_keywords_without_accents(staff_client, billing):
    response = staff_client.get(changelist_url(Intent), {"q": "cobranca"})
    assert list(response.context["cl"].result_list) == [billing]


def test_the_intent_changelist_does_not_query_per_row(staff_client, telecom, django_assert_max_num_queries):
    staff_client.get(changelist_url(Intent))  # warm the session and content types
    with django_assert_max_num_queries(20) as few:
        staff_client.get(changelist_url(Intent))
    for index in range(15):
        IntentFactory(profile=telecom, name=f"extra_{index}", keywords=[f"palavra{index}"], tools=[])
    with django_assert_max_num_queries(len(few.captured_queries)):
        response = staff_client.get(changelist_url(Intent))
    assert response.context["cl"].result_count == 19


# -- conversations are read-only ----------------------------------------------------------


def test_a_conversation_shows_its_history_with_no_save_button_and_no_actions(staff_client, conversation):
    response = staff_client.get(change_url(conversation))
    page = response.content.decode()
    assert response.status_code == 200
    for text in ("Minha fatura veio alta", "consultar_fatura", "support_agent", "Keyword &#x27;fatura&#x27; matched."):
        assert text in page
    assert 'name="_save"' not in page

    changelist = staff_client.get(changelist_url(Conversation))
    assert changelist.context["action_form"] is None  # not even "delete selected"


# -- the routing editors -----------------------------------------------------------------


def test_the_routing_editors_group_has_exactly_the_routing_content_permissions(editor):
    codenames = set(
        Permission.objects.filter(group__name="Routing editors").values_list("content_type__app_label", "codename")
    )
    full = {
        (app, f"{action}_{model}")
        for app, model in [
            ("routing", "intent"),
            ("routing", "keyword"),
            ("routing", "statepolicy"),
        ]
        for action in ("add", "change", "delete", "view")
    }
    # Prompt versions: no delete (the history is what a revert goes back to).
    prompts = {("agents", f"{action}_specialistprompt") for action in ("add", "change", "view")}
    view_only = {("agents", "view_agentprofile"), ("agents", "view_specialist"), ("agents", "view_mcptool")}
    view_only.add(("agents", "view_externaldesk"))  # which desk a profile's escalations go to; the operator's to change
    # Goals and capabilities: no delete (a re-sync would bring a deleted one back; disabling takes one out).
    goals = {
        ("routing", f"{action}_{model}") for model in ("goal", "capability") for action in ("add", "change", "view")
    }
    # Versions: publish and revert (add), read the history (view); a version is never changed or deleted.
    versions = {("routing", "add_routingversion"), ("routing", "view_routingversion")}
    # Routing tests, and saving the examples-tier calibration they choose to a profile's draft.
    routing_tests = {
        ("releases", f"{action}_routingtestcase") for action in ("add", "change", "delete", "view", "calibrate")
    }
    # Conversation tests, as the routing tests.
    routing_tests |= {("releases", f"{action}_conversationtest") for action in ("add", "change", "delete", "view")}
    # Their runs: started (add) and read, never changed or deleted (a run is what was found).
    routing_tests |= {("releases", "add_conversationtestrun"), ("releases", "view_conversationtestrun")}
    # The field-level history: read, never deleted.
    history = {("auditlog", "view_logentry")}
    # Rollout plans: made, changed and commanded (start, pause, ...), never deleted; the guard's decisions read.
    plans = {("releases", f"{action}_rolloutplan") for action in ("add", "change", "view")}
    plans |= {("releases", "view_rolloutdecision"), ("releases", "view_releaserequest")}  # and publish requests
    # Rollout flags belong to operators: read, never changed.
    flags = {
        ("routing", f"view_{model}")
        for model in ("rolloutflag", "rolloutuseroverride", "rollouttenantoverride", "rolloutflagchange")
    }
    # The conversation store, read (of the tenants a grant lets them read).
    store = {
        ("conversations", f"view_{model}")
        for model in ("conversation", "message", "routedecisionrecord", "toolcall", "messagefeedback")
    }
    store.add(("handoffs", "view_handoff"))
    # The profiles' knowledge: read, and edited by the one permission of its own (sources, documents, uploads).
    knowledge = {("knowledge", "view_knowledgesource"), ("knowledge", "edit_knowledge")}
    assert codenames == (
        full | prompts | view_only | goals | versions | routing_tests | history | plans | flags | store | knowledge
    )


def test_an_editor_can_add_an_intent_with_keywords(editor_client, telecom):
    response = add_intent(editor_client, telecom, name="cancel_request", keywords=["cancelar"])
    assert response.status_code == 302, errors_of(response)
    assert Intent.objects.get(name="cancel_request").keywords.get().text == "cancelar"


def test_an_editor_can_change_intents_keywords_and_state_policies(editor_client, billing, waiting_policy):
    for obj, changes in [
        (billing, {"priority": "7"}),
        (Keyword.objects.get(text="boleto"), {"text": "boletos"}),
        (waiting_policy, {"description": "Confirms payments."}),
    ]:
        data = form_data(editor_client.get(change_url(obj)))
        data.update(changes)
        response = editor_client.post(change_url(obj), data)
        assert response.status_code == 302, errors_of(response)
        obj.refresh_from_db()
        for name, value in changes.items():
            assert str(getattr(obj, name)) == value


def test_an_editor_can_delete_a_keyword(editor_client, billing):
    keyword = Keyword.objects.get(text="boleto")
    assert editor_client.post(delete_url(keyword), {"post": "yes"}).status_code == 302
    assert not Keyword.objects.filter(pk=keyword.pk).exists()


def test_an_editor_can_view_profiles_specialists_and_tools_but_not_change_them(editor_client, telecom):
    specialist = Specialist.objects.get(profile=telecom, name="billing_agent")
    tool = McpTool.objects.get(name="consultar_fatura")
    for obj in (telecom, specialist, tool):
        assert editor_client.get(change_url(obj)).status_code == 200
        assert editor_client.post(change_url(obj), {"name": "renamed"}).status_code == 403
        assert editor_client.get(add_url(type(obj))).status_code == 403
    telecom.refresh_from_db()
    assert telecom.name == "Agente Telecom Contas"


def test_an_editor_is_refused_servers_keys_tenants_and_users(editor_client, editor, telecom, tenant_key, conversation):
    server = McpServer.objects.get(name="telecom")
    refused = [
        changelist_url(McpServer),
        change_url(server),
        changelist_url(ApiKey),
        add_url(ApiKey),
        change_url(tenant_key),
        changelist_url(Tenant),
        change_url(tenant_key.tenant),
        reverse("admin:auth_user_changelist"),
        reverse("admin:auth_user_change", args=[editor.pk]),
        reverse("admin:auth_group_changelist"),
    ]
    for url in refused:
        assert editor_client.get(url).status_code == 403, url
    assert editor_client.post(change_url(server), {"name": "x"}).status_code == 403


def test_an_editor_reads_the_conversation_store_and_writes_none_of_it(editor_client, editor, conversation):
    TenantGrant.objects.create(tenant=conversation.tenant, user=editor, read_conversations=True)
    for model in (Conversation, Handoff):
        assert editor_client.get(changelist_url(model)).status_code == 200, model
    assert editor_client.post(change_url(conversation), {}).status_code == 403
    assert editor_client.get(delete_url(conversation)).status_code == 403


def test_the_index_links_the_route_preview_for_editors(editor_client):
    response = editor_client.get(reverse("admin:index"))
    assert PREVIEW_URL in response.content.decode()


def test_the_intent_changelist_links_the_route_preview(staff_client, telecom):
    assert PREVIEW_URL in staff_client.get(changelist_url(Intent)).content.decode()


# -- route preview ------------------------------------------------------------------------


def test_the_route_preview_form_renders_inside_the_admin(staff_client, telecom):
    response = staff_client.get(PREVIEW_URL)
    assert response.status_code == 200
    assert "admin/base_site.html" in [template.name for template in response.templates]
    assert response.context["preview"] is None
    assert "telecom_contas" in response.content.decode()


def test_the_route_preview_shows_the_keyword_decision_for_an_invoice_complaint(staff_client, telecom):
    response = staff_client.get(PREVIEW_URL, {"profile": telecom.pk, "text": "Minha fatura veio alta"})
    assert response.status_code == 200
    preview = response.context["preview"]
    decision = preview.decision
    assert (decision.agent, decision.intent, decision.method) == (
        "billing_agent",
        "billing_invoice_explanation",
        "keyword",
    )
    assert preview.matched_keywords == ["fatura"]
    assert preview.candidates == []
    assert preview.classifier is None
    page = response.content.decode()
    for text in ("billing_agent", "billing_invoice_explanation", "Keyword match", "fatura", "consultar_fatura"):
        assert text in page
    assert "Not consulted: the LLM classifier is switched off" in page


def test_the_route_preview_lists_the_candidate_it_beat(staff_client, telecom):
    # One request naming both ("Minha fatura e meu pedido" is two requests, answered together, as the chat does).
    response = staff_client.get(PREVIEW_URL, {"profile": telecom.pk, "text": "A fatura do meu pedido veio alta"})
    preview = response.context["preview"]
    assert preview.decision.intent == "billing_invoice_explanation"
    [candidate] = preview.candidates
    assert (candidate.intent, candidate.agent, candidate.priority, candidate.matched_keywords) == (
        "retail_order_tracking",
        "orders_agent",
        20,
        ["pedido"],
    )
    assert candidate.lost_because.startswith("Lower priority (20 vs 10")
    page = response.content.decode()
    assert "Candidates it beat" in page
    assert "retail_order_tracking" in page
    assert change_url(Intent.objects.get(name="retail_order_tracking")) in page


def test_the_route_preview_follows_a_state_policy_and_reports_a_handoff(staff_client, telecom, waiting_policy):
    support = Specialist.objects.get(profile=telecom, name="support_agent")
    response = staff_client.get(
        PREVIEW_URL,
        {
            "profile": telecom.pk,
            "text": "sim",
            "state": "WAITING_PAYMENT_CONFIRMATION",
            "active_specialist": support.pk,
        },
    )
    decision = response.context["preview"].decision
    assert (decision.method, decision.agent, decision.handoff) == ("state", "billing_agent", True)
    assert "from support_agent to billing_agent" in response.content.decode()


def test_the_route_preview_falls_back_when_nothing_matches(staff_client, telecom):
    response = staff_client.get(PREVIEW_URL, {"profile": telecom.pk, "text": "qual a capital da França?"})
    decision = response.context["preview"].decision
    assert (decision.method, decision.agent) == ("fallback", "support_agent")


def test_the_route_preview_reports_when_the_classifier_was_consulted(staff_client, telecom):
    telecom.llm_router_enabled = True
    telecom.save(update_fields=["llm_router_enabled"])
    response = staff_client.get(PREVIEW_URL, {"profile": telecom.pk, "text": "qual a capital da França?"})
    preview = response.context["preview"]
    assert preview.classifier is not None
    assert preview.classifier_note.startswith("Consulted")


def test_the_route_preview_refuses_an_active_specialist_of_another_profile(staff_client, telecom):
    stranger = SpecialistFactory(profile=AgentProfileFactory(agent_id="retail_orders"), name="orders_agent")
    response = staff_client.get(
        PREVIEW_URL, {"profile": telecom.pk, "text": "fatura", "active_specialist": stranger.pk}
    )
    assert response.context["preview"] is None
    assert "active_specialist" in response.context["form"].errors


def test_editors_may_use_the_route_preview(editor_client, telecom):
    response = editor_client.get(PREVIEW_URL, {"profile": telecom.pk, "text": "Minha fatura veio alta"})
    assert response.status_code == 200
    assert response.context["preview"].decision.agent == "billing_agent"


def test_the_route_preview_needs_view_permission_on_intents(client, django_user_model, telecom):
    clerk = django_user_model.objects.create_user("clerk", password="clerk-password", is_staff=True)
    client.force_login(clerk)
    assert client.get(PREVIEW_URL).status_code == 403


def test_the_route_preview_sends_anonymous_users_to_the_login(client):
    response = client.get(PREVIEW_URL)
    assert response.status_code == 302
    assert reverse("admin:login") in response["Location"]
