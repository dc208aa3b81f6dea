"""The project's URLs: each app's routes, included by module name (the top of the house: it imports no app).

Django's own error answers (404, 500, 400, 403) are JSON in the API's error shape outside the admin and the
pages: platform/errors.py. A path no route takes under the prefixes programs talk to is answered by the last routes
(chat/unknown_paths.py), so that it is JSON in debug mode too; a route added under one of them goes before those.
"""

from django.contrib import admin
from django.urls import include, path

# The routes that run a turn come first: Django tries the patterns in order, and every message is resolved (the
# analytics' routes, mounted at the root, were a dozen patterns tried before them). No two patterns overlap.
urlpatterns = [
    path("api/", include("chat.urls")),
    path("v1/", include("chat.openai.urls")),
    path("admin/routing/", include("releases.moved_urls")),  # the release models' pages from before they moved
    path("admin/", admin.site.urls),
    path("", include("analytics.urls")),  # the dashboard at analytics/, its API at api/analytics/
    path("chat/", include("chat.page_urls")),
    path("desk/", include("chat.desk.urls")),
    path("api/", include("chat.schema_urls")),  # the OpenAPI schema at api/schema/, its page at api/docs/
    path("metrics", include("chat.metrics_urls")),  # Prometheus, for a token or staff (chat/metrics.py)
    # Last: any other path under api/, v1/ or a2a/ is a JSON 404, in debug mode too (chat/unknown_paths.py).
    path("", include("chat.unknown_path_urls")),
]

handler400 = "platform.errors.bad_request"
handler403 = "platform.errors.permission_denied"
handler404 = "platform.errors.page_not_found"
handler500 = "platform.errors.server_error"
