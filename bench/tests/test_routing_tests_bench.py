"""``bench/routing_tests_bench.py``: its generated profile has the shape of a real profile document, and its
cases run as the benchmark says (most pass; the mislabelled ones fail)."""

from __future__ import annotations

import random

from bench.routing_tests_bench import build_cases, profile_document
from releases.routing_tests import routing_tests_run
from routing.documents import profile_compile, profile_documents


def _shape(document):
    """The document's sections, the profile's keys and the keys of one specialist and one intent."""
    shape = {section: type(value).__name__ for section, value in document.items()}
    shape["profile"] = sorted(document["profile"])
    for section in ("specialists", "intents"):
        shape[f"{section}.entry"] = sorted(next(iter(document[section].values())))
    return shape


def test_the_benchmarks_profile_has_the_shape_of_a_real_document(telecom):
    real = profile_documents([telecom.agent_id])[telecom.agent_id]

    generated = profile_document(random.Random(1), 30, 5, classifier=False)

    assert _shape(generated) == _shape(real)


def test_the_benchmarks_cases_pass_but_the_mislabelled_ones():
    rng = random.Random(7)
    document = profile_document(rng, 50, 5, classifier=False)
    cases = build_cases(rng, document, 200)

    run = routing_tests_run(profile_compile(document, pk=1), cases)

    assert run.total == 200 and 0 < run.failed < 40
    # The failures are the mislabelled cases: decided by a keyword, as another intent than expected.
    assert all(result.actual["method"] == "keyword" and "intent" in result.failed for result in run.failures)
