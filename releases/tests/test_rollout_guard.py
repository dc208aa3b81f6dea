"""Rollout plans of a routing version: sticky cohorts, and the guard that advances, holds or rolls back.

Traffic is real: customers' messages through the gateway API on PostgreSQL, each conversation served by the
version its cohort gives it; the guard reads the stored turns. A bad candidate (the invoice intent switched off,
so invoice questions fall to the fallback specialist) is rolled back in its first stage; a good one (a keyword
added) advances stage by stage and is released to everyone.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from agents.models import AgentProfile
from common.config_version import config_version_bump
from conversations.models import ConversationOutcome, Message, MessageRole
from conversations.outcomes import outcomes_close
from releases.models import RolloutDecision, RolloutPlan, RolloutPlanStatus
from releases.rollout.guard import (
    CANDIDATE,
    CONTROL,
    CohortWindow,
    RolloutStateError,
    cohorts_figures,
    guard_verdict,
    plan_command,
    plan_evaluate,
    plan_start,
    plans_evaluate,
)
from releases.versions import version_publish
from routing.models import Intent, Keyword
from routing.selectors import live_version

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

INVOICE = "Minha fatura veio alta"


def say(api, session: str, text: str = INVOICE) -> dict:
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": session}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def plan_for(candidate, **extra) -> RolloutPlan:
    # 120 conversations a stage: at 20 % the candidate's share is 24 ± 4.4, so 10 is reached whatever the plan's id
    # (the bucket group) turns out to be.
    settings = {"stages": [20, 50, 100], "hold_minutes": 0, "min_conversations": 10, "guards": None}
    settings.update(extra)
    if settings["guards"] is None:
        settings.pop("guards")
    return RolloutPlan.objects.create(name="invoice change", profile=candidate.profile, candidate=candidate, **settings)


@pytest.fixture(autouse=True)
def unthrottled(settings):
    settings.API_MESSAGE_RATE_PER_KEY = "off"  # generated traffic: hundreds of messages a minute from one key


@pytest.fixture
def published(telecom):
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    return version_publish(profile=profile, note="v1")


def bad_candidate(profile):
    Intent.objects.filter(profile=profile, name="billing_invoice_explanation").update(enabled=False)
    from common.config_version import config_version_bump

    config_version_bump()
    return version_publish(profile=profile, note="invoices off", release=False)


def good_candidate(profile):
    intent = Intent.objects.get(profile=profile, name="billing_invoice_explanation")
    Keyword.objects.create(intent=intent, text="conta cara")
    return version_publish(profile=profile, note="conta cara", release=False)


def test_a_candidate_stored_without_release_leaves_the_live_version_serving(api, published):
    candidate = good_candidate(published.profile)

    assert live_version(published.profile) == published
    assert say(api, "c-0")["metadata"]["version"] == 1
    assert candidate.number == 2


def test_the_candidate_serves_its_share_of_new_conversations_and_says_so(api, published):
    plan = plan_for(good_candidate(published.profile))
    plan_start(plan, actor="test")

    served = [say(api, f"share-{n}")["metadata"] for n in range(60)]

    versions = [meta["version"] for meta in served]
    assert set(versions) == {1, 2}
    assert 3 <= versions.count(2) <= 24  # 20 % of 60, give or take the hash
    assert all(
        meta["rollout"] == {"plan": plan.pk, "cohort": "candidate" if meta["version"] == 2 else "control"}
        for meta in served
    )
    stored = Message.objects.filter(role=MessageRole.USER).values_list("routing_version", flat=True)
    assert sorted(set(stored)) == [1, 2]


def test_a_conversation_keeps_its_version_when_the_stage_advances(api, published):
    plan = plan_for(good_candidate(published.profile))
    plan_start(plan, actor="test")
    first = {f"stick-{n}": say(api, f"stick-{n}")["metadata"]["version"] for n in range(40)}

    plan_command(plan, "advance", actor="test")  # 50 %: new conversations get the candidate more often
    again = {session: say(api, session, "e agora?")["metadata"]["version"] for session in first}

    assert again == first
    later = [say(api, f"new-{n}")["metadata"]["version"] for n in range(40)]
    assert later.count(2) > list(first.values()).count(2)


def test_a_bad_candidate_is_rolled_back_in_its_first_stage_and_everyone_is_back_on_the_control(api, published):
    plan = plan_for(bad_candidate(published.profile))
    plan_start(plan, actor="test")
    for n in range(120):
        say(api, f"bad-{n}")

    decision = plan_evaluate(plan)

    plan.refresh_from_db()
    assert (decision.action, plan.status, decision.stage) == ("rollback", RolloutPlanStatus.ROLLED_BACK, 0)
    assert "fallback rate" in decision.reason and decision.reason.startswith(
        "Rolled back automatically at stage 1 of 3"
    )
    figures = decision.figures
    assert figures["candidate"]["fallback_rate"]["rate"] > 0.9 > 0.1 > figures["control"]["fallback_rate"]["rate"]
    assert any(v["metric"] == "fallback_rate" and v["breached"] for v in figures["verdicts"])
    # From the next message every conversation is on the control, those of the candidate's cohort too.
    assert {say(api, f"bad-{n}", "e agora?")["metadata"]["version"] for n in range(120)} == {1}


def test_below_the_minimum_sample_nothing_moves(api, published):
    plan = plan_for(bad_candidate(published.profile), min_conversations=500)
    plan_start(plan, actor="test")
    for n in range(40):
        say(api, f"few-{n}")

    decision = plan_evaluate(plan)

    plan.refresh_from_db()
    assert (decision.action, plan.status) == ("hold", RolloutPlanStatus.RUNNING)
    assert "of 500 conversations" in decision.reason
    assert decision.figures["verdicts"] == []


def test_a_stage_holds_until_its_time_is_up(api, published):
    plan = plan_for(good_candidate(published.profile), hold_minutes=30)
    plan_start(plan, actor="test")
    for n in range(120):
        say(api, f"hold-{n}")

    held = plan_evaluate(plan)
    advanced = plan_evaluate(plan, now=timezone.now() + dt.timedelta(minutes=31))

    assert held.action == "hold" and "held 0 of 30 minutes" in held.reason
    assert advanced.action == "advance"
    plan.refresh_from_db()
    assert plan.percentage == 50


def test_a_good_candidate_reaches_every_stage_and_is_released(api, published):
    plan = plan_for(good_candidate(published.profile))
    plan_start(plan, actor="test")
    actions = []
    for stage in range(3):
        for n in range(120):
            say(api, f"good-{stage}-{n}")
        decision = plan_evaluate(plan)
        actions.append(decision.action)

    assert actions == ["advance", "advance", "complete"]
    plan.refresh_from_db()
    assert plan.status == RolloutPlanStatus.COMPLETED
    assert live_version(published.profile).number == 2
    assert say(api, "good-0-0", "e agora?")["metadata"]["version"] == 2  # everyone, the control's cohort too
    history = list(
        RolloutDecision.objects.filter(plan=plan).order_by("created_at", "id").values_list("action", "percentage")
    )
    assert history == [("start", 20), ("advance", 50), ("advance", 100), ("complete", 100)]


def test_commands_follow_the_plans_status(published):
    plan = plan_for(good_candidate(published.profile))
    with pytest.raises(RolloutStateError):
        plan_command(plan, "resume", actor="test")
    plan_start(plan, actor="test")
    with pytest.raises(RolloutStateError):
        plan_start(plan, actor="test")
    plan_command(plan, "pause", actor="test")
    with pytest.raises(RolloutStateError):
        plan_evaluate(plan)
    plan_command(plan, "resume", actor="test")
    plan_command(plan, "abort", actor="test")
    plan.refresh_from_db()
    assert plan.status == RolloutPlanStatus.ABORTED


def test_a_publish_during_the_plan_aborts_it(api, published):
    plan = plan_for(good_candidate(published.profile))
    plan_start(plan, actor="test")
    Keyword.objects.create(
        intent=Intent.objects.get(profile=published.profile, name="retail_order_tracking"), text="zz"
    )
    version_publish(profile=published.profile, note="meanwhile")

    decision = plan_evaluate(plan)

    assert decision.action == "abort" and "changed under the plan" in decision.reason


def rate(x, n):
    return {"x": x, "n": n, "rate": x / n}


@pytest.mark.django_db(transaction=False)
@pytest.mark.parametrize(
    ("candidate", "control", "breached"),
    [
        (rate(3, 10), rate(1, 10), False),  # 30 % against 10 %, beyond the threshold, but ten turns prove nothing
        (rate(30, 100), rate(10, 100), True),  # the same rates on a hundred: Fisher p ≈ 0.0004
        (rate(12, 100), rate(10, 100), False),  # within 25 % (+ half a point) of the control
        (rate(1, 100), rate(0, 100), False),  # a control at zero: the half point absorbs one stray turn
    ],
)
def test_a_rate_guard_needs_the_threshold_and_significance(candidate, control, breached):
    verdict = guard_verdict(
        {"metric": "fallback_rate", "threshold": 0.25}, {"fallback_rate": candidate}, {"fallback_rate": control}, 0.01
    )

    assert verdict.breached is breached, verdict.reason


def every_answer_slower(limit: float) -> tuple[int, int]:
    """The latency guard's count when all of 41 timed answers were slower than ``limit``."""
    return 41, 41


@pytest.mark.django_db(transaction=False)
def test_the_judge_guard_compares_means_with_welchs_test_and_latency_by_its_rule():
    judge = {"metric": "judge_score", "threshold": 0.1}
    worse = {"judge_score": {"n": 50, "mean": 0.7, "sd": 0.1}}
    same = {"judge_score": {"n": 50, "mean": 0.88, "sd": 0.1}}
    control = {"judge_score": {"n": 50, "mean": 0.9, "sd": 0.1}}
    latency = {"metric": "p95_latency_ms", "threshold": 0.3}

    assert guard_verdict(judge, worse, control, 0.01).breached
    assert not guard_verdict(judge, same, control, 0.01).breached
    assert guard_verdict(
        latency, {"p95_latency_ms": 400.0}, {"p95_latency_ms": 200.0}, 0.01, slower=every_answer_slower
    ).breached
    assert not guard_verdict(latency, {"p95_latency_ms": 240.0}, {"p95_latency_ms": 200.0}, 0.01).breached
    assert not guard_verdict(latency, {"p95_latency_ms": 6.0}, {"p95_latency_ms": 2.0}, 0.01).breached  # 4 ms of noise


@pytest.mark.django_db(transaction=False)
@pytest.mark.parametrize(
    ("slower", "breached"),
    [
        ((2, 41), False),  # two stalls of a busy machine put the p95 past the limit: 5 % of 41 allows them
        ((4, 41), False),  # twice the 5 % a p95 at the limit allows, on 41 answers: binomial p ≈ 0.14
        ((30, 41), True),  # most answers slower than the limit: a regression
    ],
)
def test_a_p95_past_its_limit_rolls_back_only_when_significantly_more_answers_than_5_percent_are_slower(
    slower, breached
):
    asked = []

    def counted(limit: float) -> tuple[int, int]:
        asked.append(limit)
        return slower

    relative = {"metric": "p95_latency_ms", "threshold": 0.3}
    verdict = guard_verdict(relative, {"p95_latency_ms": 175.0}, {"p95_latency_ms": 6.0}, 0.01, slower=counted)
    absolute = {"metric": "p95_latency_ms", "absolute": 100.0}
    limited = guard_verdict(absolute, {"p95_latency_ms": 175.0}, {"p95_latency_ms": 6.0}, 0.01, slower=counted)

    assert (verdict.breached, limited.breached) == (breached, breached), (verdict.reason, limited.reason)
    assert asked == [6.0 * 1.3 + 50, 100.0]  # counted against the allowed latency and the absolute limit
    assert f"{slower[0]} of {slower[1]} answers slower" in verdict.reason


def test_a_candidate_with_two_slow_answers_advances_and_one_slow_throughout_is_rolled_back(api, published):
    plan = plan_for(good_candidate(published.profile), guards=[{"metric": "p95_latency_ms", "threshold": 0.3}])
    plan_start(plan, actor="test")
    for n in range(120):
        say(api, f"slow-{n}")
    answers = Message.objects.filter(role=MessageRole.ASSISTANT)
    answers.update(latency_ms=5.0)
    candidate = answers.filter(routing_version=plan.candidate.number).order_by("pk")
    assert candidate.count() >= 10
    Message.objects.filter(pk__in=list(candidate.values_list("pk", flat=True)[:2])).update(latency_ms=900.0)

    advanced = plan_evaluate(plan, actor="test")

    # Two stalls put the candidate's p95 past the limit; two of its ~24 answers are no evidence of a slower version.
    assert advanced.action == "advance", advanced.reason
    [latency] = advanced.figures["verdicts"]
    assert "2 of" in latency["reason"] and "answers slower" in latency["reason"], latency
    plan.refresh_from_db()
    for n in range(120):
        say(api, f"slow-next-{n}")
    Message.objects.filter(role=MessageRole.ASSISTANT, routing_version=plan.control.number).update(latency_ms=5.0)
    Message.objects.filter(role=MessageRole.ASSISTANT, routing_version=plan.candidate.number).update(latency_ms=900.0)

    rolled = plan_evaluate(plan, actor="test")

    assert rolled.action == "rollback", rolled.reason
    assert "answers slower" in rolled.reason and "binomial" in rolled.reason


def test_customers_rating_the_candidates_answers_down_roll_it_back(api, published):
    plan = plan_for(good_candidate(published.profile), guards=[{"metric": "negative_feedback_rate", "threshold": 0.5}])
    plan_start(plan, actor="test")
    for n in range(120):
        answer = say(api, f"rated-{n}")
        rating = "down" if answer["metadata"]["version"] == 2 else "up"
        rated = api.post(
            f"/api/sessions/{answer['conversation_key']}/feedback",
            {"message_id": answer["message_id"], "rating": rating},
            format="json",
        )
        assert rated.status_code == 201, rated.content

    decision = plan_evaluate(plan)

    assert (
        decision.action == "rollback" and "negative-feedback rate 100 % against 0 % for the control" in decision.reason
    )
    assert decision.figures["candidate"]["negative_feedback_rate"]["rate"] == 1.0
    assert decision.figures["control"]["negative_feedback_rate"]["rate"] == 0.0


def people_candidate(profile):
    """A candidate whose invoice intent is answered by people (the support team): its customers are escalated."""
    Intent.objects.filter(profile=profile, name="billing_invoice_explanation").update(escalate_to="support")
    config_version_bump()
    return version_publish(profile=profile, note="invoices to people", release=False)


def test_a_candidate_that_hands_more_conversations_to_people_is_rolled_back(api, published):
    plan = plan_for(people_candidate(published.profile), guards=[{"metric": "escalation_rate", "threshold": 0.5}])
    plan_start(plan, actor="test")
    served = [say(api, f"people-{n}")["metadata"] for n in range(120)]
    assert {meta["version"] for meta in served if meta["escalation"]} == {2}  # the candidate's customers only

    decision = plan_evaluate(plan)

    plan.refresh_from_db()
    assert (decision.action, plan.status) == ("rollback", RolloutPlanStatus.ROLLED_BACK), decision.reason
    assert "escalation rate 100 % against 0 % for the control" in decision.reason
    candidate, control = decision.figures["candidate"], decision.figures["control"]
    assert candidate["escalation_rate"]["x"] == candidate["conversations"] >= 10
    assert (control["escalation_rate"]["x"], control["escalation_rate"]["n"]) == (0, control["conversations"])


def test_the_abandonment_rate_counts_the_cohorts_outcomes_decided_in_the_window(api, published):
    plan = plan_for(good_candidate(published.profile))
    plan_start(plan, actor="test")
    for n in range(30):
        say(api, f"quiet-{n}")
    say(api, "quiet-0", "obrigado, tchau")
    outcomes_close(now=timezone.now() + dt.timedelta(minutes=31))
    decided = {
        version: ConversationOutcome.objects.filter(routing_version=version).values_list("outcome", flat=True)
        for version in (1, 2)
    }
    until = timezone.now() + dt.timedelta(hours=1)
    plan.refresh_from_db()

    candidate, control = cohorts_figures(
        [CohortWindow(plan, cohort, plan.stage_started_at, until) for cohort in (CANDIDATE, CONTROL)]
    )

    for figures, version in ((candidate, 2), (control, 1)):
        outcomes = list(decided[version])
        assert figures["abandonment_rate"]["n"] == len(outcomes)
        assert figures["abandonment_rate"]["x"] == outcomes.count("abandoned")
    assert candidate["abandonment_rate"]["n"] + control["abandonment_rate"]["n"] == 30
    assert candidate["abandonment_rate"]["x"] + control["abandonment_rate"]["x"] == 29  # one said goodbye


def test_a_tick_reads_every_plans_figures_at_once_and_each_plan_gets_what_it_would_read_alone(api, published):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    version_plan = plan_for(good_candidate(published.profile))
    plan_start(version_plan, actor="test")
    mode_plan = RolloutPlan.objects.create(
        name="multi-agent", target="multi_agent", profile=published.profile, stages=[50, 100], min_conversations=500
    )
    plan_start(mode_plan, actor="test")
    for n in range(40):  # the flag's route (/api/chat/message); its stickiness is the user: one customer each
        body = {"text": INVOICE, "session_id": f"both-{n}", "user_id": f"customer-{n}"}
        response = api.post("/api/chat/message", {"agent_id": "telecom_contas", "payload": body}, format="json")
        assert response.status_code == 200, response.content
    now = timezone.now()
    until = now + dt.timedelta(seconds=1)
    windows = [
        CohortWindow(plan, cohort, plan.stage_started_at, until)
        for plan in RolloutPlan.objects.filter(pk__in=[version_plan.pk, mode_plan.pk])
        .select_related("candidate", "control")
        .order_by("pk")
        for cohort in (CANDIDATE, CONTROL)
    ]

    with CaptureQueriesContext(connection) as together:
        batched = cohorts_figures(windows)

    alone = [cohorts_figures([window])[0] for window in windows]
    assert batched == alone
    # The same turns counted by version and by mode: both plans see all 40 conversations between their cohorts.
    assert sum(figures["conversations"] for figures in batched[:2]) == 40
    assert sum(figures["conversations"] for figures in batched[2:]) == 40
    # Seven queries whatever the number of windows (one aggregate per window and table, joined by UNION ALL); on
    # SQLite, which has no percentile, an eighth reads every window's latencies.
    assert len(together) == (7 if connection.vendor == "postgresql" else 8)
    decisions = plans_evaluate(now=now, interval=0)
    assert {decision.plan_id for decision in decisions} == {version_plan.pk, mode_plan.pk}
    by_plan = {decision.plan_id: decision.figures for decision in decisions}
    assert by_plan[version_plan.pk]["candidate"] == batched[0]
    assert by_plan[mode_plan.pk]["control"] == batched[3]
