"""Percentage rollout flags: Unleash-compatible buckets, cohort properties, precedence (pure, no database).

The Unleash client-specification vectors are read from outside the repository
(``shared/unleash-spec`` beside the checkout, or the folder named by
``UNLEASH_SPEC_DIR``); see ``PROVENANCE.md`` there for their source and format.
Where the folder is absent, the vector tests skip and say where they looked.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
from dataclasses import replace
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from routing.rollout import (
    REASON_BUCKET,
    REASON_KILL_SWITCH,
    REASON_NO_STICKINESS,
    REASON_TENANT_OVERRIDE,
    REASON_UNKNOWN_FLAG,
    REASON_USER_OVERRIDE,
    STICKINESS_SESSION,
    STICKINESS_USER,
    FlagEvaluation,
    FlagSpec,
    bucket,
    flag_evaluate,
    rollout_includes,
)

# --- Unleash client-specification vectors --------------------------------------

SPEC_FILES = (
    "03-gradual-rollout-user-id-strategy.json",
    "04-gradual-rollout-session-id-strategy.json",
    "10-flexible-rollout-strategy.json",
    "12-custom-stickiness.json",
)
SPEC_TEST_COUNT = 27  # 6 + 6 + 10 + 5 entries under "tests" in the four files


def unleash_spec_dir() -> Path:
    named = os.environ.get("UNLEASH_SPEC_DIR", "")
    return Path(named) if named else Path(settings.BASE_DIR).parent / "shared" / "unleash-spec"


def skip_without_spec() -> Path:
    folder = unleash_spec_dir()
    if not folder.is_dir():
        pytest.skip(
            f"Unleash client-specification vectors not found: expected the folder {folder} "
            "(shared/unleash-spec beside the checkout; set UNLEASH_SPEC_DIR to use another folder)"
        )
    return folder


def spec_cases(*, expressible_only: bool = False) -> list[Any]:
    """One case per entry of the files' ``tests``; a single skipping case when the folder is absent.

    ``expressible_only`` keeps the entries whose feature :func:`as_flag_spec` can express as our flag.
    """
    folder = unleash_spec_dir()
    if not folder.is_dir():
        return [pytest.param(None, None, id="unleash-spec-folder-absent")]
    cases = []
    for name in SPEC_FILES:
        path = folder / name
        if not path.is_file():
            # A folder without one of the files is a broken copy: fail, don't skip.
            cases.append(pytest.param(name, None, id=f"{name} missing"))
            continue
        document = json.loads(path.read_text(encoding="utf-8"))
        cases.extend(
            pytest.param(name, entry, id=entry["description"])
            for entry in document["tests"]
            if not expressible_only or as_flag_spec(document["state"], entry["toggleName"]) is not None
        )
    return cases


@cache
def spec_state(name: str) -> dict[str, Any]:
    return json.loads((unleash_spec_dir() / name).read_text(encoding="utf-8"))["state"]


def unleash_is_enabled(state: dict[str, Any], toggle_name: str, context: dict[str, Any]) -> bool:
    """Test code: a minimal Unleash client for the strategies these vector files use, and nothing more.

    Every percentage decision goes through the production
    :func:`routing.rollout.rollout_includes`, so the vectors check our buckets.
    Anything the files do not use (constraints, other strategies, a feature
    without strategies) raises instead of guessing Unleash's answer.
    """
    feature = next((item for item in state["features"] if item["name"] == toggle_name), None)
    if feature is None or not feature["enabled"]:
        return False
    if not feature["strategies"]:
        raise NotImplementedError(f"{toggle_name}: a feature without strategies is not in these vectors")
    return any(strategy_is_enabled(strategy, toggle_name, context) for strategy in feature["strategies"])


def strategy_is_enabled(strategy: dict[str, Any], toggle_name: str, context: dict[str, Any]) -> bool:
    if strategy.get("constraints"):
        raise NotImplementedError(f"{toggle_name}: constraints are not in these vectors")
    parameters = strategy.get("parameters", {})
    name = strategy["name"]
    if name == "default":
        return True
    if name in ("gradualRolloutUserId", "gradualRolloutSessionId"):
        value = context.get("userId" if name == "gradualRolloutUserId" else "sessionId")
        if not value:
            return False
        return rollout_includes(int(parameters["percentage"]), parameters.get("groupId", ""), str(value))
    if name == "flexibleRollout":
        stickiness = parameters.get("stickiness", "default")
        if stickiness == "default":
            # userId, else sessionId, else a random id: only deterministic at 0 % and 100 %.
            value = context.get("userId") or context.get("sessionId") or str(random.randint(1, 10_000))
        else:
            value = context.get(stickiness) or context.get("properties", {}).get(stickiness)
        if not value:
            return False
        return rollout_includes(int(parameters["rollout"]), parameters.get("groupId", toggle_name), str(value))
    raise NotImplementedError(f"{toggle_name}: strategy {name!r} is not in these vectors")


def as_flag_spec(state: dict[str, Any], toggle_name: str) -> FlagSpec | None:
    """Our flag for an Unleash feature with one user- or session-sticky rollout, else ``None``.

    The Unleash ``groupId`` is what our flag key is hashed as.
    """
    feature = next(item for item in state["features"] if item["name"] == toggle_name)
    if not feature["enabled"] or len(feature["strategies"]) != 1:
        return None
    strategy = feature["strategies"][0]
    parameters = strategy.get("parameters", {})
    stickiness = {
        "gradualRolloutUserId": STICKINESS_USER,
        "gradualRolloutSessionId": STICKINESS_SESSION,
        "flexibleRollout": {"userId": STICKINESS_USER, "sessionId": STICKINESS_SESSION}.get(
            parameters.get("stickiness", "default"), ""
        ),
    }.get(strategy["name"], "")
    if not stickiness or strategy.get("constraints"):
        return None
    percentage = parameters.get("percentage", parameters.get("rollout"))
    return FlagSpec(key=parameters.get("groupId", toggle_name), percentage=int(percentage), stickiness=stickiness)


@pytest.mark.parametrize(("file_name", "entry"), spec_cases())
def test_it_agrees_with_the_unleash_client_specification(file_name, entry):
    skip_without_spec()
    if entry is None:
        pytest.fail(f"{file_name} is missing from {unleash_spec_dir()}")
    state = spec_state(file_name)

    assert unleash_is_enabled(state, entry["toggleName"], entry["context"]) is entry["expectedResult"]


@pytest.mark.parametrize(("file_name", "entry"), spec_cases(expressible_only=True))
def test_our_flags_agree_with_the_unleash_rollouts_they_can_express(file_name, entry):
    skip_without_spec()
    if entry is None:
        pytest.fail(f"{file_name} is missing from {unleash_spec_dir()}")
    flag = as_flag_spec(spec_state(file_name), entry["toggleName"])
    context = entry["context"]

    evaluation = flag_evaluate(
        flag,
        key=entry["toggleName"],
        user_id=context.get("userId", ""),
        session_id=context.get("sessionId", ""),
    )

    assert evaluation.enabled is entry["expectedResult"]


def test_the_vector_files_hold_every_expected_entry():
    skip_without_spec()
    cases = spec_cases()

    assert all(case.values[1] is not None for case in cases)
    assert len(cases) == SPEC_TEST_COUNT
    # The gradual rollouts of 03 and 04 except D (two strategies), and 10's userId.55 and sessionId.42.
    assert len(spec_cases(expressible_only=True)) == 14


def test_buckets_match_the_numbers_pinned_in_the_unleash_sdks():
    # StrategyUtilsTest in unleash-client-java (the same pair in the Node and Go clients).
    assert bucket("gr1", "123") == 73
    assert bucket("groupX", "999") == 25


# --- Cohort properties over 100,000 ids -------------------------------------------

PROPERTY_FLAG = "rollout_property"
IDS = tuple(f"user-{i}" for i in range(100_000))


@cache
def cohort(percentage: int, flag_key: str = PROPERTY_FLAG) -> frozenset[str]:
    return frozenset(identifier for identifier in IDS if rollout_includes(percentage, flag_key, identifier))


def test_buckets_run_from_1_to_100_and_all_of_them_occur():
    assert {bucket(PROPERTY_FLAG, identifier) for identifier in IDS} == set(range(1, 101))


def test_raising_the_percentage_only_adds_subjects():
    percentages = (0, 1, 2, 5, 10, 25, 50, 75, 90, 99, 100)

    for lower, higher in pairwise(percentages):
        assert cohort(lower) <= cohort(higher), f"someone at {lower} % is missing at {higher} %"
        assert len(cohort(lower)) < len(cohort(higher))


def test_going_back_down_gives_exactly_the_first_cohort():
    flag = FlagSpec(key=PROPERTY_FLAG, percentage=10)

    def enabled(spec: FlagSpec) -> frozenset[str]:
        return frozenset(i for i in IDS if flag_evaluate(spec, key=spec.key, user_id=i).enabled)

    first = enabled(flag)
    raised = enabled(replace(flag, percentage=20))
    back = enabled(replace(flag, percentage=10))

    assert first < raised
    assert back == first


@pytest.mark.parametrize("percentage", [1, 10, 25, 50, 90])
@pytest.mark.parametrize("flag_key", [PROPERTY_FLAG, "new_router"])
def test_the_share_included_is_within_one_point_of_the_percentage(percentage, flag_key):
    share = 100 * len(cohort(percentage, flag_key)) / len(IDS)

    assert abs(share - percentage) <= 1, f"{share:.2f} % included at {percentage} %"


def test_zero_percent_includes_nobody_and_one_hundred_everybody():
    assert cohort(0) == frozenset()
    assert cohort(100) == frozenset(IDS)


# --- Precedence ----------------------------------------------------------------

FLAG_KEY = "new_router"
TENANT = "acme"
# Buckets for FLAG_KEY, checked in test_the_precedence_ids_land_where_the_table_assumes.
USER_IN = "user-3"  # bucket 41: in at 50 %
USER_OUT = "user-1"  # bucket 75: out at 50 %
BUCKETS = {USER_IN: 41, USER_OUT: 75}

ON, OFF, NONE = "on", "off", "none"

# kill switch, user override, tenant override, bucket at 50 % -> enabled, reason. Written out by hand.
PRECEDENCE = [
    (True, ON, ON, "in", False, REASON_KILL_SWITCH),
    (True, ON, ON, "out", False, REASON_KILL_SWITCH),
    (True, ON, OFF, "in", False, REASON_KILL_SWITCH),
    (True, ON, OFF, "out", False, REASON_KILL_SWITCH),
    (True, ON, NONE, "in", False, REASON_KILL_SWITCH),
    (True, ON, NONE, "out", False, REASON_KILL_SWITCH),
    (True, OFF, ON, "in", False, REASON_KILL_SWITCH),
    (True, OFF, ON, "out", False, REASON_KILL_SWITCH),
    (True, OFF, OFF, "in", False, REASON_KILL_SWITCH),
    (True, OFF, OFF, "out", False, REASON_KILL_SWITCH),
    (True, OFF, NONE, "in", False, REASON_KILL_SWITCH),
    (True, OFF, NONE, "out", False, REASON_KILL_SWITCH),
    (True, NONE, ON, "in", False, REASON_KILL_SWITCH),
    (True, NONE, ON, "out", False, REASON_KILL_SWITCH),
    (True, NONE, OFF, "in", False, REASON_KILL_SWITCH),
    (True, NONE, OFF, "out", False, REASON_KILL_SWITCH),
    (True, NONE, NONE, "in", False, REASON_KILL_SWITCH),
    (True, NONE, NONE, "out", False, REASON_KILL_SWITCH),
    (False, ON, ON, "in", True, REASON_USER_OVERRIDE),
    (False, ON, ON, "out", True, REASON_USER_OVERRIDE),
    (False, ON, OFF, "in", True, REASON_USER_OVERRIDE),
    (False, ON, OFF, "out", True, REASON_USER_OVERRIDE),
    (False, ON, NONE, "in", True, REASON_USER_OVERRIDE),
    (False, ON, NONE, "out", True, REASON_USER_OVERRIDE),
    (False, OFF, ON, "in", False, REASON_USER_OVERRIDE),
    (False, OFF, ON, "out", False, REASON_USER_OVERRIDE),
    (False, OFF, OFF, "in", False, REASON_USER_OVERRIDE),
    (False, OFF, OFF, "out", False, REASON_USER_OVERRIDE),
    (False, OFF, NONE, "in", False, REASON_USER_OVERRIDE),
    (False, OFF, NONE, "out", False, REASON_USER_OVERRIDE),
    (False, NONE, ON, "in", True, REASON_TENANT_OVERRIDE),
    (False, NONE, ON, "out", True, REASON_TENANT_OVERRIDE),
    (False, NONE, OFF, "in", False, REASON_TENANT_OVERRIDE),
    (False, NONE, OFF, "out", False, REASON_TENANT_OVERRIDE),
    (False, NONE, NONE, "in", True, REASON_BUCKET),
    (False, NONE, NONE, "out", False, REASON_BUCKET),
]


def shown(value: str) -> str:
    """A caller's pseudonym of a stickiness value (``chat.intake`` gives the stored one)."""
    return f"pseudonym-of-{value}"


def overrides(key: str, setting: str) -> dict[str, bool]:
    return {} if setting == NONE else {key: setting == ON}


def test_the_precedence_ids_land_where_the_table_assumes():
    assert bucket(FLAG_KEY, USER_IN) == BUCKETS[USER_IN]
    assert bucket(FLAG_KEY, USER_OUT) == BUCKETS[USER_OUT]
    assert rollout_includes(50, FLAG_KEY, USER_IN)
    assert not rollout_includes(50, FLAG_KEY, USER_OUT)


def test_the_precedence_table_covers_every_combination():
    assert len({row[:4] for row in PRECEDENCE}) == len(PRECEDENCE) == 2 * 3 * 3 * 2


@pytest.mark.parametrize(
    ("kill_switch", "user_override", "tenant_override", "side", "enabled", "reason"),
    PRECEDENCE,
    ids=[f"kill={row[0]}-user={row[1]}-tenant={row[2]}-bucket={row[3]}" for row in PRECEDENCE],
)
def test_it_applies_kill_switch_then_user_then_tenant_then_bucket(
    kill_switch, user_override, tenant_override, side, enabled, reason
):
    user = USER_IN if side == "in" else USER_OUT
    flag = FlagSpec(
        key=FLAG_KEY,
        kill_switch=kill_switch,
        percentage=50,
        user_overrides=overrides(user, user_override),
        tenant_overrides=overrides(TENANT, tenant_override),
    )

    evaluation = flag_evaluate(flag, key=FLAG_KEY, user_id=user, session_id="sess-1", tenant=TENANT, pseudonym=shown)

    assert (evaluation.enabled, evaluation.reason) == (enabled, reason)
    assert (evaluation.stickiness_value, evaluation.bucket) == (shown(user), BUCKETS[user])


# --- Stickiness and the recorded evaluation ---------------------------------------


def test_session_stickiness_buckets_the_session_id():
    flag = FlagSpec(key=FLAG_KEY, percentage=50, stickiness=STICKINESS_SESSION)

    # user-1 is out at 50 % (bucket 75) but sess-1 is in (bucket 1).
    evaluation = flag_evaluate(flag, key=FLAG_KEY, user_id="user-1", session_id="sess-1", pseudonym=shown)

    assert evaluation == FlagEvaluation(
        flag=FLAG_KEY,
        enabled=True,
        reason=REASON_BUCKET,
        percentage=50,
        stickiness=STICKINESS_SESSION,
        stickiness_value=shown("sess-1"),
        bucket=1,
    )


def test_user_stickiness_buckets_the_user_id():
    flag = FlagSpec(key=FLAG_KEY, percentage=50, stickiness=STICKINESS_USER)

    evaluation = flag_evaluate(flag, key=FLAG_KEY, user_id="user-1", session_id="sess-1", pseudonym=shown)

    assert (evaluation.enabled, evaluation.reason) == (False, REASON_BUCKET)
    assert (evaluation.stickiness_value, evaluation.bucket) == (shown("user-1"), 75)


@pytest.mark.parametrize(
    ("stickiness", "subject"),
    [
        (STICKINESS_USER, {"session_id": "sess-1"}),
        (STICKINESS_SESSION, {"user_id": "user-1"}),
        ("tenant", {"user_id": "user-1", "session_id": "sess-1"}),
    ],
)
def test_it_is_off_without_a_value_for_the_flags_stickiness(stickiness, subject):
    flag = FlagSpec(key=FLAG_KEY, percentage=100, stickiness=stickiness)

    evaluation = flag_evaluate(flag, key=FLAG_KEY, **subject)

    assert (evaluation.enabled, evaluation.reason) == (False, REASON_NO_STICKINESS)
    assert (evaluation.stickiness_value, evaluation.bucket) == ("", None)


def test_the_evaluation_shows_the_callers_pseudonym_of_the_value_it_buckets_never_the_value():
    flag = FlagSpec(key=FLAG_KEY, percentage=50, stickiness=STICKINESS_USER)
    email = "joao.silva@example.com"

    shown = flag_evaluate(flag, key=FLAG_KEY, user_id=email, pseudonym=lambda value: f"email:{len(value)}")
    withheld = flag_evaluate(flag, key=FLAG_KEY, user_id=email)

    assert (shown.stickiness_value, shown.bucket) == ("email:22", bucket(FLAG_KEY, email))  # the SDKs' bucket
    assert (withheld.stickiness_value, withheld.bucket, withheld.enabled) == ("", shown.bucket, shown.enabled)
    assert email not in json.dumps([shown.as_dict(), withheld.as_dict()])


def test_a_tenant_override_applies_without_a_stickiness_value():
    flag = FlagSpec(key=FLAG_KEY, percentage=0, tenant_overrides={TENANT: True})

    evaluation = flag_evaluate(flag, key=FLAG_KEY, tenant=TENANT)

    assert (evaluation.enabled, evaluation.reason, evaluation.bucket) == (True, REASON_TENANT_OVERRIDE, None)


def test_empty_ids_never_match_an_override():
    flag = FlagSpec(key=FLAG_KEY, percentage=100, user_overrides={"": False}, tenant_overrides={"": False})

    evaluation = flag_evaluate(flag, key=FLAG_KEY, session_id="sess-1")

    assert (evaluation.enabled, evaluation.reason) == (False, REASON_NO_STICKINESS)


def test_an_unknown_flag_is_off():
    evaluation = flag_evaluate(None, key="no_such_flag", user_id="user-1", tenant=TENANT)

    assert evaluation == FlagEvaluation(
        flag="no_such_flag", enabled=False, reason=REASON_UNKNOWN_FLAG, percentage=0, stickiness=""
    )


def test_the_evaluation_is_json_serialisable():
    flag = FlagSpec(key=FLAG_KEY, percentage=50, user_overrides={"user-3": False})
    evaluations = [
        flag_evaluate(flag, key=FLAG_KEY, user_id="user-3", pseudonym=shown),
        flag_evaluate(flag, key=FLAG_KEY),
        flag_evaluate(None, key="no_such_flag"),
    ]

    for evaluation in evaluations:
        data = evaluation.as_dict()
        assert json.loads(json.dumps(data)) == data
        assert set(data) == {"flag", "enabled", "reason", "percentage", "stickiness", "stickiness_value", "bucket"}
    assert evaluations[0].as_dict() == {
        "flag": FLAG_KEY,
        "enabled": False,
        "reason": REASON_USER_OVERRIDE,
        "percentage": 50,
        "stickiness": STICKINESS_USER,
        "stickiness_value": shown("user-3"),
        "bucket": 41,
    }


def test_a_flags_evidence_as_a_dict_holds_every_field_as_dataclasses_would_give_it():
    evaluation = FlagEvaluation(
        flag="new_router",
        enabled=True,
        reason="rollout",
        percentage=25,
        stickiness="user_id",
        stickiness_value="u-1f3a",
        bucket=17,
    )

    assert evaluation.as_dict() == dataclasses.asdict(evaluation)
    assert list(evaluation.as_dict()) == [each.name for each in dataclasses.fields(FlagEvaluation)]
