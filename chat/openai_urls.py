"""The OpenAI-compatible endpoint, mounted at ``/v1/`` (chat/openai_api.py)."""

from django.urls import path

from chat import openai_api

urlpatterns = [
    path("models", openai_api.ModelsApi.as_view(), name="openai-models"),
    path("chat/completions", openai_api.ChatCompletionsApi.as_view(), name="openai-chat-completions"),
]
