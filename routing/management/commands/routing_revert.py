"""``manage.py routing_revert --profile AGENT_ID --to N [--note "..."]``: publish an earlier version again."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from agents.models import AgentProfile
from common.errors import DomainError
from routing.versions import document_diff, live_version, version_revert


class Command(BaseCommand):
    help = "Publish version N of a profile again, as a new version number (the draft is left as it is)."

    def add_arguments(self, parser):
        parser.add_argument("--profile", required=True, help="The profile's agent_id.")
        parser.add_argument("--to", type=int, required=True, help="The version number to publish again.")
        parser.add_argument("--note", default="", help="Why (default: 'Revert to version N').")

    def handle(self, *args, **options):
        profile = AgentProfile.objects.filter(agent_id=options["profile"]).first()
        if profile is None:
            raise CommandError(f"Unknown profile {options['profile']!r}.")
        before = live_version(profile)
        try:
            version = version_revert(profile=profile, to=options["to"], note=options["note"])
        except DomainError as exc:
            raise CommandError(exc.message) from None
        for change in document_diff(before.document if before else None, version.document):
            self.stdout.write(f"  {change.text}")
        self.stdout.write(f"{profile.agent_id}: version {version.number} published (version {options['to']} again).")
