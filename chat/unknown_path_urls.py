"""The last routes of the prefixes programs talk to (chat/unknown_paths.py): included last by platform/urls.py, so
that every other route under ``/api/``, ``/v1/`` and ``/a2a/`` comes first."""

from django.urls import re_path

from chat.unknown_paths import OpenAIPathNotFoundApi, PathNotFoundApi

urlpatterns = [
    re_path(r"^v1(?:/|$)", OpenAIPathNotFoundApi.as_view(), name="openai-path-not-found"),
    # The API docs page (api/docs/) is a page: a path under it is the browser's 404, and api/docs is redirected there.
    re_path(r"^(?:api(?!/docs(?:/|$))|a2a)(?:/|$)", PathNotFoundApi.as_view(), name="path-not-found"),
]
