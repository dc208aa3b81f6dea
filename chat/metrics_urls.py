"""``/metrics`` (chat/metrics.py), mounted at the root by platform/urls.py."""

from django.urls import path

from chat.metrics import metrics

urlpatterns = [
    path("", metrics, name="metrics"),
]
