"""`manage.py seed_demo` loads the demo once: a restart never undoes an admin's edit."""

from __future__ import annotations

import io

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command

from agents.models import AgentProfile, McpServer, McpTool, Specialist
from agents.services import prompt_version_create
from knowledge.models import KnowledgeDocument, KnowledgePassage, KnowledgeSource
from knowledge.search import knowledge_search
from releases.evals.gate import ConversationTestsFailed
from releases.versions import version_publish
from routing.documents import profile_documents
from routing.models import Intent, Keyword, RoutingVersion
from routing.selectors import live_version
from tests.demo_snapshot import demo_seed

pytestmark = pytest.mark.django_db

DEMO_PROFILES = ("telecom_contas", "retail_orders", "telecom_assistente", "finance_assistente")


def seed_demo(*args: str) -> str:
    out = io.StringIO()
    call_command("seed_demo", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def admin_edits() -> None:
    """What the product review's admin changed before restarting scripts/start."""
    intent = Intent.objects.get(profile__agent_id="telecom_contas", name="billing_invoice_explanation")
    intent.priority = 1
    intent.save()
    Keyword.objects.create(intent=intent, text="conta cara")
    specialist = Specialist.objects.get(profile__agent_id="telecom_contas", name="billing_agent")
    prompt_version_create(specialist=specialist, text="Você é o especialista de faturas (editado).")


def edits_published(profile: AgentProfile, note: str, *, refused_first: bool = False):
    """Publish the admin's edits. They send payment requests to the invoice specialist, which the demo's required
    conversation tests catch: the publish is refused, and goes through with a reason, as the admin would publish it."""
    if refused_first:
        with pytest.raises(ConversationTestsFailed, match="billing_payment_request"):
            version_publish(profile=profile, note=note)
    admin = get_user_model().objects.create_superuser("edits", "edits@example.com", "x")
    return version_publish(profile=profile, note=note, user=admin, forced_reason="priority to the invoice specialist")


def edited(document: dict) -> tuple:
    intent = document["intents"]["billing_invoice_explanation"]
    return intent["priority"], "conta cara" in intent["keywords"], document["specialists"]["billing_agent"]["prompt"]


def test_the_demo_import_is_each_demo_profiles_version_1_with_its_note():
    out = demo_seed().stdout  # this worker's record of the first start if it has one: a real seed's rows and output
    for agent_id in DEMO_PROFILES:
        profile = AgentProfile.objects.get(agent_id=agent_id)
        version = live_version(profile)
        assert (version.number, version.note) == (1, "Demo import (config/demo)")
        assert version.document == profile_documents([agent_id])[agent_id]
        assert f"{agent_id}: loaded, published as version 1" in out


def test_a_restart_keeps_the_admins_published_edit_and_draft_edit():
    demo_seed()  # the first start, from this worker's record: the restart below is what runs for real
    admin_edits()
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    published = edits_published(profile, "priority 1, conta cara, prompt edited", refused_first=True)
    Intent.objects.filter(profile=profile, name="billing_invoice_explanation").update(priority=2)  # a draft edit
    tools_before = list(McpTool.objects.order_by("name").values_list("name", "description", "enabled"))
    McpServer.objects.filter(name="retail").update(timeout=33)

    out = seed_demo()

    assert live_version(profile) == published
    assert RoutingVersion.objects.filter(profile=profile).count() == 2
    assert edited(published.document) == (1, True, "Você é o especialista de faturas (editado).")
    assert edited(profile_documents(["telecom_contas"])["telecom_contas"])[0] == 2
    assert list(McpTool.objects.order_by("name").values_list("name", "description", "enabled")) == tools_before
    assert McpServer.objects.get(name="retail").timeout == 33
    assert "telecom_contas: already there: left as it is" in out
    assert "changed nothing" in out


def test_a_profile_the_user_made_with_a_demo_agent_id_is_left_alone_and_the_rest_of_the_demo_loaded():
    AgentProfile.objects.create(agent_id="retail_orders", name="Our own retail profile")

    out = seed_demo()

    mine = AgentProfile.objects.get(agent_id="retail_orders")
    assert (
        mine.name == "Our own retail profile"
        and not mine.specialists.exists()
        and not Intent.objects.filter(profile=mine).exists()
    )
    assert live_version(mine) is None
    assert "retail_orders: already there: left as it is" in out
    for agent_id in ("telecom_contas", "telecom_assistente", "finance_assistente"):
        assert live_version(AgentProfile.objects.get(agent_id=agent_id)).number == 1
    assert McpTool.objects.filter(name="consultar_pedido").exists()  # the shared tools come all the same


def test_force_reloads_the_demo_over_the_edits_and_publishes_it():
    demo_seed()  # the first start, from this worker's record: the restart below is what runs for real
    admin_edits()
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    demo = live_version(profile)
    assert edited(edits_published(profile, "edited").document)[:2] == (1, True)

    out = seed_demo("--force")

    version = live_version(profile)
    assert version.number == 3 and version.note == "Demo reloaded (config/demo, --force)"
    assert edited(version.document) == edited(demo.document)
    assert edited(demo.document)[:2] == (10, False)
    assert "telecom_contas: reloaded, published as version 3" in out
    assert "retail_orders: reloaded; its live version 1 is the same" in out


def write_tests(directory, expect_intent: str) -> None:
    directory.mkdir()
    (directory / "telecom_contas.yaml").write_text(
        "profile: telecom_contas\n"
        "tests:\n"
        "  - name: fatura alta\n"
        '    message: "Minha fatura veio alta"\n'
        f"    expect: {{intent: {expect_intent}, agent: billing_agent}}\n",
        encoding="utf-8",
    )


def test_the_demos_routing_tests_are_loaded_before_it_is_published(tmp_path, monkeypatch):
    from releases.management.commands import seed_demo as command
    from releases.models import RoutingTestCase

    write_tests(tmp_path / "tests", "billing_invoice_explanation")
    monkeypatch.setattr(command, "TESTS_DIR", tmp_path / "tests")

    seed_demo()

    version = live_version(AgentProfile.objects.get(agent_id="telecom_contas"))
    assert version.number == 1 and version.test_summary["passed"] == 1
    assert list(RoutingTestCase.objects.values_list("profile__agent_id", "name")) == [("telecom_contas", "fatura alta")]


def test_a_demo_profile_whose_routing_tests_fail_is_loaded_as_a_draft_and_the_rest_published(tmp_path, monkeypatch):
    from releases.management.commands import seed_demo as command

    write_tests(tmp_path / "tests", "retail_order_tracking")
    monkeypatch.setattr(command, "TESTS_DIR", tmp_path / "tests")

    seed_demo()

    assert live_version(AgentProfile.objects.get(agent_id="telecom_contas")) is None
    assert live_version(AgentProfile.objects.get(agent_id="retail_orders")).number == 1


def help_centre(agent_id: str) -> dict[str, list[str]]:
    """A profile's knowledge: its sources' names and languages, each with its documents' file names."""
    out: dict[str, list[str]] = {}
    for source in KnowledgeSource.objects.filter(profile__agent_id=agent_id).order_by("name"):
        out[f"{source.name} ({source.language})"] = sorted(source.documents.values_list("file_name", flat=True))
    return out


def articles(folder: str, language: str) -> list[str]:
    return sorted(path.name for path in (settings.BASE_DIR / "config/demo/knowledge" / folder / language).glob("*.md"))


@pytest.mark.sqlite_too  # the demo runs on the embedded default's database
def test_each_demo_profile_gets_its_help_centre_a_source_per_language_and_searches_it():
    out = demo_seed().stdout  # as above: restored or real, the same rows (tests/test_demo_snapshot.py)

    for agent_id, folder in [(a, a) for a in DEMO_PROFILES if a != "telecom_assistente"] + [
        ("telecom_assistente", "telecom_contas")
    ]:
        assert help_centre(agent_id) == {
            "Central de ajuda (pt)": articles(folder, "pt"),
            "Centro de ayuda (es)": articles(folder, "es"),
            "Help centre (en)": articles(folder, "en"),
        }
        assert len(articles(folder, "pt")) >= 2
        total = sum(len(articles(folder, language)) for language in ("pt", "en", "es"))
        assert f"{agent_id}: help centre: {total} articles, {total} created, 0 replaced." in out
    profile = AgentProfile.objects.get(agent_id="retail_orders")
    hits = knowledge_search(profile=profile, query="quero trocar o tamanho do tênis", language="pt")
    assert hits[0].file_name == "trocas-e-devolucoes.md"
    assert hits[0].heading.startswith("Trocas e devoluções")


def test_a_restart_leaves_the_help_centre_as_it_is_and_force_uploads_only_what_is_missing():
    demo_seed()  # the first start, from this worker's record: the restart below is what runs for real
    documents = KnowledgeDocument.objects.filter(source__profile__agent_id="telecom_contas")
    removed = {"file_name": "roaming-internacional.md", "source__language": "pt"}
    others = documents.exclude(**removed)
    before = sorted(others.values_list("pk", "content_hash", "uploaded_at"))
    passages = sorted(KnowledgePassage.objects.filter(document__in=others).values_list("pk", "text"))
    documents.get(**removed).delete()  # an admin removes an article

    out = seed_demo()

    assert "help centre" not in out
    assert not documents.filter(**removed).exists()

    out = seed_demo("--force")

    assert "telecom_contas: help centre: 18 articles, 1 created, 0 replaced." in out
    assert documents.filter(**removed).get().passages.exists()
    assert sorted(others.values_list("pk", "content_hash", "uploaded_at")) == before
    assert sorted(KnowledgePassage.objects.filter(document__in=others).values_list("pk", "text")) == passages
