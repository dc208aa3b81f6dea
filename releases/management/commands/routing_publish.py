"""``manage.py routing_publish --profile AGENT_ID --note "..." [--user USERNAME] [--based-on N] [--candidate]``:
publish a profile's draft — live at once, or with ``--candidate`` stored as a version for a rollout plan
(``manage.py rollout``). With ``--user`` that user's permissions apply, as in the admin (publishing takes
``routing.add_routingversion``, a model endpoint change the operator's); without it the command is the operator's."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from agents.models import AgentProfile
from common.errors import DomainError
from releases.evals.gate import gate_warnings
from releases.management.commands.import_config import USER_HELP, acting_as, acting_user
from releases.versions import UNSET, document_diff, permission_check, version_publish
from routing.models import PublishedFrom
from routing.public import PUBLISH_PERMISSION, live_version


class Command(BaseCommand):
    help = (
        "Publish a profile's draft as its next version: customers are served it from their next message. Prints "
        "what changed against the live version."
    )

    def add_arguments(self, parser):
        parser.add_argument("--profile", required=True, help="The profile's agent_id.")
        parser.add_argument("--note", default="", help="What changed and why (kept with the version).")
        parser.add_argument("--user", default="", metavar="USERNAME", help=USER_HELP)
        parser.add_argument(
            "--forced-reason",
            default="",
            help="Publish although saved routing tests or required conversation tests fail, for this reason (needs "
            "the user's routing.publish_failing_version permission).",
        )
        parser.add_argument(
            "--based-on",
            type=int,
            default=None,
            help="The live version number you reviewed: refused (exit 1) if another was published meanwhile.",
        )
        parser.add_argument(
            "--candidate",
            action="store_true",
            help="Store the version without releasing it: customers keep the live version until a rollout plan "
            "(manage.py rollout start) serves it in stages.",
        )

    def handle(self, *args, **options):
        profile = AgentProfile.objects.filter(agent_id=options["profile"]).first()
        if profile is None:
            raise CommandError(f"Unknown profile {options['profile']!r}.")
        user = acting_user(options["user"])
        before = live_version(profile)
        based_on = options["based_on"] if options["based_on"] is not None else UNSET
        try:
            permission_check(user=user, permission=PUBLISH_PERMISSION, doing=f"publish {profile.agent_id}")
            with acting_as(user):
                version = version_publish(
                    profile=profile,
                    user=user,
                    note=options["note"],
                    based_on=based_on,
                    forced_reason=options["forced_reason"],
                    release=not options["candidate"],
                    published_from=PublishedFrom.COMMAND,
                )
        except DomainError as exc:
            raise CommandError(exc.message) from None
        for change in document_diff(before.document if before else None, version.document):
            self.stdout.write(f"  {change.text}")
        for line in gate_warnings(version.test_summary):
            self.stderr.write(f"warning: not required, and failing: {line}")
        if options["candidate"]:
            self.stdout.write(
                f"{profile.agent_id}: version {version.number} stored as a candidate; version "
                f"{before.number if before else '(none)'} stays live (roll it out: manage.py rollout start)."
            )
        else:
            self.stdout.write(f"{profile.agent_id}: version {version.number} published.")
