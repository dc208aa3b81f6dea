"""A profile's knowledge in the YAML export and import: sources and their documents' readable text exported, an
import into an empty database cutting the same passages, an import of the same files changing nothing, a dry run
saying what would change, and the uploads' bounds per tenant."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
import yaml
from django.contrib.auth.models import Permission
from django.core.management import call_command

from agents.models import AgentProfile
from knowledge.models import KnowledgeDocument, KnowledgePassage, KnowledgeSource, KnowledgeWord
from knowledge.services import document_ingest
from knowledge.tests.conftest import HELP_EN, HELP_ES, HELP_PT
from releases.configio import config_export_data
from releases.tests.test_config_io import AGENTS, SERVERS, TOOLS, empty_the_configuration, refused, run_import, write
from tests.factories import TenantFactory

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

PAGE = b"""<html><head><title>Delivery</title></head><body>
<h1>Delivery</h1><p>Orders ship within two days.</p>
<h2>Abroad</h2><p>International orders take two weeks.</p><p>Customs may hold a parcel for a few more days.</p>
</body></html>"""
NOTE = b"Opening hours: every day from 8 to 20.\n\nHolidays: from 10 to 16."
LONG = ("# Long\n\n## Terms\n\n" + "\n\n".join(f"Clause {n}: " + "words " * 60 for n in range(12))).encode()


@pytest.fixture
def knowledge(django_user_model, tmp_path):
    """telecom_contas (imported) with a shared source of Markdown, HTML and text, and one kept to a tenant."""
    small = tmp_path / "small"
    small.mkdir()
    run_import(
        *(write(small, name, text) for name, text in (("s.yaml", SERVERS), ("t.yaml", TOOLS), ("a.yaml", AGENTS)))
    )
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    owner = django_user_model.objects.create_user("keeper", "keeper@example.com", "keeper-password")
    shared = KnowledgeSource.objects.create(profile=profile, name="Help centre", language="en", tags=["help"])
    shared.owner = owner
    shared.save()
    for name, data in (("help.md", HELP_EN), ("delivery.html", PAGE), ("hours.txt", NOTE), ("long.md", LONG)):
        document_ingest(source=shared, file_name=name, data=data, tags=["faq"] if name == "help.md" else None)
    document_ingest(source=shared, file_name="ajuda.md", data=HELP_PT, language="pt")
    tenant = TenantFactory(slug="acme")
    own = KnowledgeSource.objects.create(profile=profile, name="Acme", language="es", tenant=tenant, enabled=False)
    document_ingest(source=own, file_name="envios.md", data=HELP_ES)
    return profile


def passages() -> dict[tuple[str, str], list[tuple[int, str, str]]]:
    """Every document's passages, by source and file name."""
    out: dict[tuple[str, str], list[tuple[int, str, str]]] = {}
    rows = KnowledgePassage.objects.order_by("document__source__name", "document__file_name", "position")
    for source, file_name, position, heading, text in rows.values_list(
        "document__source__name", "document__file_name", "position", "heading", "text"
    ):
        out.setdefault((source, file_name), []).append((position, heading, text))
    return out


def documents() -> list[tuple]:
    return list(
        KnowledgeDocument.objects.order_by("source__name", "file_name").values_list(
            "source__name", "file_name", "title", "kind", "language", "tags"
        )
    )


def sources() -> list[tuple]:
    return list(
        KnowledgeSource.objects.order_by("name").values_list(
            "profile__agent_id", "name", "language", "tags", "owner__username", "tenant__slug", "enabled"
        )
    )


def export(directory: Path) -> list[Path]:
    call_command("export_config", str(directory), stdout=StringIO())
    return sorted(directory.glob("*.yaml"))


def test_an_export_imported_into_an_empty_database_cuts_the_same_passages(knowledge, tmp_path):
    before = (passages(), documents(), sources())
    words = sorted(KnowledgeWord.objects.values_list("source__name", "word", "passages"))
    files = export(tmp_path / "first")
    exported = yaml.safe_load((tmp_path / "first" / "knowledge.telecom_contas.yaml").read_text(encoding="utf-8"))

    KnowledgeSource.objects.all().delete()
    empty_the_configuration()
    out = run_import(*files)

    assert (passages(), documents(), sources()) == before
    assert sorted(KnowledgeWord.objects.values_list("source__name", "word", "passages")) == words
    assert "knowledge sources: 2 created" in out and "knowledge documents: 6 created" in out
    (help_centre,) = [source for source in exported["knowledge_sources"] if source["name"] == "Help centre"]
    assert (help_centre["owner"], help_centre["tags"], "tenant" not in help_centre) == ("keeper", ["help"], True)
    assert [(document["file_name"], document["kind"]) for document in help_centre["documents"]] == [
        ("ajuda.md", "markdown"),
        ("delivery.html", "html"),
        ("help.md", "markdown"),
        ("hours.txt", "text"),
        ("long.md", "markdown"),
    ]
    assert config_export_data()["knowledge.telecom_contas.yaml"] == yaml.safe_load(
        (export(tmp_path / "second")[0].parent / "knowledge.telecom_contas.yaml").read_text(encoding="utf-8")
    )


def test_importing_the_exported_knowledge_again_changes_nothing(knowledge, tmp_path):
    files = export(tmp_path)
    rows = list(KnowledgeDocument.objects.order_by("pk").values())

    out = run_import(tmp_path / "knowledge.telecom_contas.yaml")

    assert list(KnowledgeDocument.objects.order_by("pk").values()) == rows
    assert "knowledge documents: 6 unchanged" in out and "changed nothing" in out
    assert files


def test_a_dry_run_says_which_document_would_change_and_writes_nothing(knowledge, tmp_path):
    export(tmp_path)
    path = tmp_path / "knowledge.telecom_contas.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("five working days", "ten working days"), "utf-8")
    before = passages()

    out = run_import(path, dry_run=True)

    assert passages() == before
    assert "knowledge documents: 1 updated, 5 unchanged" in out
    assert "Help centre" in out and "help.md" in out  # the draft's "what changed": the document replaced

    run_import(path)
    assert "ten working days" in str(passages()[("Help centre", "help.md")])


def test_an_import_past_a_tenants_bound_of_documents_is_refused_whole(knowledge, tmp_path, settings):
    export(tmp_path)
    path = tmp_path / "knowledge.telecom_contas.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    (help_centre,) = [source for source in data["knowledge_sources"] if source["name"] == "Help centre"]
    help_centre["documents"].append({"file_name": "more.txt", "text": "One more document."})
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    settings.KNOWLEDGE_MAX_DOCUMENTS = 5  # the shared sources hold 5
    before = documents()

    message = refused(path)

    assert "holds 5 documents already, the most it may" in message and "knowledge.telecom_contas.yaml" in message
    assert documents() == before


def test_an_import_by_a_user_who_may_not_edit_knowledge_is_refused_and_one_who_may_passes(
    knowledge, tmp_path, django_user_model
):
    export(tmp_path)
    path = tmp_path / "knowledge.telecom_contas.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("five working days", "ten working days"), "utf-8")
    router = django_user_model.objects.create_user("router", "router@example.com", "router-password", is_staff=True)
    router.user_permissions.add(Permission.objects.get(codename="change_intent", content_type__app_label="routing"))
    before = passages()

    message = refused(path, user="router")

    assert "knowledge.edit_knowledge" in message and passages() == before
    router.user_permissions.add(Permission.objects.get(codename="edit_knowledge"))
    run_import(path, user="router")
    assert "ten working days" in str(passages()[("Help centre", "help.md")])


def test_a_sources_synonyms_go_through_the_export_and_an_import_and_only_a_knowledge_editor_changes_them(
    knowledge, tmp_path, django_user_model
):
    shared = KnowledgeSource.objects.get(name="Help centre")
    shared.synonyms = [["refund", "money back", "reimbursement"], ["password", "passcode"]]
    shared.save()
    files = export(tmp_path)
    exported = yaml.safe_load((tmp_path / "knowledge.telecom_contas.yaml").read_text(encoding="utf-8"))
    (help_centre,) = [source for source in exported["knowledge_sources"] if source["name"] == "Help centre"]

    KnowledgeSource.objects.all().delete()
    empty_the_configuration()
    run_import(*files)

    assert help_centre["synonyms"] == [["refund", "money back", "reimbursement"], ["password", "passcode"]]
    assert KnowledgeSource.objects.get(name="Help centre").synonyms == help_centre["synonyms"]
    assert KnowledgeSource.objects.get(name="Acme").synonyms == []
    path = tmp_path / "knowledge.telecom_contas.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("passcode", "PIN code"), "utf-8")
    router = django_user_model.objects.create_user("router", "router@example.com", "router-password", is_staff=True)
    router.user_permissions.add(Permission.objects.get(codename="change_intent", content_type__app_label="routing"))

    message = refused(path, user="router")

    assert "knowledge.edit_knowledge" in message
    assert KnowledgeSource.objects.get(name="Help centre").synonyms[1] == ["password", "passcode"]
    router.user_permissions.add(Permission.objects.get(codename="edit_knowledge"))
    run_import(path, user="router")
    assert KnowledgeSource.objects.get(name="Help centre").synonyms[1] == ["password", "PIN code"]
