"""The admin site reads the text of every form posted to it with plain line ends (common/admin_site.py)."""

from __future__ import annotations

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
