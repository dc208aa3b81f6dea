"""The chat page, mounted at ``/chat/`` (chat/chat_page.py)."""

from django.urls import path

from chat.chat_page import chat_page

urlpatterns = [
    path("", chat_page, name="chat"),
]
