"""``manage.py import_config FILE_OR_DIR... [--profile AGENT_ID] [--dry-run]``."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from routing.configio import ConfigImportError, ImportReport, Source, config_import
from routing.configio.messages import ERROR_READ

YAML_SUFFIXES = (".yaml", ".yml")


def read_sources(paths: list[str]) -> list[Source]:
    """The files named, a directory standing for its ``*.yaml``/``*.yml`` files (sorted)."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix in YAML_SUFFIXES and p.is_file())
            if not found:
                raise CommandError(f"{raw}: no .yaml files in this directory.")
            files.extend(found)
        else:
            files.append(path)
    sources, problems = [], []
    for path in files:
        try:
            sources.append(Source(name=str(path), text=path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{path}: {ERROR_READ.format(problem=exc)}")
    if problems:
        raise CommandError("\n".join(problems))
    return sources


def write_report(command: BaseCommand, report: ImportReport, *, title: str) -> None:
    for warning in report.warnings:
        command.stderr.write(command.style.WARNING(f"warning: {warning}"))
    state = "would change" if report.dry_run else "changed"
    verdict = f"{state} nothing" if not report.changed else state
    command.stdout.write(f"{title}: {verdict}{' (dry run, rolled back)' if report.dry_run else ''}.")
    for line in report.summary_lines():
        command.stdout.write(f"  {line}")


class Command(BaseCommand):
    help = (
        "Import agents.yaml, tools.yaml, mcp_servers.yaml, routing and goals.<domain> YAML files (any order, any "
        "mix) in one transaction. Entities in the files are created or updated; others are left alone. "
        "Invalid files are refused whole, with every problem listed as file:line: path: message."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", metavar="FILE", help="YAML files, or directories of them.")
        parser.add_argument(
            "--profile",
            metavar="AGENT_ID",
            help="Profile for routing files (router/state_policies/intents) without an agent_id: key.",
        )
        parser.add_argument("--dry-run", action="store_true", help="Validate and report, then roll back.")

    def handle(self, *args, **options):
        sources = read_sources(options["paths"])
        try:
            report = config_import(sources=sources, profile=options["profile"], dry_run=options["dry_run"])
        except ConfigImportError as exc:
            for warning in exc.warnings:
                self.stderr.write(self.style.WARNING(f"warning: {warning}"))
            raise CommandError("\n".join([str(exc), *exc.messages])) from exc
        write_report(self, report, title=f"Imported {len(sources)} file(s)")
