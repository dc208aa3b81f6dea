"""System checks of the agents' settings: a ``PUBLIC_URL`` links could not be built on (no http(s) scheme, no host,
a query, a fragment, credentials, a bad port) is an error ``manage.py check`` shows, naming the setting and the value;
a blank one, or an origin with a path prefix (a platform served under a proxy's prefix), is none."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.checks import ERROR, run_checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError


def public_url_errors() -> list:
    return [message for message in run_checks() if message.id == "agents.E003"]


@pytest.mark.parametrize(
    "value",
    [
        "agents.example.com",  # no scheme: links would be paths under the page's own address
        "//agents.example.com",
        "ftp://agents.example.com",
        "javascript:alert(1)",
        "https://",
        "https:///platform",
        "https://agents.example.com?tenant=1",  # the attachment's path would land inside the query
        "https://agents.example.com/platform#top",
        "https://admin:secret@agents.example.com",  # written into every customer's answer
        "https://agents.example.com:99999",
        "https://agents.example.com:port",
        "https://agents example.com",
    ],
)
def test_a_public_url_links_cannot_be_built_on_is_an_error_of_manage_py_check(settings, value):
    settings.PUBLIC_URL = value
    output = StringIO()

    with pytest.raises(SystemCheckError, match=r"agents\.E003"):
        call_command("check", stdout=output, stderr=output)

    (error,) = public_url_errors()
    assert error.level == ERROR and "PUBLIC_URL" in error.msg and "scheme://host" in error.hint
    assert "secret" not in error.msg  # the value is named, its credentials are not


@pytest.mark.parametrize(
    "value", ["", "https://agents.example.com", "http://127.0.0.1:8000", "https://chat.example.com/platform/"]
)
def test_a_blank_public_url_or_an_http_origin_with_a_path_prefix_is_no_error(settings, value):
    settings.PUBLIC_URL = value
    assert public_url_errors() == []
