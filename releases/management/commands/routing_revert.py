"""``manage.py routing_revert --profile AGENT_ID --to N [--note "..."] [--user USERNAME]``: publish an earlier version
again. With ``--user`` that user's permissions apply, as in the admin (reverting takes ``routing.add_routingversion``);
without it the command is the operator's."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from agents.models import AgentProfile
from common.errors import DomainError
from releases.management.commands.import_config import USER_HELP, acting_as, acting_user
from releases.versions import document_diff, permission_check, version_revert
from routing.models import PublishedFrom
from routing.public import PUBLISH_PERMISSION, live_version


class Command(BaseCommand):
    help = "Publish version N of a profile again, as a new version number (the draft is left as it is)."

    def add_arguments(self, parser):
        parser.add_argument("--profile", required=True, help="The profile's agent_id.")
        parser.add_argument("--to", type=int, required=True, help="The version number to publish again.")
        parser.add_argument("--note", default="", help="Why (default: 'Revert to version N').")
        parser.add_argument("--user", default="", metavar="USERNAME", help=USER_HELP)

    def handle(self, *args, **options):
        profile = AgentProfile.objects.filter(agent_id=options["profile"]).first()
        if profile is None:
            raise CommandError(f"Unknown profile {options['profile']!r}.")
        user = acting_user(options["user"])
        before = live_version(profile)
        try:
            permission_check(user=user, permission=PUBLISH_PERMISSION, doing=f"publish {profile.agent_id}")
            with acting_as(user):
                version = version_revert(
                    profile=profile,
                    to=options["to"],
                    user=user,
                    note=options["note"],
                    published_from=PublishedFrom.COMMAND,
                )
        except DomainError as exc:
            raise CommandError(exc.message) from None
        for change in document_diff(before.document if before else None, version.document):
            self.stdout.write(f"  {change.text}")
        self.stdout.write(f"{profile.agent_id}: version {version.number} published (version {options['to']} again).")
