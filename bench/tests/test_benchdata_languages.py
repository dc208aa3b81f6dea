"""bench/benchdata.py: a generated conversation's customer writes in a language its profile serves, and its language
is decided as the graph decides it, the profile's own included."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest

from bench.benchdata import (
    HUMAN_REQUESTS,
    Simulator,
    _catalogue,
    _Live,
    _turn_language,
    _Who,
    customer_languages,
)
from routing import snapshot

pytestmark = pytest.mark.django_db

# Read as Spanish without certainty, every word one Portuguese has too (conversations.language's example).
BOTH = "a bolsa abre que horas?"


@pytest.fixture
def spec(telecom):
    return snapshot.current().profiles["telecom_contas"]


def translated(*languages: str) -> dict[str, dict[str, str]]:
    return {language: {"name": f"Telecom ({language})"} for language in languages}


def live_for(spec, tenant) -> _Live:
    catalogue = _catalogue(spec)
    who = _Who(tenant, catalogue, "u1", multi_agent=True, flags={}, session_id="s1", channel="api")
    return _Live(catalogue=catalogue, who=who, local_id=1, multi_agent=True, supervisor=False, looping=None)


def test_a_profiles_customers_write_its_own_language_most_and_those_it_has_translations_in_alike(spec):
    assert customer_languages(replace(spec, language="pt", translations=translated("es", "en"))) == {
        "pt": 0.8,
        "en": 0.1,
        "es": 0.1,
    }
    assert customer_languages(replace(spec, language="es", translations=translated("pt"))) == {"es": 0.8, "pt": 0.2}
    assert customer_languages(replace(spec, language="en", translations={})) == {"en": 1.0}
    assert customer_languages(replace(spec, language="en", translations={"pt": {}})) == {"en": 1.0}  # nothing in it


def test_the_customers_of_an_english_only_profile_ask_for_a_person_in_english_alone(spec, tenant):
    english = replace(spec, language="en", translations={}, escalation=replace(spec.escalation, enabled=False))
    simulator = Simulator(
        rng=random.Random(7),
        catalogues=[_catalogue(english)],
        tool_servers={},
        tenants=[tenant],
        users_per_tenant=1,
        start=0.0,
        until=86400.0,
    )
    asked = Counter()
    for _ in range(4000):
        turn = simulator._small_talk(live_for(english, tenant), first=False, last=False)
        if turn is not None:
            asked[next(code for code, texts in HUMAN_REQUESTS.items() if turn.text in texts)] += 1

    assert set(asked) == {"en"} and asked["en"] >= 5


def test_a_message_either_language_reads_as_takes_the_profiles_own_and_is_not_kept(spec, tenant):
    live = live_for(replace(spec, language="pt"), tenant)

    assert _turn_language(live, BOTH) == ("pt", "")
    live.history = [("user", "Minha fatura veio alta"), ("assistant", "…")]
    assert _turn_language(live, "ok") == ("pt", "pt")  # nothing to tell from: the customer's earlier words


def test_a_language_read_from_the_customers_earlier_words_is_not_remembered_for_another_customer(spec, tenant):
    portuguese, english = (live_for(replace(spec, language="pt"), tenant) for _ in range(2))
    portuguese.history = [("user", "Minha fatura veio alta"), ("assistant", "…")]
    english.history = [("user", "My bill came in far too high this month"), ("assistant", "…")]

    assert _turn_language(portuguese, "ok") == ("pt", "pt")
    assert _turn_language(english, "ok") == ("en", "en")
    assert _turn_language(english, BOTH) == _turn_language(portuguese, BOTH) == ("pt", "")  # read from the text alone
