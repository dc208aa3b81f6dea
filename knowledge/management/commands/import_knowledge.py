"""``manage.py import_knowledge --profile AGENT_ID PATH... [--source NAME] [--language L] [--tags a,b] [--dry-run]``.

Reads each file named (a folder stands for its Markdown, HTML, text and PDF files, sorted, not its subfolders) into
the profile's knowledge source ``--source`` (made, in the profile's language, when the profile has none of that name),
as the admin's upload page does: a file whose name the source holds already replaces that document. Prints one line
per file; a file it cannot read is named with why and the others still go in, and the command then exits 1.
``--dry-run`` reads and cuts every file and says what would change, writing nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.models import AgentProfile
from common.errors import DomainError
from knowledge.admin import report_words
from knowledge.models import KnowledgeSource
from knowledge.reading import SUFFIXES
from knowledge.services import IngestReport, document_ingest

DEFAULT_SOURCE = "documents"


def files_of(paths: list[str]) -> list[Path]:
    """The files named, a folder standing for its files of a known kind (sorted)."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.extend(sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES))
        elif path.is_file():
            found.append(path)
        else:
            raise CommandError(f"No such file or folder: {raw}")
    if not found:
        raise CommandError("No Markdown, HTML, text or PDF file among the paths given.")
    return found


class Command(BaseCommand):
    help = "Import documents (Markdown, HTML, text, PDF) into a profile's knowledge source."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", help="Files, or folders of files.")
        parser.add_argument("--profile", required=True, help="The profile's agent_id.")
        parser.add_argument("--source", default=DEFAULT_SOURCE, help="The knowledge source's name (made if absent).")
        parser.add_argument("--language", default="", help="The documents' language (default: the source's).")
        parser.add_argument("--tags", default="", help="Comma-separated tags for the documents.")
        parser.add_argument("--dry-run", action="store_true", help="Say what would change; write nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        profile = AgentProfile.objects.filter(agent_id=options["profile"]).first()
        if profile is None:
            raise CommandError(f"Unknown profile {options['profile']!r}.")
        files = files_of(options["paths"])
        dry_run = options["dry_run"]
        source = KnowledgeSource.objects.filter(profile=profile, name=options["source"]).first()
        if source is None:
            source = KnowledgeSource(profile=profile, name=options["source"], language=profile.language)
            if not dry_run:
                source.save()
        tags = [tag.strip() for tag in options["tags"].split(",") if tag.strip()]
        failed = 0
        for path in files:
            try:
                report = ingest_file(source, path, language=options["language"], tags=tags, dry_run=dry_run)
            except DomainError as error:
                failed += 1
                self.stderr.write(f"{path.name}: {error.message}")
                continue
            self.stdout.write(("(dry run) " if dry_run else "") + report_words(report))
        if failed:
            raise CommandError(f"{failed} of {len(files)} files could not be imported.")


def ingest_file(source: KnowledgeSource, path: Path, **options: Any) -> IngestReport:
    """One file into the source, read no further than one byte past the bound (enough to refuse it)."""
    with path.open("rb") as handle:
        data = handle.read(settings.KNOWLEDGE_MAX_FILE_BYTES + 1)
    return document_ingest(source=source, file_name=path.name, data=data, **options)
