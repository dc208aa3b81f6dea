"""The deterministic core of goal orchestration: resolver, decomposer, composition, checks, references."""

from __future__ import annotations

import pytest

from routing.goals.manifest import ManifestError, manifest_bounds, manifest_read
from routing.goals.planner import (
    DAG,
    LAST,
    PARALLEL,
    REPORT,
    SEQUENTIAL,
    CapabilitySpec,
    ExecutionIntent,
    ExecutionPlan,
    ExecutionStep,
    GoalSpec,
    IntentOutput,
    PlanError,
    PlanLimits,
    candidate_choose,
    goal_resolve,
    plan_build,
    plan_check,
    refs_resolve,
)

GET_QUOTE = GoalSpec(
    domain="finance",
    name="GET_QUOTE",
    entities_schema={"symbol_text": {"type": "string", "required": True}},
    capabilities=["get_stock_price"],
)
TOP_MOVERS = GoalSpec(
    domain="finance",
    name="TOP_MOVERS",
    entities_schema={
        "direction": {
            "type": "enum",
            "values": ["GAINERS", "LOSERS", "BOTH"],
            "required": True,
            "capability_map": {
                "GAINERS": "get_top_gainers",
                "LOSERS": "get_top_losers",
                "BOTH": ["get_top_gainers", "get_top_losers"],
            },
        },
        "market_text": {"type": "string"},
    },
)
CATALOGUE = {
    "get_stock_price": CapabilitySpec(
        "finance",
        "get_stock_price",
        {
            "decomposition": {
                "array_params": [{"param_name": "symbols", "single_param_name": "symbol_text", "max_concurrency": 2}]
            },
            "composition": {
                "followup_roles": ["notifier"],
                "enabled_if": {"path": "parameters.notify", "equals": True},
                "param_map": {"message": {"from_parameters": ["_step_explanation"]}},
            },
        },
    ),
    "get_top_gainers": CapabilitySpec("finance", "get_top_gainers"),
    "get_top_losers": CapabilitySpec("finance", "get_top_losers"),
    "send_message": CapabilitySpec("notify", "send_message", {"roles": ["notifier"]}),
    "retired": CapabilitySpec("finance", "retired", enabled=False),
}


def intent(goal: str, **entities) -> IntentOutput:
    return IntentOutput("finance", goal, entities, 0.95, "…")


@pytest.mark.parametrize(
    ("goal", "entities", "capabilities"),
    [
        (GET_QUOTE, {"symbol_text": "Nordea"}, ["get_stock_price"]),
        (TOP_MOVERS, {"direction": "GAINERS"}, ["get_top_gainers"]),
        (TOP_MOVERS, {"direction": "LOSERS"}, ["get_top_losers"]),
        (TOP_MOVERS, {}, ["get_top_gainers"]),  # no direction and no default: the first value
        (TOP_MOVERS, {"direction": "SIDEWAYS"}, ["get_top_gainers"]),  # not a value of the enum: the same
        (TOP_MOVERS, {"direction": "BOTH"}, ["get_top_gainers", "get_top_losers"]),
    ],
)
def test_the_resolver_follows_seed_002s_table(goal, entities, capabilities):
    resolved = goal_resolve(intent(goal.name, **entities), goal)
    assert [one.capability for one in resolved] == capabilities
    assert all(one.domain == "finance" and one.confidence == 0.95 for one in resolved)


def test_a_missing_enum_takes_its_default_and_the_parameters_carry_the_chosen_value():
    with_default = GoalSpec(
        "finance",
        "TOP_MOVERS",
        {"direction": {**TOP_MOVERS.entities_schema["direction"], "default": "BOTH"}},
    )
    resolved = goal_resolve(intent("TOP_MOVERS", market_text="Brasil"), with_default)
    assert [one.capability for one in resolved] == ["get_top_gainers", "get_top_losers"]
    assert resolved[0].parameters == {"market_text": "Brasil", "direction": "BOTH"}


def test_a_goal_that_names_no_capability_is_refused():
    with pytest.raises(PlanError, match="names no capability"):
        goal_resolve(intent("EMPTY"), GoalSpec("finance", "EMPTY"))


def test_one_capability_is_a_one_step_sequential_plan_whose_answer_is_the_last_output():
    plan = plan_build(goal_resolve(intent("GET_QUOTE", symbol_text="Nordea"), GET_QUOTE), CATALOGUE)
    assert (plan.execution_mode, plan.combine_mode, len(plan.steps)) == (SEQUENTIAL, LAST, 1)
    assert plan.steps[0].params == {"symbol_text": "Nordea"} and plan.steps[0].output_key == "primary"


def test_a_list_parameter_fans_out_into_parallel_steps_bounded_by_its_metadata():
    resolved = goal_resolve(intent("GET_QUOTE", symbols=["PETR4", "VALE3", "Nordea"]), GET_QUOTE)
    plan = plan_build(resolved, CATALOGUE)
    assert plan.execution_mode == PARALLEL and plan.combine_mode == REPORT
    assert plan.max_concurrency == 2  # array_params' max_concurrency
    assert [step.params for step in plan.steps] == [
        {"symbol_text": "PETR4"},
        {"symbol_text": "VALE3"},
        {"symbol_text": "Nordea"},
    ]


def test_both_directions_are_two_independent_steps():
    plan = plan_build(goal_resolve(intent("TOP_MOVERS", direction="BOTH"), TOP_MOVERS), CATALOGUE)
    assert plan.execution_mode == PARALLEL
    assert [step.capability for step in plan.steps] == ["get_top_gainers", "get_top_losers"]


def test_composition_adds_an_optional_notifier_that_reads_the_quotes_explanation_when_asked():
    resolved = goal_resolve(intent("GET_QUOTE", symbol_text="PETR4", notify=True), GET_QUOTE)
    plan = plan_build(resolved, CATALOGUE)
    assert plan.execution_mode == DAG and plan.combine_mode == REPORT
    quote, notify = plan.steps
    assert (notify.capability, notify.depends_on, notify.required) == ("send_message", (quote.id,), False)
    assert notify.params == {"message": "${1.explanation}"}


def test_composition_stays_out_when_its_condition_does_not_hold():
    plan = plan_build(goal_resolve(intent("GET_QUOTE", symbol_text="PETR4"), GET_QUOTE), CATALOGUE)
    assert [step.capability for step in plan.steps] == ["get_stock_price"]


def test_each_fanned_out_quote_gets_its_own_notification():
    resolved = goal_resolve(intent("GET_QUOTE", symbols=["PETR4", "VALE3"], notify=True), GET_QUOTE)
    plan = plan_build(resolved, CATALOGUE)
    notes = [step for step in plan.steps if step.capability == "send_message"]
    assert [(step.depends_on, step.params["message"]) for step in notes] == [
        ((1,), "${1.explanation}"),
        ((2,), "${2.explanation}"),
    ]


def step(id, capability="get_stock_price", depends_on=(), **params):
    return ExecutionStep(id=id, domain="finance", capability=capability, params=params, depends_on=tuple(depends_on))


def plan_of(*steps):
    return ExecutionPlan(DAG, REPORT, 4, tuple(steps))


@pytest.mark.parametrize(
    ("plan", "error"),
    [
        (plan_of(step(1, depends_on=[2]), step(2, depends_on=[1])), "cycle"),
        (plan_of(step(1, depends_on=[1])), "cycle"),
        (plan_of(step(1), step(2, depends_on=[7])), "not in the plan"),
        (plan_of(step(1), step(2, capability="send_message", message="${3.explanation}")), "no step of the plan"),
        (plan_of(step(1), step(2, capability="send_message", message="${1.explanation}")), "without depending"),
        (plan_of(step(1, capability="nowhere")), "unknown capability"),
        (plan_of(step(1, capability="retired")), "disabled"),
    ],
)
def test_a_plan_that_cannot_run_is_refused_before_anything_runs(plan, error):
    with pytest.raises(PlanError, match=error):
        plan_check(plan, CATALOGUE)


def test_a_long_chain_is_checked_without_recursion():
    chain = [step(1)] + [step(n, depends_on=[n - 1]) for n in range(2, 5000)]
    plan_check(plan_of(*chain), CATALOGUE)


def test_references_take_values_from_earlier_outputs_by_id_or_output_key():
    outputs = {
        "1": {"explanation": "PETR4 está em R$ 38,20", "result": {"price": 38.2}},
        "primary": {"explanation": "PETR4 está em R$ 38,20", "result": {"price": 38.2}},
    }
    params = {
        "message": "${1.explanation}",
        "price": "${primary.result.price}",
        "text": "Preço: ${primary.result.price} (${1.explanation})",
        "list": ["${1.explanation}", 3],
        "missing": "${primary.result.volume}",
    }
    assert refs_resolve(params, outputs) == {
        "message": "PETR4 está em R$ 38,20",
        "price": 38.2,  # a whole-string reference keeps its type
        "text": "Preço: 38.2 (PETR4 está em R$ 38,20)",
        "list": ["PETR4 está em R$ 38,20", 3],
        "missing": None,
    }


# -- flow.pre: pre-steps from metadata ---------------------------------------------------------------------------

RESOLVING = {
    **CATALOGUE,
    "get_stock_price": CapabilitySpec(
        "finance",
        "get_stock_price",
        {
            **CATALOGUE["get_stock_price"].metadata,
            "flow": {"pre": [{"type": "resolve", "param": "symbol", "search_capability": "search_symbol"}]},
        },
    ),
    "search_symbol": CapabilitySpec("finance", "search_symbol"),
}


def test_a_resolve_pre_step_searches_the_text_and_the_step_reads_the_resolved_value():
    plan = plan_build(goal_resolve(intent("GET_QUOTE", symbol_text="Nordea"), GET_QUOTE), RESOLVING)

    search, quote = plan.steps
    assert (search.capability, search.params, search.kind, search.required) == (
        "search_symbol",
        {"query": "Nordea"},
        "resolve",
        True,
    )
    assert search.pre == {
        "type": "resolve",
        "param": "symbol",
        "from_param": "symbol_text",
        "search_capability": "search_symbol",
        "query_param": "query",
        "candidates": "matches",
        "value": "symbol",
        "label": ["name"],
    }
    assert (quote.capability, quote.params, quote.depends_on) == (
        "get_stock_price",
        {"symbol": "${1.result.resolved}"},
        (1,),
    )
    assert quote.output_key == "primary"
    assert plan.execution_mode == DAG and plan.combine_mode == LAST  # the pre-step is not an answer of its own
    assert plan.as_dict()["steps"][0]["kind"] == "resolve" and "kind" not in plan.as_dict()["steps"][1]


def test_seed_002s_resolve_symbol_is_an_alias_and_every_field_can_be_named():
    metadata = {
        "flow": {
            "pre": [
                {
                    "type": "resolve_symbol",
                    "param": "ticker",
                    "from_param": "company",
                    "search_capability": "lookup",
                    "query_param": "q",
                    "candidates": "hits",
                    "value": "code",
                    "label": ["title", "venue"],
                }
            ]
        }
    }
    catalogue = {"quote": CapabilitySpec("x", "quote", metadata), "lookup": CapabilitySpec("x", "lookup")}
    resolved = [ExecutionIntent("x", "quote", {"company": "Acme", "currency": "EUR"}, 0.99, "…")]

    lookup, quote = plan_build(resolved, catalogue).steps

    assert (lookup.kind, lookup.params, lookup.pre["label"]) == ("resolve", {"q": "Acme"}, ["title", "venue"])
    assert quote.params == {"currency": "EUR", "ticker": "${1.result.resolved}"}


def test_no_pre_step_once_the_params_hold_what_it_would_resolve():
    chosen = goal_resolve(intent("GET_QUOTE", symbol_text="Nordea", symbol="NDA-FI.HE"), GET_QUOTE)
    plan = plan_build(chosen, RESOLVING)
    assert [(step.capability, step.kind) for step in plan.steps] == [("get_stock_price", "")]
    assert plan.steps[0].params["symbol"] == "NDA-FI.HE" and plan.execution_mode == SEQUENTIAL


def test_a_value_the_user_chose_among_a_searchs_candidates_is_the_param_with_no_search_again():
    entities = {"symbols": ["NDA-FI.HE", "Vale"], "_chosen": {"symbol": ["NDA-FI.HE"]}}
    plan = plan_build(goal_resolve(intent("GET_QUOTE", **entities), GET_QUOTE), RESOLVING)

    assert [(s.id, s.capability, s.depends_on, s.params) for s in plan.steps] == [
        (1, "get_stock_price", (), {"symbol": "NDA-FI.HE"}),  # a code the search need not know
        (2, "search_symbol", (), {"query": "Vale"}),
        (3, "get_stock_price", (2,), {"symbol": "${2.result.resolved}"}),
    ]


def test_each_fanned_out_element_gets_its_own_search_so_the_searches_and_then_the_quotes_run_side_by_side():
    plan = plan_build(goal_resolve(intent("GET_QUOTE", symbols=["PETR4", "Vale"], notify=True), GET_QUOTE), RESOLVING)

    assert [(s.id, s.capability, s.depends_on, s.params) for s in plan.steps] == [
        (1, "search_symbol", (), {"query": "PETR4"}),
        (2, "get_stock_price", (1,), {"notify": True, "symbol": "${1.result.resolved}"}),
        (3, "search_symbol", (), {"query": "Vale"}),
        (4, "get_stock_price", (3,), {"notify": True, "symbol": "${3.result.resolved}"}),
        (5, "send_message", (2,), {"message": "${2.explanation}"}),
        (6, "send_message", (4,), {"message": "${4.explanation}"}),
    ]
    assert plan.execution_mode == DAG and plan.combine_mode == REPORT


@pytest.mark.parametrize(
    ("pre", "error"),
    [
        ({"type": "guess", "param": "symbol", "search_capability": "search_symbol"}, "unknown type"),
        ({"type": "resolve", "search_capability": "search_symbol"}, "needs a param"),
        ({"type": "resolve", "param": "symbol", "search_capability": "nowhere"}, "unknown capability 'nowhere'"),
    ],
)
def test_a_pre_step_the_platform_cannot_run_is_refused_when_planning(pre, error):
    catalogue = {**RESOLVING, "get_stock_price": CapabilitySpec("finance", "get_stock_price", {"flow": {"pre": [pre]}})}
    with pytest.raises(PlanError, match=error):
        plan_build(goal_resolve(intent("GET_QUOTE", symbol_text="Nordea"), GET_QUOTE), catalogue)


# -- choosing among candidates -----------------------------------------------------------------------------------

NORDEA = [
    {"symbol": "NDA-SE.ST", "name": "Nordea Bank", "exchange": "OMX Stockholm", "market": "SE", "city": "Estocolmo"},
    {"symbol": "NDA-FI.HE", "name": "Nordea Bank", "exchange": "OMX Helsinki", "market": "FI", "city": "Helsinque"},
]
LABELS = ["name", "exchange", "market", "city"]


@pytest.mark.parametrize(
    ("reply", "chosen"),
    [
        ("a segunda", 1),
        ("segunda", 1),
        ("2", 1),
        ("a 2ª", 1),
        ("opção 1", 0),
        ("the second", 1),
        ("la segunda", 1),
        ("primeira", 0),
        ("first one", 0),
        ("la primera", 0),
        ("a última", 1),
        ("last", 1),
        ("NDA-FI.HE", 1),
        ("quero a nda-se.st", 0),
        ("Helsinki", 1),
        ("a de Estocolmo", 0),
        ("a de Helsinki, por favor", 1),
        ("Nordea Bank", None),  # both have it: it picks neither
        ("a terceira", None),  # there is no third
        ("a primeira, de Helsinki", None),  # two different picks
        ("tanto faz", None),
        ("", None),
    ],
)
def test_a_reply_picks_a_candidate_by_ordinal_value_or_a_word_only_one_has(reply, chosen):
    assert candidate_choose(reply, NORDEA, LABELS, "symbol") == chosen


def test_a_reply_that_names_the_same_candidate_twice_picks_it():
    assert candidate_choose("a segunda, NDA-FI.HE de Helsinki", NORDEA, LABELS, "symbol") == 1


# -- limits: whatever a manifest asks ----------------------------------------------------------------------------

GREEDY = {
    **RESOLVING,
    "get_stock_price": CapabilitySpec(
        "finance",
        "get_stock_price",
        {
            **RESOLVING["get_stock_price"].metadata,
            "decomposition": {
                "array_params": [{"param_name": "symbols", "single_param_name": "symbol_text", "max_concurrency": 1000}]
            },
        },
    ),
}


def greedy(count: int, **limits):
    symbols = [f"S{number}" for number in range(count)]
    intents = goal_resolve(intent("GET_QUOTE", symbols=symbols, notify=True), GET_QUOTE)
    return plan_build(intents, GREEDY, limits=PlanLimits(**limits))


def test_a_list_fans_out_into_at_most_max_fanout_items_and_the_plan_says_so():
    plan = greedy(300, max_fanout=10, max_steps=1000)

    assert [step.params.get("query") for step in plan.steps if step.kind][:3] == ["S0", "S1", "S2"]
    assert sum(step.capability == "get_stock_price" for step in plan.steps) == 10
    assert {"limit": "fanout_items", "setting": "GOAL_FANOUT_MAX_ITEMS", "value": 10, "asked": 300, "ran": 10} in (
        plan.limits
    )


def test_a_plan_over_max_steps_plans_fewer_items_whole_with_their_follow_ups():
    plan = greedy(5, max_fanout=10, max_steps=8)  # three steps an item: two items whole

    assert [step.capability for step in plan.steps] == [
        "search_symbol",
        "get_stock_price",
        "search_symbol",
        "get_stock_price",
        "send_message",
        "send_message",
    ]
    (hit,) = [hit for hit in plan.limits if hit["limit"] == "plan_steps"]
    assert (hit["value"], hit["asked"], hit["ran"]) == (8, 15, 6)


def test_with_no_item_left_to_drop_a_plan_keeps_its_first_steps_and_no_pre_step_left_alone():
    plan = greedy(1, max_steps=2)  # search, quote, notify: the notification goes

    assert [step.capability for step in plan.steps] == ["search_symbol", "get_stock_price"]
    with pytest.raises(PlanError, match=r"more steps than GOAL_PLAN_MAX_STEPS \(1\)"):
        greedy(1, max_steps=1)  # a search alone answers nothing


def test_a_manifests_max_concurrency_is_bounded_by_the_platforms():
    plan = greedy(3, max_concurrency=8)

    assert plan.max_concurrency == 8
    assert {
        "limit": "turn_concurrency",
        "setting": "GOAL_PLAN_MAX_CONCURRENCY",
        "value": 8,
        "asked": 1000,
        "ran": 8,
    } in (plan.limits)


def test_a_plan_within_every_limit_reports_none():
    symbols = goal_resolve(intent("GET_QUOTE", symbols=["A", "B", "C"], notify=True), GET_QUOTE)
    assert plan_build(symbols, RESOLVING).limits == ()
    assert plan_build(goal_resolve(intent("GET_QUOTE", symbol_text="Nordea"), GET_QUOTE), CATALOGUE).limits == ()


# -- what the user wrote is text ---------------------------------------------------------------------------------


def test_a_reference_the_user_wrote_in_an_entity_is_planned_as_text_and_sent_as_written():
    intents = goal_resolve(intent("GET_QUOTE", symbols=["PETR4", "${2.result.secret}"], notify=True), GET_QUOTE)

    plan = plan_build(intents, RESOLVING)  # no "Step 3 refers to step 2 without depending on it"

    third = plan.steps[2]
    assert third.params == {"query": "$${2.result.secret}"}
    assert refs_resolve(third.params, {"2": {"result": {"secret": "s3cr3t"}}}) == {"query": "${2.result.secret}"}


@pytest.mark.parametrize("text", ["${1.explanation}", "$${1.explanation}", "a $ b ${x", "${primary.result.price} $"])
def test_any_text_the_user_writes_comes_back_to_the_tool_as_written(text):
    intents = goal_resolve(intent("GET_QUOTE", symbol_text=text), GET_QUOTE)
    (step,) = plan_build(intents, CATALOGUE).steps

    assert refs_resolve(step.params, {"1": {"explanation": "leaked"}, "primary": {"result": {"price": 1}}}) == {
        "symbol_text": text
    }


def test_a_value_put_in_by_a_reference_is_never_read_again_as_one():
    outputs = {"1": {"explanation": "${2.result.secret} $${x}"}, "2": {"result": {"secret": "s3cr3t"}}}

    assert refs_resolve({"message": "said: ${1.explanation}"}, outputs) == {"message": "said: ${2.result.secret} $${x}"}


# -- manifests: cycles and absurd values -------------------------------------------------------------------------


def manifest(*capabilities: dict) -> dict:
    return {
        "domain": "loops",
        "goals": [{"goal": "G", "capabilities": [capabilities[0]["capability"]]}],
        "capabilities": list(capabilities),
    }


def pre(search: str) -> dict:
    return {"flow": {"pre": [{"type": "resolve", "param": "item", "search_capability": search}]}}


@pytest.mark.parametrize(
    ("capabilities", "error"),
    [
        (
            [{"capability": "a", "metadata": pre("b")}, {"capability": "b", "metadata": pre("a")}],
            "capabilities[0].metadata.flow.pre: a → b → a is a cycle",
        ),
        ([{"capability": "a", "metadata": pre("a")}], "capabilities[0].metadata.flow.pre: a → a is a cycle"),
        (
            [{"capability": "a", "metadata": {"roles": ["echo"], "composition": {"followup_roles": ["echo"]}}}],
            "capabilities[0].metadata.composition: a → a is a cycle",
        ),
        (
            [
                {"capability": "a", "metadata": {"roles": ["x"], "composition": {"followup_roles": ["y"]}}},
                {"capability": "b", "metadata": {"roles": ["y"], "composition": {"followup_roles": ["x"]}}},
            ],
            "capabilities[0].metadata.composition: a → b → a is a cycle",
        ),
        (
            [
                {
                    "capability": "a",
                    "metadata": {"decomposition": {"array_params": [{"param_name": "p", "max_concurrency": 0}]}},
                }
            ],
            "capabilities[0].metadata.decomposition.array_params[0].max_concurrency: must be a whole number of 1 or "
            "more, not 0",
        ),
        (
            [
                {
                    "capability": "a",
                    "metadata": {"decomposition": {"array_params": [{"param_name": "p", "max_concurrency": "lots"}]}},
                }
            ],
            "max_concurrency: must be a whole number of 1 or more, not 'lots'",
        ),
        ([{"capability": "a", "metadata": {"timeout_seconds": -1}}], "timeout_seconds: must be a number of seconds"),
        ([{"capability": "a", "metadata": {"flow": {"pre": [{"type": "guess"}]}}}], "flow.pre[0] has an unknown type"),
    ],
)
def test_a_manifest_with_a_cycle_or_an_absurd_value_is_refused_naming_the_place(capabilities, error):
    with pytest.raises(ManifestError) as refused:
        manifest_read(manifest(*capabilities))

    assert error in str(refused.value)


def test_the_values_the_platform_will_bound_are_named_for_the_sync_report():
    read = manifest_read(
        manifest(
            {
                "capability": "a",
                "metadata": {
                    "timeout_seconds": 3600,
                    "decomposition": {"array_params": [{"param_name": "p", "max_concurrency": 1000}]},
                },
            }
        )
    )

    assert manifest_bounds(read, limits=PlanLimits(max_concurrency=8), step_seconds=5) == [
        "capabilities[0].metadata.decomposition.array_params[0]: max_concurrency 1000 is bounded by "
        "GOAL_PLAN_MAX_CONCURRENCY (8)",
        "capabilities[0].metadata: timeout_seconds 3600 is bounded by the server's timeout (5 s)",
    ]
