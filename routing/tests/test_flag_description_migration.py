"""The migration that rewords the multi_agent flag's description changes the old text only, never an edited one."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.db import connection

from routing.models import RolloutFlag

reworded = importlib.import_module("routing.migrations.0031_multi_agent_flag_description_in_plain_words")
EDITOR = SimpleNamespace(connection=connection)


@pytest.mark.django_db
def test_the_old_description_is_reworded_in_plain_words_and_back():
    RolloutFlag.objects.update_or_create(key="multi_agent", defaults={"description": reworded.OLD})
    reworded.reword(apps, EDITOR)
    assert RolloutFlag.objects.get(key="multi_agent").description == reworded.NEW
    reworded.restore(apps, EDITOR)
    assert RolloutFlag.objects.get(key="multi_agent").description == reworded.OLD


@pytest.mark.django_db
def test_a_description_someone_edited_is_left_as_it_is():
    RolloutFlag.objects.update_or_create(key="multi_agent", defaults={"description": "Our own words."})
    reworded.reword(apps, EDITOR)
    assert RolloutFlag.objects.get(key="multi_agent").description == "Our own words."


@pytest.mark.django_db
def test_a_new_database_starts_with_the_plain_words():
    assert RolloutFlag.objects.get(key="multi_agent").description == reworded.NEW
