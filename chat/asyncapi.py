"""The base of the chat faces' async views: adrf's ``APIView``, without a needless trip back to the event loop.

adrf runs DRF's checks in the request's thread, and for throttles it calls ``async_to_sync(check_async_throttles)``
whatever the throttles are: with only synchronous ones (ours, :mod:`tenants.throttles`) that was a hop from the
thread to the event loop and back on every request, about a thirtieth of a message's CPU. Synchronous throttles
are checked here as DRF checks them; an async one still goes through adrf. With ``STOCK_PATHS`` on, adrf's own
check runs (docs/decisions/adrf-dispatch.md).
"""

from __future__ import annotations

from inspect import iscoroutinefunction
from typing import Any

from adrf.views import APIView
from rest_framework.views import APIView as DRFAPIView

from common.infra import stock_paths


class AsyncAPIView(APIView):
    def check_throttles(self, request: Any) -> None:
        if any(iscoroutinefunction(throttle.allow_request) for throttle in self.get_throttles()):
            return super().check_throttles(request)
        return DRFAPIView.check_throttles(self, request)

    if stock_paths():  # chosen when the class is made (at start-up): adrf's own
        del check_throttles
