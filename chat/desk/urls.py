"""The desk page, mounted at ``/desk/`` (chat/desk/page.py)."""

from django.urls import path

from chat.desk.page import desk_page

urlpatterns = [
    path("", desk_page, name="desk"),
]
