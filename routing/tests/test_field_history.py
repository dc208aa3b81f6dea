"""Field-level history of every routing model: each save records the fields it changed as old → new,
with who (the admin user, or "system" for an import) and when; the object's "History" page in the admin shows
them, inline children included; the "Routing changes" list is read-only, and routing editors may read it only.
"""

from __future__ import annotations

from io import StringIO

import pytest
from auditlog.models import LogEntry
from auditlog.registry import auditlog
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection
from django.urls import reverse

from agents.models import AgentProfile, McpServer, McpTool, RemoteBackend, Specialist, SpecialistPrompt
from common.history.admin import history_entries
from releases.models import RoutingTestCase
from routing.models import (
    Capability,
    Goal,
    Intent,
    Keyword,
    RolloutFlag,
    RolloutTenantOverride,
    RolloutUserOverride,
    StatePolicy,
)
from tests.adminkit import change_url, changelist_url, form_data

pytestmark = pytest.mark.django_db


def history_url(obj) -> str:
    return reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_history", args=[obj.pk])


def changes_of(obj) -> list[dict]:
    return [entry.changes_dict for entry in LogEntry.objects.get_for_object(obj).order_by("timestamp", "pk")]


@pytest.fixture
def intent(telecom) -> Intent:
    found = Intent.objects.get(profile=telecom, name="product_information")
    Intent.objects.filter(pk=found.pk).update(priority=15)  # a queryset update records nothing
    found.refresh_from_db()
    return found


def test_every_model_that_decides_routing_is_recorded():
    for model in (
        AgentProfile,
        Specialist,
        SpecialistPrompt,
        McpServer,
        McpTool,
        Intent,
        Keyword,
        StatePolicy,
        Goal,
        Capability,
        RolloutFlag,
        RolloutUserOverride,
        RolloutTenantOverride,
        RoutingTestCase,
    ):
        assert auditlog.contains(model), model


def test_an_editor_changing_a_priority_in_the_admin_shows_15_to_10_with_the_editor_and_time_in_its_history(
    editor_client, editor, intent
):
    data = form_data(editor_client.get(change_url(intent)))
    data["priority"] = "10"

    response = editor_client.post(change_url(intent), data)

    assert response.status_code == 302, response.content
    entry = LogEntry.objects.get_for_object(intent).get(action=LogEntry.Action.UPDATE)
    assert entry.changes_dict == {"priority": ["15", "10"]}
    assert entry.actor == editor
    page = editor_client.get(history_url(intent))
    assert page.status_code == 200
    html = page.content.decode()
    assert "Priority" in html and ">15</span></td>" in html and ">10</span></td>" in html
    assert "editor" in html
    assert entry.timestamp.strftime("%Y") in html
    assert "updated_at" not in html.lower().replace(" ", "_")  # bookkeeping fields are left out


def test_a_keyword_added_inline_shows_in_the_intents_history(editor_client, editor, intent):
    data = form_data(editor_client.get(change_url(intent)))
    data["keywords-TOTAL_FORMS"] = str(int(data["keywords-TOTAL_FORMS"]))
    blank = next(i for i in range(int(data["keywords-TOTAL_FORMS"])) if not data.get(f"keywords-{i}-text"))
    data[f"keywords-{blank}-text"] = "fibra óptica"

    response = editor_client.post(change_url(intent), data)

    assert response.status_code == 302, response.content
    keyword = Keyword.objects.get(intent=intent, text="fibra óptica")
    created = LogEntry.objects.get_for_object(keyword).get()
    assert created.action == LogEntry.Action.CREATE and created.actor == editor
    html = editor_client.get(history_url(intent)).content.decode()
    assert "fibra óptica" in html
    assert "keyword" in html.lower()


@pytest.mark.sqlite_too
def test_a_keyword_deleted_still_shows_in_the_intents_history(staff_user, client, intent):
    client.force_login(staff_user)
    keyword = intent.keywords.get(text="plano")
    keyword.delete()

    html = client.get(history_url(intent)).content.decode()

    assert "plano" in html
    assert '<span class="entry-action">delete</span>' in html


@pytest.mark.sqlite_too
def test_an_intents_history_holds_its_deleted_keywords_entries_and_no_other_intents(intent):
    other = Intent.objects.get(profile=intent.profile, name="support_request")
    plano = intent.keywords.get(text="plano")
    plano.delete()
    other.keywords.get(text="troca").delete()

    found = history_entries(intent, children=[(Keyword, "intent")])

    keywords = {(entry.object_repr, entry.action) for entry in found if entry.content_type.model == "keyword"}
    assert ("plano", LogEntry.Action.DELETE) in keywords and ("plano", LogEntry.Action.CREATE) in keywords
    assert "troca" not in {name for name, _ in keywords}


@pytest.mark.parametrize("pending", [0, 330], ids=["nothing else pending", "earlier tests' entries pending"])
def test_on_postgresql_a_deleted_keywords_entries_are_found_through_an_index(intent, pending):
    """Among many entries of keywords, those of one intent's deleted keyword are read through the GIN index of
    common.0003, not by reading every keyword's entry.

    GIN keeps new entries in a pending list (up to 4 MB) until autovacuum's analyze or a vacuum merges them, entries
    of rolled-back transactions such as earlier tests' too, and the planner prices that list in: on a table this
    small a nearly full list outweighs the index. So the test merges the list, as autovacuum does on a live
    database, whatever the tests before it left there."""
    if connection.vendor != "postgresql":
        pytest.skip("the index is PostgreSQL's")
    keyword_type = ContentType.objects.get_for_model(Keyword)
    with connection.cursor() as cursor:
        cursor.execute(  # other intents' keywords: fewer, and reading them all beats any index
            "INSERT INTO auditlog_logentry (content_type_id, object_pk, object_id, object_repr, action, changes_text,"
            " changes, timestamp) SELECT %s, n::text, n, 'word ' || n, 0, '', jsonb_build_object('intent',"
            " jsonb_build_array('None', (100000 + n)::text)), now() FROM generate_series(10000, 40000) AS n",
            [keyword_type.pk],
        )
        cursor.execute("SAVEPOINT earlier_test")  # wide entries, written and rolled back: pending, little heap
        cursor.execute(
            "INSERT INTO auditlog_logentry (content_type_id, object_pk, object_id, object_repr, action, changes_text,"
            " changes, timestamp) SELECT %s, n::text, n, 'import', 1, '', (SELECT jsonb_object_agg('field_' || k,"
            " jsonb_build_array(k::text, n::text)) FROM generate_series(1, 200) AS k), now()"
            " FROM generate_series(1, %s) AS n",
            [keyword_type.pk, pending],
        )
        cursor.execute("ROLLBACK TO SAVEPOINT earlier_test")
    intent.keywords.get(text="plano").delete()
    found = history_entries(intent, children=[(Keyword, "intent")])
    with connection.cursor() as cursor:
        cursor.execute("SELECT gin_clean_pending_list('common_history_changes_gin')")
        cursor.execute("ANALYZE auditlog_logentry")

    plan = found.explain()

    assert "common_history_changes_gin" in plan, plan
    assert {"plano"} <= {entry.object_repr for entry in found}


def test_a_tool_added_to_a_specialist_is_recorded_as_a_relation_change(telecom):
    billing = Specialist.objects.get(profile=telecom, name="billing_agent")
    pedido = McpTool.objects.get(name="consultar_pedido")

    billing.allowed_tools.add(pedido)
    billing.handoff_targets.add(Specialist.objects.get(profile=telecom, name="support_agent"))

    changes = changes_of(billing)
    assert {"allowed_tools": {"type": "m2m", "operation": "add", "objects": ["consultar_pedido"]}} in changes
    assert any("handoff_targets" in change for change in changes)


def test_an_import_is_recorded_without_an_actor_and_its_history_says_system(staff_user, client, telecom, tmp_path):
    path = tmp_path / "routing.telecom_contas.yaml"
    path.write_text(
        "agent_id: telecom_contas\nintents:\n  - name: retail_order_tracking\n    domain: retail\n"
        "    agent: orders_agent\n    priority: 25\n    keywords: [pedido, entrega, rastreio, atraso, modem]\n",
        encoding="utf-8",
    )

    before = LogEntry.objects.latest("pk").pk

    call_command("import_config", str(path), stdout=StringIO(), stderr=StringIO())

    tracking = Intent.objects.get(profile=telecom, name="retail_order_tracking")
    update = LogEntry.objects.get_for_object(tracking).filter(pk__gt=before).get()
    assert update.changes_dict == {"priority": ["20", "25"]}
    assert update.actor is None
    modem = Keyword.objects.get(intent=tracking, text="modem")
    assert LogEntry.objects.get_for_object(modem).get().actor is None
    client.force_login(staff_user)
    html = client.get(history_url(tracking)).content.decode()
    assert "system" in html and "modem" in html


def test_mcp_server_credentials_in_its_endpoint_never_reach_the_log(db):
    server = McpServer.objects.create(name="crm", endpoint="https://bot:s3cr3t-pass@crm.example/mcp?token=t0ps3cret")
    server.endpoint = "https://bot:n3w-pass@crm.example/mcp?api_key=an0ther&region=eu"
    server.save()

    stored = " ".join(str(entry.changes) for entry in LogEntry.objects.get_for_object(server))
    for secret in ("s3cr3t-pass", "t0ps3cret", "n3w-pass", "an0ther", "bot:"):
        assert secret not in stored
    assert "crm.example/mcp" in stored  # which server it is still shows


def test_a_profiles_model_endpoint_credentials_never_reach_the_history_an_editor_reads(editor_client, telecom):
    telecom.llm_base_url = "https://llmuser:llm-pa55@llm.example/v1?api_key=llm-k3y"
    telecom.save()
    telecom.llm_base_url = "https://llmuser:n3w-pa55@llm.example/v2"
    telecom.save()
    entries = LogEntry.objects.get_for_object(telecom).order_by("pk")

    stored = " ".join(str(entry.changes) for entry in entries)
    pages = editor_client.get(history_url(telecom)).content.decode() + "".join(
        editor_client.get(change_url(entry)).content.decode() for entry in entries
    )
    for secret in ("llm-pa55", "llm-k3y", "n3w-pa55", "llmuser"):
        assert secret not in stored and secret not in pages
    assert "https://***@llm.example/v1?api_key=***" in stored  # which endpoint it was still shows


def test_every_address_a_recorded_model_holds_is_masked_in_its_history():
    from django.db import models

    for model in auditlog.get_models():
        options = auditlog.get_model_fields(model)
        for field in model._meta.concrete_fields:
            if isinstance(field, models.URLField) or field.name.endswith(("url", "endpoint")):
                assert field.name in options["mask_fields"], f"{model.__name__}.{field.name}"


def test_a_routing_editor_may_read_the_routing_changes_but_not_delete_or_change_them(editor_client, editor, intent):
    data = form_data(editor_client.get(change_url(intent)))
    data["priority"] = "10"
    editor_client.post(change_url(intent), data)
    entry = LogEntry.objects.get_for_object(intent).get(action=LogEntry.Action.UPDATE)

    listing = editor_client.get(changelist_url(LogEntry))
    assert listing.status_code == 200
    assert "product_information" in listing.content.decode()
    delete = reverse("admin:auditlog_logentry_delete", args=[entry.pk])
    assert editor_client.get(delete).status_code == 403
    assert editor_client.post(delete, {"post": "yes"}).status_code == 403
    bulk = editor_client.post(
        changelist_url(LogEntry), {"action": "delete_selected", "_selected_action": [entry.pk], "post": "yes"}
    )
    assert bulk.status_code in (200, 302)
    assert LogEntry.objects.filter(pk=entry.pk).exists()
    assert editor.has_perm("auditlog.view_logentry")
    assert not editor.has_perm("auditlog.delete_logentry")


def test_even_a_superuser_cannot_delete_a_history_entry(admin_client, intent):
    intent.priority = 10
    intent.save(update_fields=["priority"])
    entry = LogEntry.objects.get_for_object(intent).get(action=LogEntry.Action.UPDATE)

    assert admin_client.get(reverse("admin:auditlog_logentry_delete", args=[entry.pk])).status_code == 403


def test_the_routing_changes_list_filters_by_model_user_and_date(admin_client, editor_client, editor, intent):
    data = form_data(editor_client.get(change_url(intent)))
    data["priority"] = "10"
    editor_client.post(change_url(intent), data)
    McpServer.objects.create(name="crm", endpoint="http://crm.example/mcp")
    intent_type = LogEntry.objects.get_for_object(intent).first().content_type

    by_model = admin_client.get(changelist_url(LogEntry), {"resource_type": intent_type.pk}).content.decode()
    by_user = admin_client.get(changelist_url(LogEntry), {"actor__id__exact": editor.pk}).content.decode()
    today = LogEntry.objects.latest("timestamp").timestamp
    by_date = admin_client.get(
        changelist_url(LogEntry),
        {"timestamp__year": today.year, "timestamp__month": today.month, "timestamp__day": today.day},
    )

    assert "product_information" in by_model and ">crm<" not in by_model
    assert "product_information" in by_user and "crm" not in by_user
    assert by_date.status_code == 200 and "product_information" in by_date.content.decode()


def test_the_profile_page_links_the_routing_changes(admin_client, telecom):
    html = admin_client.get(change_url(telecom)).content.decode()

    assert changelist_url(LogEntry) in html and "Routing changes" in html


@pytest.mark.parametrize("model", [AgentProfile, Specialist, McpServer, McpTool, Intent, Keyword, RoutingTestCase])
def test_each_routing_models_history_page_shows_field_changes(admin_client, telecom, model):
    obj = model.objects.first()
    if obj is None:
        obj = RoutingTestCase.objects.create(profile=telecom, name="fatura", message="fatura", expect={"intent": "x"})
    field = "description" if hasattr(obj, "description") else ("text" if model is Keyword else "message")
    setattr(obj, field, "changed for the history test")
    obj.save()

    html = admin_client.get(history_url(obj)).content.decode()

    assert "changed for the history test" in html


def test_switching_mcp_tools_off_in_bulk_records_each_one_with_the_editor(admin_client, admin_user, telecom):
    tools = list(McpTool.objects.filter(server__name="telecom"))

    admin_client.post(
        changelist_url(McpTool), {"action": "disable_selected", "_selected_action": [tool.pk for tool in tools]}
    )

    for tool in tools:
        entry = LogEntry.objects.get_for_object(tool).get(action=LogEntry.Action.UPDATE)
        assert entry.changes_dict == {"enabled": ["True", "False"]} and entry.actor == admin_user


def test_a_routing_editor_finds_the_routing_changes_on_the_admin_index(editor_client):
    html = editor_client.get(reverse("admin:index")).content.decode()

    assert "Routing changes" in html and changelist_url(LogEntry) in html


def test_the_routing_changes_pages_list_search_and_show_an_entry_and_refuse_adding(admin_client, intent):
    intent.priority = 10
    intent.save(update_fields=["priority"])
    entry = LogEntry.objects.get_for_object(intent).get(action=LogEntry.Action.UPDATE)

    listing = admin_client.get(changelist_url(LogEntry)).content.decode()
    found = admin_client.get(changelist_url(LogEntry), {"q": "product_information"}).content.decode()
    missed = admin_client.get(changelist_url(LogEntry), {"q": "no-such-object"}).content.decode()
    page = admin_client.get(change_url(entry))

    assert "product_information" in listing and "product_information" in found
    assert "product_information" not in missed
    assert page.status_code == 200 and "Priority" in page.content.decode()
    assert admin_client.get(reverse("admin:auditlog_logentry_add")).status_code == 403


CALIBRATION = {
    "at": "2026-11-24T19:59:52.911390+00:00",
    "by": "maria",
    "chosen": {"accuracy": 0.7504, "fallback_rate": 0.2368, "margin": 0.94, "threshold": 0.97},
    "current": {"accuracy": 0.8032, "fallback_rate": 0.1768, "margin": 0.84, "threshold": 0.92},
    "mistakes": [
        {"expected": "fallback", "got": "retail_order_tracking", "text": "boa tarde"},
        {"expected": "billing_invoice_explanation", "got": "billing_payment_request", "text": "the numbers"},
    ],
    "samples": 1216,
}


def changes_table(html: str) -> str:
    """The tables of changes of a History page or an entry's page."""
    return "".join(part.split("</table>")[0] for part in html.split('<table class="history-changes">')[1:])


def test_a_calibration_saved_to_a_profile_reads_key_by_key_in_its_history_and_entry_not_as_json(editor_client, telecom):
    telecom.examples_calibration = CALIBRATION
    telecom.save()
    entry = LogEntry.objects.get_for_object(telecom).latest("pk")

    for page in (history_url(telecom), change_url(entry)):
        table = changes_table(editor_client.get(page).content.decode())
        assert "Examples calibration › chosen" in table
        assert "<li>accuracy: 0.7504</li>" in table and "<li>fallback rate: 0.2368</li>" in table
        assert "<li>expected: fallback</li><li>got: retail_order_tracking</li>" in table  # a mistake, one a line
        assert "Examples calibration › by" in table and ">maria<" in table
        assert "{&quot;" not in table and "[{" not in table  # no JSON
    listing = editor_client.get(changelist_url(LogEntry)).content.decode()
    assert "1 change: examples calibration" in listing


def test_a_setting_changed_within_a_json_field_shows_only_the_keys_that_changed(admin_client, telecom):
    telecom.guardrails = {"blocked_terms": ["senha"], "max_input_chars": 500}
    telecom.save()
    telecom.guardrails = {"blocked_terms": ["senha"], "max_input_chars": 800}
    telecom.save()

    table = changes_table(admin_client.get(history_url(telecom)).content.decode())

    assert "Guardrails › max input chars" in table
    assert ">500</span>" in table and ">800</span>" in table


def test_examples_added_and_removed_are_named_not_the_whole_list(admin_client, intent):
    intent.examples = ["quero um plano", "qual o preço do plano"]
    intent.save()
    intent.examples = ["quero um plano", "tem internet fibra?"]
    intent.save()

    table = changes_table(admin_client.get(history_url(intent)).content.decode())

    assert "removed: “qual o preço do plano”" in table and "added: “tem internet fibra?”" in table
    update = table.split("</tr>")[1]  # the newest entry's first row
    assert "quero um plano" not in update


def test_a_keywords_intent_reads_as_its_name_and_a_switch_as_yes_or_no(admin_client, intent):
    keyword = Keyword.objects.create(intent=intent, text="fibra")
    intent.enabled = False
    intent.save()

    keyword_table = changes_table(admin_client.get(history_url(keyword)).content.decode())
    intent_table = changes_table(admin_client.get(history_url(intent)).content.decode())

    assert ">product_information</span>" in keyword_table
    assert ">yes</span>" in intent_table and ">no</span>" in intent_table


def test_a_masked_key_stays_masked_in_the_words(admin_client, telecom):
    backend = RemoteBackend.objects.create(
        profile=telecom, name="offers", base_url="https://offers.example/x?token=t0ps3cret", api_key="sk-s3cret-key"
    )
    backend.api_key = "sk-n3w-key"
    backend.save()

    html = admin_client.get(history_url(backend)).content.decode() + "".join(
        admin_client.get(change_url(entry)).content.decode() for entry in LogEntry.objects.get_for_object(backend)
    )

    for secret in ("sk-s3cret-key", "sk-n3w-key", "t0ps3cret"):
        assert secret not in html
    assert "***" in changes_table(html)
