"""What routing serves of the rollout plans: every save of a plan writes its row of
:class:`routing.models.LiveRollout` (:meth:`releases.models.RolloutPlan.serve`), every delete removes it. Connected
in ``ReleasesConfig.ready``; a plan written in bulk is served by its queryset
(:class:`releases.models.RolloutPlanQuerySet`). Signals, because every write path must be covered, as the
configuration's version is (common/config_version.py)."""

from __future__ import annotations

from typing import Any

from releases.models import RolloutPlan
from routing.models import LiveRollout


def plan_saved(sender: type[RolloutPlan], instance: RolloutPlan, raw: bool = False, **kwargs: Any) -> None:
    if not raw:  # a fixture's rows are loaded as they were: what was served was loaded with them
        instance.serve()


def plan_deleted(sender: type[RolloutPlan], instance: RolloutPlan, **kwargs: Any) -> None:
    LiveRollout.objects.filter(plan_id=instance.pk).delete()
