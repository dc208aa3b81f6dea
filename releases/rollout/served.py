"""What routing serves of the rollout plans: the running and paused plans of a version that have their candidate,
read as routing's snapshot reads them (:data:`routing.snapshot.ROLLOUT_FIELDS`). Handed to routing at start-up
(``ReleasesConfig.ready``): routing decides which conversations a candidate serves, and checks on these very rows
that a plan is still what it started as, whatever wrote it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from releases.models import ROLLOUT_PLAN_ACTIVE, RolloutPlan, RolloutPlanTarget
from routing.public import ROLLOUT_FIELDS


def plans_served() -> Iterable[Mapping[str, Any]]:
    """The plans whose candidates may be served, one query when iterated."""
    return RolloutPlan.objects.filter(
        status__in=ROLLOUT_PLAN_ACTIVE, target=RolloutPlanTarget.VERSION, candidate__isnull=False
    ).values(*ROLLOUT_FIELDS)
