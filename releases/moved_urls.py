"""The admin addresses of the release models from before they moved from ``routing`` to ``releases`` (their rows and
pages moved with them): ``/admin/routing/<model>/…`` answers a permanent redirect to ``/admin/releases/<model>/…``, its
query kept, so a bookmark or a link in a ticket still reaches its page. Mounted before the admin
(``platform/urls.py``); routing's own pages are not matched."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.urls import re_path

from releases.models import (
    ConversationTest,
    ConversationTestResult,
    ConversationTestRun,
    ReleaseRequest,
    RolloutDecision,
    RolloutPlan,
    RoutingTestCase,
)

MOVED = tuple(
    str(model._meta.model_name)
    for model in (
        RoutingTestCase,
        ConversationTest,
        ConversationTestRun,
        ConversationTestResult,
        RolloutPlan,
        RolloutDecision,
        ReleaseRequest,
    )
)


def moved_page(request: HttpRequest, model: str, rest: str) -> HttpResponsePermanentRedirect:
    query = request.META.get("QUERY_STRING", "")
    return HttpResponsePermanentRedirect(f"/admin/releases/{model}/{rest}" + (f"?{query}" if query else ""))


urlpatterns = [re_path(rf"^(?P<model>{'|'.join(MOVED)})/(?P<rest>.*)$", moved_page)]
