"""``GET /metrics``: the platform's Prometheus metrics (common/infra/metrics.py), for a scraper or a staff member.

Who may read them:

* ``Authorization: Bearer <METRICS_TOKEN>`` — the scraper's token (a setting, from the environment). A Bearer header
  with any other token (or any token while ``METRICS_TOKEN`` is unset) is refused with 403;
* a staff session holding the debug right over every tenant (``tenants.debug_tenant`` on the user or a group;
  superusers hold it): the figures are the whole platform's, so a right over some tenants is not enough (403);
* anyone else: 401.

``METRICS_ENABLED=false`` switches the route off: 404 for everybody, as for a path that does not exist.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from chat.intake import principal_is_staff
from common.errors import error_body
from common.infra.metrics import CONTENT_TYPE, metrics_exposition
from tenants.models import TenantRight

ERROR_METRICS_UNAUTHENTICATED = "Authentication required; send 'Authorization: Bearer <METRICS_TOKEN>'."
ERROR_METRICS_FORBIDDEN = "Not allowed to read the metrics: a wrong token, or no debug right over every tenant."
METRICS_PERMISSION = f"tenants.{TenantRight.DEBUG.value}"


def _bearer(request: HttpRequest) -> str | None:
    header = request.META.get("HTTP_AUTHORIZATION", "")
    return header[7:].strip() if header[:7].lower() == "bearer " else None


def metrics_allowed(request: HttpRequest) -> int:
    """200 when ``request`` may read the metrics, else the status that refuses it (401 or 403)."""
    token = _bearer(request)
    if token is not None:
        expected = settings.METRICS_TOKEN
        return 200 if expected and hmac.compare_digest(token.encode(), expected.encode()) else 403
    user = getattr(request, "user", None)
    if not getattr(user, "is_authenticated", False):
        return 401
    return 200 if principal_is_staff(user) and user.has_perm(METRICS_PERMISSION) else 403  # type: ignore[union-attr]


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not settings.METRICS_ENABLED:
        raise Http404
    status = metrics_allowed(request)
    if status == 401:
        response = JsonResponse(error_body("not_authenticated", ERROR_METRICS_UNAUTHENTICATED), status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    if status == 403:
        return JsonResponse(error_body("permission_denied", ERROR_METRICS_FORBIDDEN), status=403)
    return HttpResponse(metrics_exposition(), content_type=CONTENT_TYPE)
