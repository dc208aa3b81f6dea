from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from analytics.views import DashboardView
from chat.chat_page import chat_page

urlpatterns = [
    path("admin/", admin.site.urls),
    path("analytics/", DashboardView.as_view(), name="analytics-dashboard"),
    path("chat/", chat_page, name="chat"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/analytics/", include("analytics.urls")),
    path("api/", include("chat.urls")),
    path("v1/", include("chat.openai_urls")),
]
