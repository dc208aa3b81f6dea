"""``manage.py routing_calibrate --profile P [--save]``: choose the examples tier's threshold and margin from the
profile's saved routing tests and its examples (releases.calibration), print what they give against the settings in
force, and with ``--save`` write them to the profile's draft (publish to serve them)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from agents.models import AgentProfile
from releases.calibration import Calibration, CalibrationError, Figures, calibrate, calibration_save
from releases.routing_tests import DRAFT, routing_tests_saved, routing_tests_spec


def figures_line(label: str, figures: Figures) -> str:
    return (
        f"{label}: threshold {figures.threshold:.3f}, margin {figures.margin:.2f} → accuracy {figures.accuracy:.1%}, "
        f"wrong routes {figures.wrong_rate:.1%}, fallbacks {figures.fallback_rate:.1%}"
        + (f", out of scope left alone {figures.out_of_scope_left_rate:.1%}" if figures.out_of_scope else "")
    )


def calibration_report(result: Calibration) -> list[str]:
    lines = [
        f"{result.samples} samples: {result.from_tests} saved tests reaching the tier, "
        f"{result.from_examples} examples and {result.from_out_of_scope} out-of-scope messages left out in turn",
        figures_line("in force", result.current),
        figures_line("chosen", result.chosen),
    ]
    lines += [figures_line(f"  on the {source} samples", figures) for source, figures in result.by_source.items()]
    lines += [f"state bar: {result.state_threshold:.3f} (in force {result.current_state_threshold:.3f})"]
    lines += [
        f"keyword check: {result.keyword_check:.3f} (in force {result.current_keyword_check:.3f}), sets aside "
        f"{result.keyword_check_set_aside} out-of-scope messages a keyword takes"
    ]
    lines += [
        f"  routed with a score in [{row.low:.3f}, {min(row.high, 1.0):.3f}): {row.right} of {row.routed} right "
        f"({row.right_rate:.1%})"
        for row in result.reliability
    ]
    lines += [f"expected calibration error: {result.calibration_error:.3f}"]
    lines += [
        f"  wrong: {m['label']} ({m['origin']}) expected {m['expected']}, got {m['got']}" for m in result.mistakes
    ]
    lines += [
        f"  keyword {c['keyword']!r} of {c['intent']} takes {c['count']} out-of-scope messages, e.g. "
        f"{c['examples'][0]!r}"
        for c in result.keyword_conflicts
    ]
    lines += [
        f"  keyword {c['keyword']!r} of {c['intent']} takes {c['count']} messages in {', '.join(c['languages'])}, "
        f"e.g. {c['examples'][0]!r}: limit it to {', '.join(c['suggested'])}"
        for c in result.keyword_language_captures
    ]
    lines += [f"  {line}" for line in result.explanation()]
    return lines


class Command(BaseCommand):
    help = "Calibrate a profile's examples tier (threshold and margin) on its saved routing tests and its examples."

    def add_arguments(self, parser):
        parser.add_argument("--profile", required=True, help="the profile's agent_id")
        parser.add_argument(
            "--save", action="store_true", help="write the chosen threshold, margin and state bar to the draft"
        )

    def handle(self, *args, **options):
        profile = AgentProfile.objects.filter(agent_id=options["profile"]).first()
        if profile is None:
            raise CommandError(f"--profile: no profile {options['profile']!r}.")
        try:
            result = calibrate(routing_tests_spec(profile, DRAFT), routing_tests_saved(profile))
        except CalibrationError as exc:
            raise CommandError(str(exc)) from exc
        for line in calibration_report(result):
            self.stdout.write(line)
        if options["save"]:
            calibration_save(profile, result)
            self.stdout.write(f"Saved to the draft of {profile.agent_id}: publish to serve it.")
