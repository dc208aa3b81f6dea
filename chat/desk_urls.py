"""The desk page, mounted at ``/desk/`` (chat/desk_page.py)."""

from django.urls import path

from chat.desk_page import desk_page

urlpatterns = [
    path("", desk_page, name="desk"),
]
