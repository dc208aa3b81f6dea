"""Customers' ratings in the admin: the inbox opens on the answers rated down, newest first, each with its comment,
the customer's message, the answer, who served it (profile, version, cohort) and how it was routed (intent, agent,
method); it filters by profile, tenant, version, rating and method, opens each row's conversation at the answer,
and changes nothing."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from conversations.models import MessageFeedback
from conversations.tests.stored_turns import conversation_of, store_reader, stored_turn
from tests.adminkit import change_url, changelist_url
from tests.factories import TenantFactory

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

INBOX = changelist_url(MessageFeedback)


def ago(hours: int) -> dt.datetime:
    return timezone.now() - dt.timedelta(hours=hours)


@pytest.fixture
def ratings(db):
    """Tenant A: telecom v1 (an old down, a newer down by examples, an up) and retail v2 (a down by fallback, the
    newest); tenant B: one down."""
    alpha, beta = TenantFactory(slug="tenant_a"), TenantFactory(slug="tenant_b")
    telecom = conversation_of(alpha, "telecom_contas", "t-1")
    retail = conversation_of(alpha, "retail_orders", "r-1")
    old = stored_turn(telecom, "minha fatura veio alta", rating="down", comment="não explicou a cobrança", when=ago(30))
    examples = stored_turn(
        telecom,
        "fui mal atendido na loja",
        answer="Sua fatura tem roaming.",
        method="examples",
        cohort="multi_agent",
        rating="down",
        comment="eu queria reclamar do vendedor",
        when=ago(20),
    )
    liked = stored_turn(telecom, "segunda via", rating="up", comment="ótimo", when=ago(10))
    fallback = stored_turn(
        retail,
        "quero cancelar",
        answer="Não entendi.",
        intent="fallback",
        agent="general_agent",
        method="fallback",
        version=2,
        rating="down",
        when=ago(5),
    )
    theirs = stored_turn(conversation_of(beta, "telecom_contas", "b-1"), "cliente B", rating="down", when=ago(1))
    return {
        "alpha": alpha,
        "beta": beta,
        "old": old.rating,
        "examples": examples.rating,
        "liked": liked.rating,
        "fallback": fallback.rating,
        "theirs": theirs.rating,
    }


@pytest.fixture
def reader(client, django_user_model, ratings):
    client.force_login(store_reader(django_user_model, "analyst", ratings["alpha"]))
    return client


def rows(client, **params) -> list[MessageFeedback]:
    response = client.get(INBOX, params)
    assert response.status_code == 200
    return list(response.context["cl"].result_list)


def test_the_inbox_opens_on_the_answers_rated_down_newest_first(reader, ratings):
    assert rows(reader) == [ratings["fallback"], ratings["examples"], ratings["old"]]


def test_the_rating_filter_shows_the_rated_up_or_every_rating_and_starts_on_rated_down(reader, ratings):
    assert rows(reader, rating="up") == [ratings["liked"]]
    assert rows(reader, rating="all") == [ratings["fallback"], ratings["liked"], ratings["examples"], ratings["old"]]
    page = reader.get(INBOX).content.decode()
    assert '<li class="selected">\n    <a href="?rating=down"' in page  # "Rated down" is the selected choice
    assert ">All ratings</a>" in page


def test_each_row_shows_the_comment_the_message_the_answer_who_served_it_and_how_it_was_routed(reader, ratings):
    page = reader.get(INBOX).content.decode()

    for text in ("eu queria reclamar do vendedor", "fui mal atendido na loja", "Sua fatura tem roaming."):
        assert text in page
    assert "billing_<wbr>invoice_<wbr>explanation" in page and "billing_<wbr>agent" in page and "Examples" in page
    assert "telecom_<wbr>contas" in page and "v1" in page and "multi_<wbr>agent" in page
    assert "retail_<wbr>orders" in page and "v2" in page and "general_<wbr>agent" in page and "Fallback" in page


def test_each_row_opens_its_conversation_at_the_rated_answer(reader, ratings):
    rating = ratings["examples"]
    page = reader.get(INBOX).content.decode()

    url = f"/admin/conversations/conversation/{rating.conversation_id}/change/#answer-{rating.message_id}"
    assert f'href="{url}"' in page
    assert reader.get(url.split("#")[0]).status_code == 200


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"method": "examples"}, ["examples"]),
        ({"method": "fallback"}, ["fallback"]),
        ({"version": "2"}, ["fallback"]),
        ({"version": "draft"}, []),
        ({"cohort": "multi_agent"}, ["examples"]),
        ({"cohort": "none"}, ["fallback", "old"]),
        ({"q": "vendedor"}, ["examples"]),
    ],
)
def test_the_inbox_filters_by_method_version_cohort_and_search(reader, ratings, params, expected):
    assert rows(reader, **params) == [ratings[name] for name in expected]


def test_the_inbox_filters_by_profile_and_by_tenant(client, staff_user, ratings):
    client.force_login(staff_user)
    retail = ratings["fallback"].profile_id
    beta = ratings["beta"].pk

    assert rows(client, profile__id__exact=retail) == [ratings["fallback"]]
    assert rows(client, tenant__id__exact=beta) == [ratings["theirs"]]
    assert rows(client, tenant__id__exact=beta, rating="up") == []


def test_the_show_counts_option_counts_per_rating_and_method(reader, ratings):
    page = reader.get(INBOX, {"_facets": "1"}).content.decode()

    assert "Rated down (3)" in page and "Rated up (1)" in page
    assert "Examples (1)" in page


def test_nobody_adds_changes_or_deletes_a_rating_in_the_admin(client, staff_user, ratings):
    client.force_login(staff_user)
    rating = ratings["old"]

    assert client.get(f"{INBOX}add/").status_code == 403
    assert client.post(change_url(rating), {"comment": "edited", "rating": "up"}).status_code == 403
    assert client.post(change_url(rating).replace("/change/", "/delete/"), {"post": "yes"}).status_code == 403
    rating.refresh_from_db()
    assert (rating.comment, rating.rating) == ("não explicou a cobrança", "down")


def test_a_ratings_page_shows_its_message_answer_and_route(reader, ratings):
    page = reader.get(change_url(ratings["examples"])).content.decode()

    assert "fui mal atendido na loja" in page and "Sua fatura tem roaming." in page
    assert "Open the conversation at this answer" in page


def test_the_admin_index_names_the_inbox_in_plain_words(reader, ratings):
    assert "Customer ratings" in reader.get("/admin/").content.decode()
