"""``manage.py export_config DIR``."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from releases.configio import config_export
from releases.evals.transfer import conversation_tests_files


class Command(BaseCommand):
    help = (
        "Write agents.yaml, tools.yaml, mcp_servers.yaml, routing.<agent_id>.yaml for every profile and "
        "goals.<domain>.yaml for every domain with goals or capabilities and conversation_tests.<agent_id>.yaml for "
        "every profile with conversation tests to DIR, so that `import_config DIR` "
        "reproduces the configuration. Other files in DIR are left alone."
    )

    def add_arguments(self, parser):
        parser.add_argument("directory", metavar="DIR")

    def handle(self, *args, **options):
        directory = Path(options["directory"])
        if directory.exists() and not directory.is_dir():
            raise CommandError(f"{directory} exists and is not a directory.")
        directory.mkdir(parents=True, exist_ok=True)
        files = {**config_export(), **conversation_tests_files()}
        for name, text in files.items():
            (directory / name).write_text(text, encoding="utf-8")
        self.stdout.write(f"Exported {len(files)} file(s) to {directory}: {', '.join(files)}")
