"""The async views' base: whether a view is async, worked out once a class."""

from __future__ import annotations

import pytest
from asgiref.sync import iscoroutinefunction
from django.core.exceptions import ImproperlyConfigured
from rest_framework.response import Response

from chat.asyncapi import AsyncAPIView


def test_whether_a_view_is_async_is_worked_out_once_a_class_and_each_subclass_works_out_its_own(monkeypatch):
    asked: list[object] = []

    def counted(handler: object) -> bool:
        asked.append(handler)
        return iscoroutinefunction(handler)

    monkeypatch.setattr("django.views.generic.base.iscoroutinefunction", counted)

    class Answers(AsyncAPIView):
        async def get(self, request):
            return Response({})

    class AnswersAndTakes(Answers):
        async def post(self, request):
            return Response({})

    class TakesInAThread(AsyncAPIView):
        def post(self, request):
            return Response({})

    assert Answers.view_is_async is True
    walked = len(asked)
    assert Answers().view_is_async is True  # as adrf's dispatch asks it, on each request's view
    assert Answers.view_is_async is True
    assert len(asked) == walked > 0
    assert AnswersAndTakes.view_is_async is True
    assert len(asked) > walked  # its own handlers, not its parent's answer
    assert TakesInAThread().view_is_async is False


def test_a_view_mixing_async_and_sync_handlers_is_refused_as_django_refuses_it():
    class Mixed(AsyncAPIView):
        async def get(self, request):
            return Response({})

        def post(self, request):
            return Response({})

    with pytest.raises(ImproperlyConfigured, match="must either be all sync or all async"):
        Mixed.view_is_async  # noqa: B018 — the property's reading is the test
