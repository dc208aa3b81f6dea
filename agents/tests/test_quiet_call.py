"""The offline model's call that no callback would hear (agents/quiet_call.py): the same reply as langchain's path, none
of its bookkeeping, and langchain's path whenever anything would hear the call or do more than generate."""

from __future__ import annotations

import asyncio
import re

import pytest
from langchain_core.caches import InMemoryCache
from langchain_core.callbacks import AsyncCallbackHandler, get_usage_metadata_callback
from langchain_core.callbacks.manager import AsyncCallbackManager
from langchain_core.globals import set_llm_cache
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableLambda, ensure_config
from langchain_core.tracers.context import collect_runs

from agents import quiet_call
from agents.generation import Generation
from agents.llm import OfflineModel
from agents.tests.test_llm import INVOICE_TOOL
from handoffs.public import REQUEST_HANDOFF, ControlTool
from tests.stock_paths import fast_path_only

HISTORY = [SystemMessage("policy"), HumanMessage("Oi"), AIMessage("Olá! Como posso ajudar?")]
RUN_MESSAGE_ID = re.compile(r"lc_run--[0-9a-f-]{36}-0")


class Heard(AsyncCallbackHandler):
    def __init__(self) -> None:
        self.events: list[str] = []

    async def on_chat_model_start(self, serialized, messages, **kwargs):
        self.events.append("start")

    async def on_llm_end(self, response, **kwargs):
        self.events.append("end")


def speaker():
    provider = OfflineModel(None)
    return provider, provider.chat_model(agent="billing_agent", display_name="Faturas")


def calls(provider):
    """Calls as the specialist runtime makes them: a tool call, a move, a text reply, one cut to its limit, one cut at a
    stop sequence and written as JSON."""
    handoff = ControlTool(REQUEST_HANDOFF, ("orders_agent",)).definition()
    with_line = provider.turn_options(context={"line": "5511"}, topic="faturas")
    handed_on = provider.turn_options(context={}, topic="pedidos", hit_agents=("orders_agent",))
    short = provider.call_options(Generation(max_tokens=3))
    formatted = provider.call_options(Generation(stop=("Faturas",), response_format={"type": "json_object"}))
    return [
        ([*HISTORY, HumanMessage("Minha fatura veio alta")], {"tools": [INVOICE_TOOL], **with_line}),
        ([*HISTORY, HumanMessage("Onde está meu pedido?")], {"tools": [INVOICE_TOOL, handoff], **handed_on}),
        ([*HISTORY, HumanMessage("Qual o horário de vocês?")], dict(with_line)),
        ([*HISTORY, HumanMessage("Qual o horário de vocês?")], {**with_line, **short}),
        ([*HISTORY, HumanMessage("Qual o horário de vocês?")], {**with_line, **formatted}),
    ]


def seen(reply: AIMessage) -> tuple:
    return (reply.content, reply.tool_calls, reply.usage_metadata, reply.response_metadata, type(reply))


def configured(monkeypatch) -> list[int]:
    """Each callback manager langchain configures in this test."""
    made: list[int] = []
    configure = AsyncCallbackManager.configure.__func__

    def counted(cls, *args, **kwargs):
        made.append(1)
        return configure(cls, *args, **kwargs)

    monkeypatch.setattr(AsyncCallbackManager, "configure", classmethod(counted))
    return made


def test_a_call_no_callback_hears_gives_the_reply_langchains_own_path_gives(settings):
    provider, model = speaker()

    quiet = [asyncio.run(model.ainvoke(messages, **options)) for messages, options in calls(provider)]
    settings.STOCK_PATHS = True
    stock = [asyncio.run(model.ainvoke(messages, **options)) for messages, options in calls(provider)]

    assert [seen(reply) for reply in quiet] == [seen(reply) for reply in stock]
    assert [call["name"] for call in quiet[0].tool_calls + quiet[1].tool_calls] == ["invoice_lookup", REQUEST_HANDOFF]
    assert quiet[3].response_metadata["finish_reason"] == "length"
    assert all(RUN_MESSAGE_ID.fullmatch(reply.id) for reply in quiet + stock)
    assert len({reply.id for reply in quiet}) == len(quiet)


@fast_path_only
def test_a_call_no_callback_hears_configures_no_callback_manager(monkeypatch):
    provider, model = speaker()
    made = configured(monkeypatch)

    for messages, options in calls(provider):
        asyncio.run(model.ainvoke(messages, **options))
    assert made == []

    heard = Heard()
    messages, options = calls(provider)[0]
    asyncio.run(model.ainvoke(messages, config={"callbacks": [heard]}, **options))
    assert made == [1] and heard.events == ["start", "end"]


def test_a_handler_the_model_holds_hears_each_call():
    heard = Heard()
    provider, model = speaker()
    listened = model.model_copy(update={"callbacks": [heard]})
    messages, options = calls(provider)[2]

    asyncio.run(listened.ainvoke(messages, **options))

    assert heard.events == ["start", "end"]


def test_a_handler_of_the_runnable_that_calls_the_model_hears_the_call():
    heard = Heard()
    provider, model = speaker()
    messages, options = calls(provider)[2]

    async def step(given):
        return await model.ainvoke(given, **options)

    asyncio.run(RunnableLambda(step).ainvoke(messages, config={"callbacks": [heard]}))

    assert heard.events == ["start", "end"]


def test_the_handlers_langchains_context_managers_register_hear_the_call(monkeypatch):
    provider, model = speaker()
    messages, options = calls(provider)[2]
    made = configured(monkeypatch)

    async def traced():
        with collect_runs() as runs:
            reply = await model.ainvoke(messages, **options)
        return runs, reply

    async def counted():
        with get_usage_metadata_callback():
            await model.ainvoke(messages, **options)

    runs, reply = asyncio.run(traced())
    asyncio.run(counted())

    assert [run.outputs["generations"][0][0]["text"] for run in runs.traced_runs] == [reply.content]
    assert made == [1, 1]


def test_langsmith_tracing_switched_on_by_the_environment_is_left_to_langchain(monkeypatch):
    provider, model = speaker()
    assert not quiet_call.heard(model, ensure_config(None))
    monkeypatch.setenv("LANGCHAIN_TRACING", "true")  # the first tracer's variable alone: langchain refuses the call
    messages, options = calls(provider)[2]

    assert quiet_call.heard(model, ensure_config(None))
    with pytest.raises(RuntimeError, match="LANGCHAIN_TRACING_V2"):
        asyncio.run(model.ainvoke(messages, **options))


def test_a_cache_set_for_every_model_is_read_and_written_as_langchain_does():
    provider, model = speaker()
    messages, options = calls(provider)[2]
    cache = InMemoryCache()
    set_llm_cache(cache)
    try:
        first = asyncio.run(model.ainvoke(messages, **options))
        again = asyncio.run(model.ainvoke(messages, **options))
    finally:
        set_llm_cache(None)

    assert len(cache._cache) == 1
    assert again.content == first.content
