"""Migration 0007: the offline examples tier scores by naive Bayes now, so a draft's threshold and margin chosen for
the earlier cosine score go back to the careful defaults (and their calibration is cleared); an embeddings
profile's rule, whose score did not change, stays."""

from __future__ import annotations

import pytest

from agents.models import AgentProfile

BEFORE = ("agents", "0006_examples_tier")
MIGRATION = ("agents", "0007_examples_naive_bayes_defaults")


@pytest.mark.slow  # migrates a database of an early state forwards
@pytest.mark.django_db(transaction=True)
def test_offline_rules_chosen_for_the_cosine_score_go_back_to_the_careful_defaults(migrations):
    profiles = migrations.installed_at(BEFORE).get_model("agents", "AgentProfile").objects
    calibrated = {"chosen": {"threshold": 0.16, "margin": 0.02}}
    profiles.create(
        agent_id="cosine", name="Cosine", examples_threshold=0.16, examples_margin=0.02, examples_calibration=calibrated
    )
    profiles.create(
        agent_id="embedded",
        name="Embedded",
        examples_vectoriser="embeddings",
        examples_threshold=0.55,
        examples_margin=0.05,
        examples_calibration=calibrated,
    )

    migrated = migrations.forward_to(MIGRATION).get_model("agents", "AgentProfile").objects

    offline = migrated.get(agent_id="cosine")
    assert (offline.examples_threshold, offline.examples_margin, offline.examples_calibration) == (0.9, 0.8, {})
    embedded = migrated.get(agent_id="embedded")
    assert (embedded.examples_threshold, embedded.examples_margin) == (0.55, 0.05)
    assert embedded.examples_calibration == calibrated
    assert AgentProfile._meta.get_field("examples_threshold").default == 0.9
