"""``manage.py import_config FILE_OR_DIR... [--profile AGENT_ID] [--user USERNAME] [--dry-run | --publish]``.

With ``--user`` the import (and its publish) is that user's: their permissions decide what it may change, as in the
admin — importing at all takes the import page's permission, publishing ``routing.add_routingversion`` — and they are
recorded as its author. Without it the command is the operator's, who has the shell (and the
secrets) already and may change everything. The allow-list of model key variables applies to everyone. ``--publish``
by a user, of a profile that needs a second person, is refused before anything is written (a command has no one to
approve it): import into the draft, and publish from the admin, where it becomes a request.

A conversation tests file (``profile:`` and ``conversation_tests:``, :mod:`releases.evals.transfer`) adds or updates
that profile's tests by name, in the configuration's transaction (a user needs the tests' add and change rights).
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Any

from auditlog.context import set_actor
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from agents.models import AgentProfile
from common.errors import DomainError
from releases.configio import ConfigImportError, ImportReport, Source, config_import
from releases.configio.messages import ERROR_READ
from releases.configio.rights import IMPORT_PERMISSION
from releases.evals.transfer import (
    ConversationTestsImportRefused,
    conversation_tests_import,
    is_conversation_tests_file,
)
from releases.versions import approval_check, document_diff, permission_check, version_publish
from routing.models import PublishedFrom
from routing.public import PUBLISH_PERMISSION, profile_documents

YAML_SUFFIXES = (".yaml", ".yml")
USER_HELP = (
    "Act as this user (a username): their permissions decide what may change, as in the admin, and they are "
    "recorded as the author. Without it the command acts as the operator, who may change everything."
)


def acting_user(username: str) -> Any:
    """The user a command acts as (``--user``), or ``None`` (the operator at the shell) when none is named."""
    if not username:
        return None
    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None:
        raise CommandError(f"Unknown user {username!r}.")
    return user


def acting_as(user: Any):
    """The field history records ``user`` as the actor of what the block saves (the operator: "system")."""
    return set_actor(user) if user is not None else nullcontext()


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


def drafts_changed(before: dict[str, dict], after: dict[str, dict]) -> list[str]:
    """The profiles whose draft document differs from ``before`` in ``after``."""
    return [agent_id for agent_id, document in after.items() if before.get(agent_id) != document]


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
        "Import agents.yaml, tools.yaml, mcp_servers.yaml, routing and goals.<domain> YAML files and conversation "
        "tests files (profile: and conversation_tests:, added or updated by name) (any order, any mix) in one "
        "transaction. Entities in the files are created or updated; others are left alone. "
        "Invalid files are refused whole, with every problem listed as file:line: path: message."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", metavar="FILE", help="YAML files, or directories of them.")
        parser.add_argument(
            "--profile",
            metavar="AGENT_ID",
            help="Profile for routing files (router/state_policies/intents) without an agent_id: key.",
        )
        parser.add_argument("--user", default="", metavar="USERNAME", help=USER_HELP)
        parser.add_argument("--dry-run", action="store_true", help="Validate and report, then roll back.")
        parser.add_argument(
            "--publish",
            action="store_true",
            help="Publish every profile whose draft the import changed (by default the import lands in the drafts).",
        )

    def handle(self, *args, **options):
        if options["publish"] and options["dry_run"]:
            raise CommandError("--publish and --dry-run exclude each other.")
        user = acting_user(options["user"])
        with acting_as(user):
            self._import(options, user)

    def _import(self, options: dict[str, Any], user: Any) -> None:
        sources = read_sources(options["paths"])
        tests = [source for source in sources if is_conversation_tests_file(source)]
        config = [source for source in sources if source not in tests]
        before = profile_documents()
        after: dict[str, dict] = {}

        def written() -> None:
            after.update(profile_documents())
            if options["publish"]:  # refused here, inside the import's transaction: nothing stays written
                for profile in AgentProfile.objects.filter(agent_id__in=drafts_changed(before, after)).order_by("pk"):
                    permission_check(user=user, permission=PUBLISH_PERMISSION, doing=f"publish {profile.agent_id}")
                    approval_check(profile=profile, user=user, approved_by=None)

        try:
            permission_check(user=user, permission=IMPORT_PERMISSION, doing="import configuration")
            with transaction.atomic():  # the configuration and the tests, or nothing
                report = (
                    config_import(
                        sources=config,
                        profile=options["profile"],
                        user=user,
                        dry_run=options["dry_run"],
                        written=written,
                    )
                    if config
                    else None
                )
                loaded = conversation_tests_import(tests, user=user)
                transaction.set_rollback(options["dry_run"])
        except ConfigImportError as exc:
            for warning in exc.warnings:
                self.stderr.write(self.style.WARNING(f"warning: {warning}"))
            raise CommandError("\n".join([str(exc), *exc.messages])) from exc
        except ConversationTestsImportRefused as exc:
            raise CommandError("\n".join([str(exc), *exc.messages])) from exc
        except DomainError as exc:
            raise CommandError(exc.message) from None
        if report is not None:
            write_report(self, report, title=f"Imported {len(config)} file(s)")
        for entry in loaded:
            would = " (dry run, rolled back)" if options["dry_run"] else ""
            self.stdout.write(
                f"{entry.file}: conversation tests of {entry.agent_id}: {entry.report.created} created, "
                f"{entry.report.updated} updated{would}."
            )
        changed = drafts_changed(before, after)
        for agent_id in changed:
            self.stdout.write(f"Draft of {agent_id}{' (would)' if options['dry_run'] else ''}:")
            for change in document_diff(before.get(agent_id), after[agent_id]):
                self.stdout.write(f"  {change.text}")
        if options["publish"]:
            self._publish(changed, note=f"Imported from {', '.join(source.name for source in sources)}", user=user)
        elif changed and not options["dry_run"]:
            self.stdout.write("The changes are in the drafts: publish them (admin, or manage.py routing_publish).")

    def _publish(self, agent_ids: list[str], *, note: str, user: Any) -> None:
        refused = []
        for profile in AgentProfile.objects.filter(agent_id__in=agent_ids).order_by("agent_id"):
            try:
                version = version_publish(
                    profile=profile, user=user, note=note[:300], published_from=PublishedFrom.IMPORT
                )
            except DomainError as exc:
                refused.append(f"{profile.agent_id}: {exc.message}")
                continue
            self.stdout.write(f"{profile.agent_id}: version {version.number} published.")
        if refused:
            raise CommandError("Imported, but not published:\n" + "\n".join(refused))
