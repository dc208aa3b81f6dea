"""The OpenAI-compatible endpoints, mounted at ``/v1/`` (chat/openai/api.py, chat/openai/responses.py)."""

from django.urls import path

from chat.openai import api as openai_api
from chat.openai import responses as openai_responses

urlpatterns = [
    path("models", openai_api.ModelsApi.as_view(), name="openai-models"),
    path("models/<str:model>", openai_api.ModelApi.as_view(), name="openai-model"),
    path("chat/completions", openai_api.ChatCompletionsApi.as_view(), name="openai-chat-completions"),
    path("responses", openai_responses.ResponsesApi.as_view(), name="openai-responses"),
    path("responses/<str:response_id>", openai_responses.ResponseApi.as_view(), name="openai-response"),
]
