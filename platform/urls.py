from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from analytics.views import DashboardView
from routing.chat_page import chat_page

urlpatterns = [
    path("admin/", admin.site.urls),
    path("analytics/", DashboardView.as_view(), name="analytics-dashboard"),
    path("chat/", chat_page, name="chat"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/debug/mcp/", include("agents.urls")),
    path("api/analytics/", include("analytics.urls")),
    path("api/", include("routing.urls")),
    path("v1/", include("routing.openai_urls")),
]
