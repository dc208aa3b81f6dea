"""System checks of the kernel's settings: more than one web worker over a channel layer that lives in one process's
memory, and an embeddings prefix that lost its trailing space, are warned about where ``manage.py check`` (and every
management command that checks) shows it."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.checks import WARNING, run_checks
from django.core.management import call_command

IN_MEMORY = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
REDIS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": ["redis://r:6379/0"]}}}


def split_warnings() -> list:
    return [message for message in run_checks() if message.id == "common.W002"]


def test_several_web_workers_over_an_in_memory_channel_layer_are_warned_about_in_manage_py_check(settings):
    settings.WEB_CONCURRENCY, settings.CHANNEL_LAYERS = 4, IN_MEMORY
    output = StringIO()

    call_command("check", stdout=output, stderr=output)

    (warning,) = split_warnings()
    assert warning.level == WARNING
    assert "4 web workers" in warning.msg and "REDIS_URL" in warning.hint
    assert "common.W002" in output.getvalue()


@pytest.mark.parametrize(("workers", "layers"), [(1, IN_MEMORY), (4, REDIS)], ids=["one worker", "redis"])
def test_one_worker_or_a_shared_channel_layer_is_no_warning(settings, workers, layers):
    settings.WEB_CONCURRENCY, settings.CHANNEL_LAYERS = workers, layers
    assert split_warnings() == []


def prefix_warnings() -> list:
    return [message for message in run_checks() if message.id == "common.W003"]


def test_an_embeddings_prefix_without_its_trailing_space_is_warned_about_by_name(settings):
    settings.KNOWLEDGE_EMBEDDINGS_QUERY_PREFIX = "query:"  # an unquoted `query: ` in an .env file loses its space
    output = StringIO()

    call_command("check", stdout=output, stderr=output)

    (warning,) = prefix_warnings()
    assert warning.level == WARNING and "KNOWLEDGE_EMBEDDINGS_QUERY_PREFIX" in warning.msg
    assert "'query:what is my balance'" in warning.msg and '"query: "' in warning.hint
    assert "common.W003" in output.getvalue()


@pytest.mark.parametrize("prefix", ["", "query: ", "passage:\n", "Represent this sentence for searching: "])
def test_an_embeddings_prefix_that_is_empty_or_ends_with_a_space_is_no_warning(settings, prefix):
    settings.ROUTER_EMBEDDINGS_QUERY_PREFIX = settings.ROUTER_EMBEDDINGS_DOCUMENT_PREFIX = prefix
    settings.KNOWLEDGE_EMBEDDINGS_QUERY_PREFIX = settings.KNOWLEDGE_EMBEDDINGS_DOCUMENT_PREFIX = prefix
    assert prefix_warnings() == []
