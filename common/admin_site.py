"""The admin site every app registers with (``django.contrib.admin.site`` is this one, through
:class:`common.admin_apps.PlatformAdminConfig`): Django's, with the text of every form posted to it read with plain
line ends.

A browser sends each line of a text box ended by CRLF (the HTML standard's form encoding), whatever the text had
when the page was drawn; Django stores text as sent. A profile saved unedited then had its policy rewritten with CRLF,
its history an entry, and its draft "policy changed". Every admin page — change forms and their inlines, list
editing, actions, the pages an app adds (publish, import, calibrate) — reads ``request.POST`` behind
:meth:`PlatformAdminSite.admin_view`, so the line ends are made plain there, once, for all of them. Uploaded files
are left as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar, cast

from django.contrib.admin import AdminSite
from django.http import HttpRequest, HttpResponseBase, QueryDict

_View = TypeVar("_View", bound=Callable[..., HttpResponseBase])


def newlines_plain(data: QueryDict) -> QueryDict:
    """``data`` with every CRLF (and lone CR) in its values read as LF, immutable like a request's; ``data`` itself
    when it has none."""
    if not any("\r" in value for _, values in data.lists() for value in values):
        return data
    plain = QueryDict(mutable=True, encoding=data.encoding)
    for key, values in data.lists():
        plain.setlist(key, [value.replace("\r\n", "\n").replace("\r", "\n") for value in values])
    return QueryDict(plain.urlencode(), encoding=data.encoding)


class PlatformAdminSite(AdminSite):
    """Django's admin site; what a form posts to any of its views has plain line ends (:func:`newlines_plain`)."""

    # No "View site" in the header: the platform serves no page at ``/`` (Django's default), and its pages for
    # people (the chat page, the desk, the dashboard) each have their own audience.
    site_url = None

    def admin_view(self, view: _View, cacheable: bool = False) -> _View:
        guarded = super().admin_view(view, cacheable)

        @wraps(view)
        def plain_newlines(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if request.method == "POST":
                request.POST = newlines_plain(request.POST)  # type: ignore[assignment]  # as immutable as Django's
            return guarded(request, *args, **kwargs)

        return cast(_View, plain_newlines)
