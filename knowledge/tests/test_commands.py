"""manage.py import_knowledge: files or a folder into a profile's source, a dry run, and a file it cannot read."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from knowledge.models import KnowledgeDocument, KnowledgeSource
from knowledge.tests.conftest import HELP_EN, HELP_PT

pytestmark = pytest.mark.django_db


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "help.md").write_bytes(HELP_EN)
    (tmp_path / "ajuda.md").write_bytes(HELP_PT)
    (tmp_path / "notes.docx").write_bytes(b"not read: no known kind")
    return tmp_path


def test_a_folder_is_imported_into_a_new_source_in_the_profiles_language(folder, profile, capsys):
    call_command("import_knowledge", str(folder), "--profile", profile.agent_id, "--tags", "faq")

    source = KnowledgeSource.objects.get(profile=profile, name="documents")
    assert source.language == profile.language
    assert sorted(source.documents.values_list("file_name", flat=True)) == ["ajuda.md", "help.md"]
    assert capsys.readouterr().out.splitlines() == [
        "ajuda.md: created, 2 passages (2 added, 0 removed, 0 kept).",
        "help.md: created, 2 passages (2 added, 0 removed, 0 kept).",
    ]


def test_a_dry_run_says_what_would_change_and_writes_nothing(folder, profile, capsys):
    call_command("import_knowledge", str(folder / "help.md"), "--profile", profile.agent_id, "--dry-run")

    assert capsys.readouterr().out.startswith("(dry run) help.md: created, 2 passages")
    assert not KnowledgeSource.objects.exists() and not KnowledgeDocument.objects.exists()


def test_a_file_it_cannot_read_is_named_the_others_go_in_and_the_command_fails(tmp_path, source, capsys):
    (tmp_path / "deep.html").write_bytes(b"<div>" * 500)
    (tmp_path / "help.md").write_bytes(HELP_EN)

    with pytest.raises(CommandError, match="1 of 2 files could not be imported"):
        call_command("import_knowledge", str(tmp_path), "--profile", source.profile.agent_id, "--source", source.name)

    assert "deep.html: The HTML is nested more than" in capsys.readouterr().err
    assert list(source.documents.values_list("file_name", flat=True)) == ["help.md"]


def test_an_unknown_profile_or_path_is_refused(folder, profile):
    with pytest.raises(CommandError, match="Unknown profile"):
        call_command("import_knowledge", str(folder), "--profile", "nobody")
    with pytest.raises(CommandError, match="No such file or folder"):
        call_command("import_knowledge", str(folder / "missing.md"), "--profile", profile.agent_id)
