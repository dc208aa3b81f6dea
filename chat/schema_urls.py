"""The OpenAPI schema and its browsable page (Swagger UI, from drf-spectacular-sidecar's files), under ``/api/``."""

from django.urls import path
from drf_spectacular.views import SpectacularSwaggerView

from chat.schema import SchemaApi

urlpatterns = [
    path("schema/", SchemaApi.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
]
