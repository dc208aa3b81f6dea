"""``manage.py rollout start|status|pause|resume|advance|abort``: rollout plans from a shell or a pipeline.

    manage.py rollout start --profile telecom_contas --version 7 [--stages 5,25,50,100] [--hold-minutes 60]
        [--min-conversations 200] [--webhook URL] [--name "..."]
    manage.py rollout start --multi-agent [--profile P] [...]
    manage.py rollout status [PLAN]
    manage.py rollout pause|resume|advance|abort PLAN
    manage.py rollout evaluate            # every running plan, once
    manage.py rollout watch [--every S]   # every ROLLOUT_EVALUATE_SECONDS, until stopped (no broker: scripts/start)

``start`` creates the plan (guards: the defaults, docs/rollouts.md) and starts it at its first stage; a plan is
named by its id. ``status`` lists the plans (or shows one, with its last decisions).

``--user USERNAME`` acts as that user, as the other commands do, with the permissions the admin asks for the same act:
``releases.add_rolloutplan`` to make a plan, ``releases.change_rolloutplan`` to start, pause, resume, advance or abort
one (and ``routing.change_rolloutflag`` for a plan of the multi_agent flag), ``releases.view_rolloutplan`` to read
them. On a profile that needs a second person their start is refused (nothing is made: a command has no one to
approve it; ask for approval in the admin) and so is their advance by hand, unless they may approve releases and did
not make or ask for the plan. Without it the command is the operator's, who is not held.
"""

from __future__ import annotations

import getpass
import time

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from agents.models import AgentProfile
from common.errors import DomainError
from releases.management.commands.import_config import USER_HELP, acting_user
from releases.models import RolloutPlan, RolloutPlanTarget
from releases.rollout.commands import FLAG_PERMISSION, PLAN_ADD_PERMISSION, PLAN_CHANGE_PERMISSION
from releases.rollout.guard import RolloutStateError, plan_command, plan_start, plans_evaluate
from releases.versions import permission_check
from routing.models import RoutingVersion
from routing.public import PLAN_VIEW_PERMISSION, plan_stage_words

COMMANDS = ("start", "status", "pause", "resume", "advance", "abort", "evaluate", "watch")


def _stages(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise CommandError(f"--stages: percentages separated by commas, e.g. 5,25,50,100 (not {text!r}).") from None


class Command(BaseCommand):
    help = "Start, watch and steer rollout plans (docs/rollouts.md)."

    def create_parser(self, prog_name, subcommand, **kwargs):
        # --version names the candidate version (as routing_test's does), not Django's version: ours wins.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("command", choices=COMMANDS)
        parser.add_argument("plan", nargs="?", type=int, help="The plan's id (every command but start).")
        parser.add_argument("--profile", default="", help="start: the profile (its agent_id).")
        parser.add_argument("--version", type=int, default=None, help="start: the candidate version's number.")
        parser.add_argument("--multi-agent", action="store_true", help="start: roll the multi_agent flag out.")
        parser.add_argument("--stages", default="5,25,50,100", help="start: percentages (default 5,25,50,100).")
        parser.add_argument("--hold-minutes", type=int, default=60)
        parser.add_argument("--min-conversations", type=int, default=200)
        parser.add_argument("--webhook", default="", help="start: post each decision that moves the plan here.")
        parser.add_argument("--name", default="")
        parser.add_argument("--every", type=float, default=None, help="watch: seconds between evaluations.")
        parser.add_argument("--user", default="", metavar="USERNAME", help=USER_HELP)

    def handle(self, *args, **options):
        user = acting_user(options["user"])
        actor = f"manage.py rollout ({user.get_username() if user is not None else getpass.getuser()})"
        command = options["command"]
        try:
            if command == "start":
                self._may(user, command, multi_agent=options["multi_agent"])
                with transaction.atomic():  # a start refused leaves no plan behind
                    plan = self._create(options, user)
                    decision = plan_start(plan, actor=actor, user=user)
                self.stdout.write(f"plan {plan.pk} ({plan.name}): {decision.reason}")
            elif command == "status":
                self._may(user, command)
                self._status(options["plan"])
            elif command == "evaluate":
                self._may(user, command)
                self._evaluate(actor, interval=0)
            elif command == "watch":
                self._may(user, command)
                every = options["every"] or float(settings.ROLLOUT_EVALUATE_SECONDS)
                self.stdout.write(f"Evaluating the running rollout plans every {every:g} s; Ctrl-C stops.")
                while True:
                    self._evaluate("watch", interval=every)
                    time.sleep(every)
            else:
                plan = self._plan(options["plan"])
                self._may(user, command, multi_agent=plan.target == RolloutPlanTarget.MULTI_AGENT)
                decision = plan_command(plan, command, actor=actor, user=user)
                self.stdout.write(f"plan {decision.plan_id}: {decision.reason}")
        except RolloutStateError as exc:
            raise CommandError(str(exc)) from None
        except DomainError as exc:
            raise CommandError(exc.message) from None

    @staticmethod
    def _may(user, command: str, *, multi_agent: bool = False) -> None:
        """The permissions the admin asks for the same act (``user`` ``None``: the operator, who may do everything)."""
        if command == "status":
            permission_check(user=user, permission=PLAN_VIEW_PERMISSION, doing="read rollout plans")
            return
        if command == "start":
            permission_check(user=user, permission=PLAN_ADD_PERMISSION, doing="make rollout plans")
        permission_check(user=user, permission=PLAN_CHANGE_PERMISSION, doing=f"{command} rollout plans")
        if multi_agent:
            permission_check(user=user, permission=FLAG_PERMISSION, doing="roll the multi_agent flag out")

    def _evaluate(self, actor: str, *, interval: float) -> None:
        for decision in plans_evaluate(actor=actor, interval=interval):
            if decision.action != "hold":
                self.stdout.write(f"plan {decision.plan_id}: {decision.action}: {decision.reason}")

    def _plan(self, pk: int | None) -> RolloutPlan:
        if pk is None:
            raise CommandError("Name the plan by its id (manage.py rollout status lists them).")
        plan = RolloutPlan.objects.filter(pk=pk).first()
        if plan is None:
            raise CommandError(f"No rollout plan {pk}.")
        return plan

    def _create(self, options, user) -> RolloutPlan:
        profile = None
        if options["profile"]:
            profile = AgentProfile.objects.filter(agent_id=options["profile"]).first()
            if profile is None:
                raise CommandError(f"Unknown profile {options['profile']!r}.")
        target = RolloutPlanTarget.MULTI_AGENT if options["multi_agent"] else RolloutPlanTarget.VERSION
        candidate = None
        if target == RolloutPlanTarget.VERSION:
            if profile is None or options["version"] is None:
                raise CommandError("start needs --profile and --version (or --multi-agent).")
            candidate = RoutingVersion.objects.filter(profile=profile, number=options["version"]).first()
            if candidate is None:
                raise CommandError(f"{profile.agent_id} has no version {options['version']}.")
        name = options["name"] or (
            f"{profile.agent_id} v{candidate.number}" if candidate and profile else "multi_agent"
        )
        plan = RolloutPlan(
            name=name,
            target=target,
            profile=profile,
            candidate=candidate,
            stages=_stages(options["stages"]),
            hold_minutes=options["hold_minutes"],
            min_conversations=options["min_conversations"],
            webhook_url=options["webhook"],
            created_by=user,
        )
        try:
            plan.full_clean()
        except ValidationError as exc:
            problems = "; ".join(f"{field}: {' '.join(errors)}" for field, errors in exc.message_dict.items())
            raise CommandError(problems) from None
        plan.save()
        return plan

    def _status(self, pk: int | None) -> None:
        plans = [self._plan(pk)] if pk is not None else list(RolloutPlan.objects.select_related("profile", "candidate"))
        if not plans:
            self.stdout.write("No rollout plans.")
        for plan in plans:
            what = (
                f"{plan.profile.agent_id} v{plan.candidate.number}"
                if plan.candidate and plan.profile
                else "multi_agent"
            )
            self.stdout.write(
                f"plan {plan.pk} {plan.name}: {what}, {plan.get_status_display().lower()}, {plan_stage_words(plan)}"
            )
            if pk is not None:
                for decision in plan.decisions.all()[:10]:
                    self.stdout.write(f"  {decision.created_at:%Y-%m-%d %H:%M} {decision.action}: {decision.reason}")
