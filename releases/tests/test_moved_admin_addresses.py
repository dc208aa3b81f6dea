"""The release models' admin pages moved with the models (``/admin/routing/<model>/`` → ``/admin/releases/<model>/``):
an address saved before the move — a bookmark, a link in a ticket — still reaches its page."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("/admin/routing/rolloutplan/", "/admin/releases/rolloutplan/"),
        ("/admin/routing/releaserequest/12/change/", "/admin/releases/releaserequest/12/change/"),
        (
            "/admin/routing/conversationtestrun/?profile__id__exact=3",
            "/admin/releases/conversationtestrun/?profile__id__exact=3",
        ),
        ("/admin/routing/routingtestcase/add/", "/admin/releases/routingtestcase/add/"),
    ],
)
def test_an_address_of_a_release_models_page_from_before_the_move_is_sent_to_its_page_now(client, before, after):
    response = client.get(before)

    assert response.status_code == 301
    assert response["Location"] == after


def test_routings_own_admin_pages_are_not_sent_anywhere(admin_client):
    assert admin_client.get("/admin/routing/intent/").status_code == 200
