"""The examples tier's out-of-scope examples and state threshold, carried as its threshold is: the profile page, the
YAML ``router.examples`` block (with the import's rights), the profile's document (read from versions published
before them with their defaults) and the diff's words. How the tier uses them is the tier's own (routing/examples.py).
"""

from __future__ import annotations

import copy

import pytest
import yaml

from agents.models import AgentProfile
from releases.configio import ConfigImportError, Source, config_export_data, config_import
from releases.configio import messages as m
from releases.versions import document_diff
from routing.documents import profile_compile, profile_documents
from tests.adminkit import change_url, error_messages, form_data

pytestmark = pytest.mark.django_db


def post_profile(client, profile: AgentProfile, **fields: str):
    data = form_data(client.get(change_url(profile)))
    data.update(fields)
    return client.post(change_url(profile), data)


def router_file(examples: str) -> Source:
    return Source("routing.yaml", f"agent_id: telecom_contas\nrouter:\n  examples: {examples}\n")


def import_problems(*sources: Source, user=None) -> list[str]:
    with pytest.raises(ConfigImportError) as refused:
        config_import(sources=list(sources), user=user)
    return refused.value.messages


# -- the profile page ---------------------------------------------------------------------------------------------


def test_the_profile_page_saves_the_state_threshold_and_the_out_of_scope_examples_one_per_line(staff_client, telecom):
    page = staff_client.get(change_url(telecom))
    fieldsets = dict(page.context["adminform"].fieldsets)
    assert {"examples_state_threshold", "out_of_scope_examples"} <= set(fieldsets["Examples tier"]["fields"])

    response = post_profile(
        staff_client,
        telecom,
        examples_state_threshold="0.95",
        out_of_scope_examples="me conta uma piada\n\n  qual a capital da França?  \n",
    )

    assert response.status_code == 302, error_messages(response)
    telecom.refresh_from_db()
    assert telecom.examples_state_threshold == 0.95
    assert telecom.out_of_scope_examples == ["me conta uma piada", "qual a capital da França?"]
    form = staff_client.get(change_url(telecom)).context["adminform"].form
    assert form["out_of_scope_examples"].value() == "me conta uma piada\nqual a capital da França?"


def test_a_state_threshold_out_of_range_is_refused_on_its_field(staff_client, telecom):
    response = post_profile(staff_client, telecom, examples_state_threshold="1.5")

    assert response.status_code == 200
    assert list(response.context["adminform"].form.errors) == ["examples_state_threshold"]
    telecom.refresh_from_db()
    assert telecom.examples_state_threshold == 0.99


# -- YAML --------------------------------------------------------------------------------------------------------


def test_router_examples_imports_the_state_threshold_and_out_of_scope_and_the_export_writes_them_back(telecom):
    config_import(sources=[router_file("{state_threshold: 0.97, out_of_scope: [oi tudo bem, me conta uma piada]}")])

    telecom.refresh_from_db()
    assert telecom.examples_state_threshold == 0.97
    assert telecom.out_of_scope_examples == ["oi tudo bem", "me conta uma piada"]
    exported = config_export_data()["routing.telecom_contas.yaml"]["router"]["examples"]
    assert (exported["state_threshold"], exported["out_of_scope"]) == (0.97, ["oi tudo bem", "me conta uma piada"])
    text = yaml.safe_dump(config_export_data()["routing.telecom_contas.yaml"], allow_unicode=True)
    assert not config_import(sources=[Source("routing.telecom_contas.yaml", text)]).changed

    config_import(sources=[router_file("{out_of_scope: null}")])
    telecom.refresh_from_db()
    assert telecom.out_of_scope_examples == [] and telecom.examples_state_threshold == 0.97


def test_router_examples_refuses_a_bad_state_threshold_and_out_of_scope_entries_naming_their_places(telecom):
    problems = import_problems(router_file("{state_threshold: high, out_of_scope: [oi, 42, '']}"))

    assert problems == [
        "routing.yaml:3: router.examples.state_threshold: "
        + m.ERROR_TYPE.format(expected="a number", actual="a string"),
        "routing.yaml:3: router.examples.out_of_scope[1]: "
        + m.ERROR_TYPE.format(expected="a string", actual="an integer"),
        "routing.yaml:3: router.examples.out_of_scope[2]: " + m.ERROR_EMPTY,
    ]
    (problem,) = import_problems(router_file("{state_threshold: 1.5}"))
    assert problem.startswith("routing.yaml:3: router.examples.state_threshold: ") and "1.0" in problem


def test_a_routing_editor_may_not_import_the_examples_tiers_settings(editor, telecom):
    (problem,) = import_problems(router_file("{out_of_scope: [oi]}"), user=editor)

    assert problem.startswith("routing.yaml:3: router.examples.out_of_scope: ")
    assert "agents.change_agentprofile" in problem
    telecom.refresh_from_db()
    assert telecom.out_of_scope_examples == []


# -- the document and the diff ---------------------------------------------------------------------------------------


def test_the_document_holds_both_settings_and_an_old_version_without_them_compiles_and_differs_in_nothing(telecom):
    draft = profile_documents()["telecom_contas"]
    assert (draft["profile"]["out_of_scope_examples"], draft["profile"]["examples_state_threshold"]) == ([], 0.99)
    old = copy.deepcopy(draft)
    del old["profile"]["out_of_scope_examples"], old["profile"]["examples_state_threshold"]

    assert document_diff(old, draft) == []
    assert profile_compile(old, pk=telecom.pk).agent_id == "telecom_contas"


def test_the_diff_says_what_changed_in_both_settings(telecom):
    before = profile_documents()["telecom_contas"]
    telecom.out_of_scope_examples = ["me conta uma piada"]
    telecom.examples_state_threshold = 0.95
    telecom.save(update_fields=["out_of_scope_examples", "examples_state_threshold"])

    texts = {change.text for change in document_diff(before, profile_documents()["telecom_contas"])}

    assert texts == {
        "profile: examples state threshold 0.99 → 0.95",
        "out-of-scope example 'me conta uma piada' added to profile",
    }


def test_router_examples_carries_the_reliability_table_calibration_wrote_and_refuses_an_impossible_row(telecom):
    rows = "[{low: 0.5, high: 0.9, routed: 40, right: 30}, {low: 0.9, high: 1.0, routed: 200, right: 188}]"
    config_import(sources=[router_file(f"{{reliability: {rows}}}")])

    telecom.refresh_from_db()
    assert [(row["low"], row["right_rate"]) for row in telecom.examples_reliability] == [(0.5, 0.75), (0.9, 0.94)]
    exported = config_export_data()["routing.telecom_contas.yaml"]["router"]["examples"]["reliability"]
    assert [(row["routed"], row["right"]) for row in exported] == [(40, 30), (200, 188)]
    compiled = profile_compile(profile_documents()["telecom_contas"], pk=telecom.pk)
    assert compiled.router.reliability_at(0.95) == {"low": 0.9, "high": 1.0, "right_rate": 0.94, "routed": 200}

    (problem,) = import_problems(router_file("{reliability: [{low: 0.9, high: 0.5, routed: 4, right: 9}]}"))
    assert problem == "routing.yaml:3: router.examples.reliability[0]: " + m.ERROR_RELIABILITY_ROW
