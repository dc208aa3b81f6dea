"""How a rollout plan and its decisions are said to people: stages, limits, figures, who acted and the plan's history.

One place for the words, so that the admin, the rollout view, the approver's review and the command line agree:

* **Stages are counted from 1** wherever a person reads them: "stage 2 of 3 (50 %)". The models keep the index
  (``RolloutPlan.stage``, ``RolloutDecision.stage`` start at 0); only this module turns it into a number to read.
* **Figures in their unit**: rates as percentages ("21 %"), the judge's mean score as a number ("0.82"), latency in
  milliseconds ("320 ms").
* **Who acted**: a decision's ``actor`` is what the code wrote ("beat", "watch", "admin: ana", "manage.py rollout
  (ana)"); people read "the guard", "ana", "ana (command line)".
* **A plan's history** is its decisions that moved it (holds left out), oldest first, one sentence each: "Started at
  50 % on 25 Nov 2026, 16:02 by ana", "The guard advanced to stage 2 of 2 (100 %) on 25 Nov 2026, 16:04",
  "Rolled back automatically on …: negative-feedback rate 100 % against 0 % for the control …".
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.utils.formats import date_format
from django.utils.timezone import localtime

from routing.rollout_plans import GUARD_METRICS

# Actors whose decisions are the guard's own (Celery beat, ``manage.py rollout watch``).
GUARD_ACTORS = frozenset({"beat", "watch"})
ADMIN_ACTOR = "admin: "
COMMAND_ACTOR = re.compile(r"manage\.py rollout(?: \((?P<who>.*)\))?")
# What each action is called in a sentence, by a person ("Paused at 50 %") or by the guard.
ACTION_WORDS = {
    "start": "Started",
    "pause": "Paused",
    "resume": "Resumed",
    "abort": "Aborted",
    "advance": "Advanced",
    "complete": "Completed",
    "rollback": "Rolled back",
    "hold": "Held",
}


def when_words(at: dt.datetime) -> str:
    """``25 Nov 2026, 16:02`` in the site's time zone."""
    return date_format(localtime(at), "j M Y, H:i")


def stage_words(stage: int, stages: Sequence[int]) -> str:
    """``stage 2 of 3 (50 %)`` for the stage index ``stage`` (0-based, as stored)."""
    if not stages:
        return "no stages"
    index = min(max(stage, 0), len(stages) - 1)
    return f"stage {index + 1} of {len(stages)} ({stages[index]} %)"


def plan_stage_words(plan: Any) -> str:
    """Where a plan stands, said the same on every page: "not started (stage 1 of 3 gives 10 %)", "stage 2 of 3
    (50 %)", "completed: stage 3 of 3 (100 %)", "rolled back at stage 1 of 3 (10 %)"."""
    stages = list(plan.stages or [])
    if not stages:
        return "no stages"
    status = str(plan.status)
    if status == "ready":
        return f"not started (stage 1 of {len(stages)} gives {stages[0]} %)"
    shown = stage_words(plan.stage, stages)
    if status in ("running", "paused"):
        return shown
    if status == "completed":
        return f"completed: {shown}"
    return f"{plan.get_status_display().lower()} at {shown}"


def stages_words(stages: Sequence[int]) -> str:
    """``10 → 50 → 100 %``."""
    return " → ".join(str(stage) for stage in stages) + " %"


def actor_words(actor: str) -> str:
    """Who took a decision, as a person reads it: "the guard", "ana", "ana (command line)"."""
    actor = (actor or "").strip()
    if actor in GUARD_ACTORS:
        return "the guard"
    if actor.startswith(ADMIN_ACTOR):
        return actor[len(ADMIN_ACTOR) :] or "someone in the admin"
    found = COMMAND_ACTOR.fullmatch(actor)
    if found:
        return f"{found['who']} (command line)" if found["who"] else "the command line"
    return actor or "unknown"


def by_guard(actor: str) -> bool:
    return (actor or "").strip() in GUARD_ACTORS


def metric_words(name: str) -> str:
    """A guard metric's name in a sentence: "fallback rate", "negative-feedback rate", "p95 latency"."""
    metric = GUARD_METRICS.get(name)
    label = metric.label if metric else name.replace("_", " ")
    return label[:1].lower() + label[1:]


def _trimmed(number: float, places: int) -> str:
    text = f"{number:.{places}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def percent_words(fraction: float) -> str:
    """``0.213`` → ``21.3 %``; ``1.0`` → ``100 %``."""
    return f"{_trimmed(fraction * 100, 1)} %"


def value_words(name: str, value: Any) -> str:
    """One figure of a guard metric in its unit ("21 %", "0.82", "320 ms"); "no sample" when there is none."""
    if value is None:
        return "no sample"
    metric = GUARD_METRICS.get(name)
    kind = metric.kind if metric else "mean"
    if kind == "rate":
        return percent_words(float(value))
    if kind == "latency":
        return f"{float(value):.0f} ms"
    return _trimmed(float(value), 2)


def limit_words(guard: Mapping[str, Any]) -> str:
    """A guard's limits: "at most 25 % worse than the control, and never above 30 %"."""
    name = str(guard.get("metric", ""))
    metric = GUARD_METRICS.get(name)
    lower_worse = metric is not None and metric.worse == "lower"
    parts = []
    if guard.get("threshold") is not None:
        relative = percent_words(float(guard["threshold"]))
        parts.append(f"at most {relative} {'lower' if lower_worse else 'worse'} than the control")
    if guard.get("absolute") is not None:
        limit = value_words(name, guard["absolute"])
        parts.append(f"never below {limit}" if lower_worse else f"never above {limit}")
    return ", and ".join(parts) if parts else "not limited"


def guard_words(guard: Mapping[str, Any]) -> str:
    """One guard as a sentence: "fallback rate: at most 25 % worse than the control, and never above 30 %"."""
    return f"{metric_words(str(guard.get('metric', '')))}: {limit_words(guard)}"


def plan_settings_words(plan: Any) -> list[str]:
    """What a plan will do, in sentences (the publish page's summary, the approver's review)."""
    stages = list(plan.stages or [])
    lines = [
        f"Stages: {stages_words(stages)} of new conversations." if stages else "Stages: none.",
        f"Each stage runs at least {plan.hold_minutes} minute(s) and until both the candidate and the control have "
        f"{plan.min_conversations} conversation(s) in it.",
        f"It rolls back at once when the candidate has more than {plan.max_errors} error(s) in a stage, or when a "
        "guard is breached:",
    ]
    lines += [f"  {guard_words(guard)}" for guard in plan.guards or []]
    return lines


# -- decisions ---------------------------------------------------------------------------------------------------


def decision_words(decision: Any, stages: Sequence[int] = ()) -> str:
    """One decision as a sentence with its time and who took it (the plan's history in words)."""
    action = str(decision.action)
    when = when_words(decision.created_at)
    who = actor_words(decision.actor)
    guard = by_guard(decision.actor)
    stage = stage_words(decision.stage, stages) if stages else f"stage {decision.stage + 1}"
    why = str((decision.figures or {}).get("why") or "")
    if action == "start":
        return f"Started at {decision.percentage} % on {when} by {who}"
    if action == "advance":
        if guard:
            return f"The guard advanced to {stage} on {when}"
        return f"Advanced by hand to {stage} on {when} by {who}"
    if action == "complete":
        return f"Completed on {when}" + ("" if guard else f" by {who}") + ": the candidate is served to everyone"
    if action == "rollback":
        return f"Rolled back automatically on {when}" + (f": {why}" if why else "")
    if action in ("pause", "resume"):
        return f"{ACTION_WORDS[action]} at {decision.percentage} % on {when} by {who}"
    if action == "abort":
        if guard:
            return f"Aborted automatically on {when}: {decision.reason}"
        return f"Aborted on {when} by {who}"
    return f"{ACTION_WORDS.get(action, action)} on {when} ({who}): {decision.reason}"


def history_words(decisions: Iterable[Any], stages: Sequence[int]) -> list[str]:
    """A plan's history: the decisions that moved it, oldest first, as sentences (holds are left out: they change
    nothing, and there is one a minute)."""
    moved = [decision for decision in decisions if str(decision.action) != "hold"]
    moved.sort(key=lambda decision: (decision.created_at, decision.pk or 0))
    return [decision_words(decision, stages) for decision in moved]
