"""The admin site reads the text of every form posted to it with plain line ends (common/admin_site.py)."""

from __future__ import annotations

import re

import pytest
from django.contrib import admin
from django.http import QueryDict

from common.admin_site import PlatformAdminSite, newlines_plain


def test_every_app_registers_with_the_platforms_admin_site():
    assert isinstance(admin.site, PlatformAdminSite)  # Django's lazy default site, made from PlatformAdminConfig


def test_crlf_and_a_lone_cr_read_as_lf_in_every_value_and_a_post_without_them_is_left_as_it_is():
    posted = QueryDict("policy=Be+brief.%0D%0ANever.%0D&examples=a%0Db&examples=c&csrfmiddlewaretoken=t")

    plain = newlines_plain(posted)

    assert plain["policy"] == "Be brief.\nNever.\n"
    assert plain.getlist("examples") == ["a\nb", "c"]
    assert plain["csrfmiddlewaretoken"] == "t"
    untouched = QueryDict("name=telecom&note=one+line")
    assert newlines_plain(untouched) is untouched


@pytest.mark.sqlite_too
@pytest.mark.django_db
def test_no_admin_header_links_to_a_page_that_is_not_there(admin_client):
    """Django's header offers "View site" at ``/``, which this platform does not serve (a 404 for every role)."""
    page = admin_client.get("/admin/")
    links = re.findall(r'<a href="([^"]+)"', page.content.decode().split('id="content"')[0])  # the header's links

    assert page.status_code == 200 and links
    assert "View site" not in page.content.decode()
    assert all(admin_client.get(link).status_code != 404 for link in links if link.startswith("/"))
