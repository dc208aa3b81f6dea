"""The base of the chat faces' async views: adrf's ``APIView``, without a needless trip back to the event loop.

adrf runs DRF's checks in the request's thread, and for throttles it calls ``async_to_sync(check_async_throttles)``
whatever the throttles are: with only synchronous ones (ours, :mod:`tenants.throttles`) that was a hop from the
thread to the event loop and back on every request, about a thirtieth of a message's CPU. Synchronous throttles
are checked here as DRF checks them; an async one still goes through adrf. With ``STOCK_PATHS`` on, adrf's own
check runs (docs/decisions/adrf-dispatch.md). Whether a view is async, which adrf's dispatch asks on every
request, is worked out once a class.
"""

from __future__ import annotations

from inspect import iscoroutinefunction
from typing import Any

from adrf.views import APIView
from django.utils.functional import classproperty
from rest_framework.views import APIView as DRFAPIView

from common.infra import stock_paths


class AsyncAPIView(APIView):
    @classproperty
    def view_is_async(cls) -> bool:
        """Django's, worked out once a class: adrf's ``dispatch`` asks it on every request, and Django walks the
        class's handlers each time it is asked. Kept in the class's own ``__dict__``, so a subclass works out its
        own."""
        known = cls.__dict__.get("_view_is_async")
        if known is None:
            known = bool(super().view_is_async)
            cls._view_is_async = known
        return known

    def check_throttles(self, request: Any) -> None:
        if any(iscoroutinefunction(throttle.allow_request) for throttle in self.get_throttles()):
            return super().check_throttles(request)
        return DRFAPIView.check_throttles(self, request)

    if stock_paths():  # chosen when the class is made (at start-up): adrf's own
        del check_throttles
