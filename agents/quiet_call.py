"""A call of the offline model that no callback would hear, run past langchain's bookkeeping of it.

langchain-core's ``BaseChatModel.ainvoke`` configures a callback manager, hands it the model serialised, the call's
parameters and the messages copied for tracing, opens a run, schedules the generation as a task of its own, wraps
the result in an ``LLMResult`` and closes the run: on every call, whether a handler listens or not. For the offline
model (:class:`agents.llm.OfflineChatModel`), whose reply takes a few tens of microseconds, that bookkeeping was two
thirds of a call. When langchain would attach no handler to the call (:func:`heard`, read as its ``_configure``
decides) and its path would do nothing but generate (:func:`plain`), :func:`quiet_reply` calls the model's
``_agenerate`` itself and gives the message what langchain's path gives it: the id of a run, the generation's
metadata. Anything else — a handler (the call's, the model's, verbose, debug, LangSmith tracing, a configure hook's),
a cache, a rate limiter, streaming asked, a structured format to trace, content that is not text — runs langchain's
own path, and so does everything with ``STOCK_PATHS`` on (docs/decisions/offline-model-quiet-call.md).
"""

from __future__ import annotations

from typing import Any, cast

from langchain_core.globals import get_debug, get_llm_cache
from langchain_core.language_models import chat_models
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig, ensure_config
from langchain_core.tracers import context as tracer_context
from langchain_core.utils.env import env_var_is_set
from langchain_core.utils.utils import LC_ID_PREFIX
from langchain_core.utils.uuid import uuid7

# The environment variables of langchain's first tracer: set without the second's, langchain raises on every call.
TRACER_V1_VARIABLES = ("LANGCHAIN_TRACING", "LANGCHAIN_HANDLER")
# Keyword arguments langchain's agenerate takes for itself (the structured format it traces), never the model's.
TRACED_FORMATS = ("ls_structured_output_format", "structured_output_format")


def heard(model: BaseChatModel, config: RunnableConfig) -> bool:
    """Whether langchain would hand a call of ``model`` under ``config`` (ensured: the caller's runnable's own
    included) to a callback handler: the handlers its callback manager's configuration adds, in its order — the
    call's and the model's callbacks, ``verbose``, langchain's debug, LangSmith tracing (its environment, a tracer in
    the context, a traced parent run) and the handlers registered by configure hooks (a context variable set, or an
    environment variable that creates one)."""
    if config.get("callbacks") or model.callbacks or model.verbose or get_debug():
        return True
    if any(map(env_var_is_set, TRACER_V1_VARIABLES)) or tracer_context._tracing_v2_is_enabled():
        return True
    return any(
        var.get() is not None or (variable is not None and handler is not None and env_var_is_set(variable))
        for var, _, handler, variable in tracer_context._configure_hooks
    )


def plain(model: BaseChatModel, kwargs: dict[str, Any]) -> bool:
    """Whether langchain's path, with no handler, would only generate: no cache (the model's or the global one),
    no rate limiter, no streaming asked (the call's ``stream``, the model's ``streaming``), the messages' content kept
    as the model wrote it (not the ``v1`` blocks), and no structured format for langchain to trace."""
    if model.cache not in (None, False) or (model.cache is None and get_llm_cache() is not None):
        return False
    if model.rate_limiter is not None or model.output_version == "v1" or "stream" in kwargs:
        return False
    if "streaming" in model.model_fields_set and getattr(model, "streaming", None) is True:  # as langchain reads it
        return False
    return not any(name in kwargs for name in TRACED_FORMATS)


async def quiet_reply(
    model: BaseChatModel, input: Any, config: RunnableConfig | None, stop: list[str] | None, kwargs: dict[str, Any]
) -> AIMessage | None:
    """The reply langchain's ``ainvoke`` gives, without its bookkeeping, for a call that no handler would hear and that
    langchain would only generate for (messages whose content is text, no run id of the caller's); ``None`` for any
    other call, which the caller hands to langchain's own path."""
    if not isinstance(input, list) or not all(isinstance(m, BaseMessage) and isinstance(m.content, str) for m in input):
        return None
    config = ensure_config(config)
    if config.get("run_id") is not None or heard(model, config) or not plain(model, kwargs):
        return None
    result = await model._agenerate(list(input), stop=stop, **kwargs)
    run_id = uuid7()  # the id langchain's run would have had, and the message's from it, as langchain writes them
    for index, generation in enumerate(result.generations):
        if generation.message.id is None:
            generation.message.id = f"{LC_ID_PREFIX}-{run_id}-{index}"
        generation.message.response_metadata = chat_models._gen_info_and_msg_metadata(generation)
    if len(result.generations) == 1 and result.llm_output is not None:
        message = result.generations[0].message
        message.response_metadata = {**result.llm_output, **message.response_metadata}
    return cast("AIMessage", result.generations[0].message)
