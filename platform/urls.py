"""The project's URLs: each app's routes, included by module name (the top of the house: it imports no app).

Django's own error answers (404, 500, 400, 403) are JSON in the API's error shape outside the admin and the
pages: platform/errors.py.
"""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

# The routes that run a turn come first: Django tries the patterns in order, and every message is resolved (the
# analytics' routes, mounted at the root, were a dozen patterns tried before them). No two patterns overlap.
urlpatterns = [
    path("api/", include("chat.urls")),
    path("v1/", include("chat.openai_urls")),
    path("admin/", admin.site.urls),
    path("", include("analytics.urls")),  # the dashboard at analytics/, its API at api/analytics/
    path("chat/", include("chat.page_urls")),
    path("desk/", include("chat.desk_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("metrics", include("chat.metrics_urls")),  # Prometheus, for a token or staff (chat/metrics.py)
]

handler400 = "platform.errors.bad_request"
handler403 = "platform.errors.permission_denied"
handler404 = "platform.errors.page_not_found"
handler500 = "platform.errors.server_error"
