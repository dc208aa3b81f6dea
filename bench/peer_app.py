"""The LangGraph peer of ``bench/peer_bench.py``: our chat flow built the way LangGraph's docs deploy one.

    PYTHONPATH=. PEER_DATABASE_URL=postgres://... PEER_API_KEY=... OFFLINE_LLM_LATENCY_MS=0 \\
        .venv-peer/bin/uvicorn bench.peer_app:app --workers 4

Runs from ``.venv-peer`` (``bench/requirements-peer.txt`` on top of ``requirements.txt``), which
``peer_bench.py`` creates. ``POST /api/gateway/message`` takes our body and ``Authorization: Bearer`` header
and runs a LangGraph ``StateGraph`` of two nodes:

* ``router``: the ``telecom_contas`` profile's keyword router, read from ``config/demo/routing.telecom_contas.yaml``
  at start-up: the message folded (case, accents, punctuation: ``common.text.normalize``, as ours) and each
  enabled intent's keywords looked for on word boundaries; the best hit wins as in ``routing/router.py`` (lower
  priority number, then more keywords found, then the longer keyword), no hit goes to the profile's
  ``fallback_agent``;
* ``specialist``: the routed agent answers from our offline model (``agents.llm.OfflineChatModel``, sleeping
  ``OFFLINE_LLM_LATENCY_MS`` per call) given the agent's system prompt from ``config/demo/agents.yaml`` (the
  profile's policy, then the specialist's prompt, as ours) and the conversation's last 20 turns.

The graph is compiled with ``AsyncPostgresSaver`` on an ``AsyncConnectionPool`` (at most
``PEER_POOL_MAX_SIZE`` = 5 connections per worker, as ours) to the database of ``PEER_DATABASE_URL``;
``thread_id`` is the conversation key, so the messages (``add_messages``) are stored and read back each turn by
the checkpointer. Only the model class is taken from the product: Django is configured with the one setting
the model module may read and the few apps whose models its imports define (:data:`MODEL_APPS`), and no table of
ours is touched.

``python -m bench.peer_app count PREFIX`` prints, as JSON, each thread whose id starts with ``PREFIX`` and the
number of messages in its latest checkpoint (how ``peer_bench.py`` checks that nothing was lost).

LangGraph and the checkpointer are imported where they are used: the bench itself and its tests run from
``.venv``, which has neither, and only read this module's keyword router.
"""

import asyncio
import contextlib
import contextvars
import hmac
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from common.text import normalize

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "config" / "demo"
TENANT = "tenant_a"
PROFILE = "telecom_contas"
# Earlier turns given to the model, as ours (CONVERSATION_HISTORY_LIMIT): a user and an assistant message each.
HISTORY_TURNS = 20
# Serialises the checkpointer's setup() across the workers starting together (its CREATE TABLEs would race).
SETUP_LOCK = 0x7065_6572  # "peer"
LOCK_SQL = "SELECT pg_try_advisory_lock(%s) AS locked"

# The nodes' timings of the request being answered (the answer's metadata.trace, as ours reports its graph's).
_trace: contextvars.ContextVar[list[dict[str, Any]] | None] = contextvars.ContextVar("peer_trace", default=None)


# --- the profile: keyword router and specialists, from the demo's YAML ----------------------------------------


@dataclass(frozen=True)
class Intent:
    name: str
    agent: str
    description: str
    priority: int
    keywords: tuple[str, ...]  # normalised (common.text.normalize)


@dataclass(frozen=True)
class Decision:
    agent: str
    intent: str  # "" for the fallback
    topic: str  # the intent's description, what the offline model names as the subject


@dataclass(frozen=True)
class Profile:
    agent_id: str
    fallback_agent: str
    intents: tuple[Intent, ...]
    prompts: dict[str, str]  # agent -> system prompt (the profile's policy, then the specialist's prompt)
    display_names: dict[str, str]

    def route(self, text: str) -> Decision:
        """The best intent whose keywords occur in ``text`` on word boundaries, else the fallback agent."""
        haystack = f" {normalize(text)} "
        best: tuple[tuple[int, int, int], Intent] | None = None
        for intent in self.intents:
            found = [keyword for keyword in intent.keywords if f" {keyword} " in haystack]
            if found:
                rank = (intent.priority, -len(found), -max(map(len, found)))
                if best is None or rank < best[0]:
                    best = (rank, intent)
        if best is None:
            return Decision(self.fallback_agent, "", "")
        intent = best[1]
        return Decision(intent.agent, intent.name, intent.description.strip().rstrip("."))


def load_profile(agent_id: str = PROFILE, config: Path = CONFIG) -> Profile:
    """The profile's keyword router (``routing.<agent_id>.yaml``) and its specialists' prompts (``agents.yaml``)."""
    routing = yaml.safe_load((config / f"routing.{agent_id}.yaml").read_text(encoding="utf-8"))
    intents = tuple(
        Intent(
            name=item["name"],
            agent=item["agent"],
            description=str(item.get("description") or ""),
            priority=int(item.get("priority", 100)),
            keywords=tuple(filter(None, (normalize(keyword) for keyword in item.get("keywords") or ()))),
        )
        for item in routing["intents"]
        if item.get("enabled", True) and item.get("keywords")
    )
    agents = yaml.safe_load((config / "agents.yaml").read_text(encoding="utf-8"))["agents"]
    profile = next(agent for agent in agents if agent["agent_id"] == agent_id)
    prompts, names = {}, {}
    for specialist in profile["specialists"]:
        name = specialist["name"]
        names[name] = specialist.get("display_name") or name
        own = specialist.get("prompt") or f"You are {names[name]}."
        prompts[name] = "\n\n".join(part for part in (profile.get("policy") or "", own) if part)
    return Profile(agent_id, routing["router"]["fallback_agent"], intents, prompts, names)


# --- the graph --------------------------------------------------------------------------------------------------


def _note(node: str, began: float) -> None:
    trace = _trace.get()
    if trace is not None:
        trace.append({"node": node, "ms": round((time.perf_counter() - began) * 1000, 3)})


def build_graph(profile: Profile, latency_ms: int) -> Any:
    """The uncompiled ``StateGraph``: START → router → specialist → END."""
    from langchain_core.messages import AnyMessage, SystemMessage
    from langgraph.graph import END, START, StateGraph  # type: ignore[import-not-found]
    from langgraph.graph.message import add_messages  # type: ignore[import-not-found]

    from agents.llm import OfflineChatModel

    class ChatState(TypedDict):
        messages: Annotated[list[AnyMessage], add_messages]
        agent: str
        intent: str
        topic: str

    async def router(state: ChatState) -> dict[str, Any]:
        began = time.perf_counter()
        decided = profile.route(state["messages"][-1].text)
        _note("router", began)
        return {"agent": decided.agent, "intent": decided.intent, "topic": decided.topic}

    async def specialist(state: ChatState) -> dict[str, Any]:
        began = time.perf_counter()
        agent = state["agent"]
        model = OfflineChatModel(
            display_name=profile.display_names.get(agent, agent),
            topic=state["topic"],
            latency_ms=latency_ms,
            agent=agent,
        )
        prompt = profile.prompts.get(agent) or f"You are {agent}."
        history = state["messages"][-(2 * HISTORY_TURNS + 1) :]  # the earlier turns and the new message
        reply = await model.ainvoke([SystemMessage(prompt), *history])
        _note("specialist", began)
        return {"messages": [reply]}

    builder = StateGraph(ChatState)
    builder.add_node("router", router)
    builder.add_node("specialist", specialist)
    builder.add_edge(START, "router")
    builder.add_edge("router", "specialist")
    builder.add_edge("specialist", END)
    return builder


# The apps whose models the model module's imports define (the handoffs door's control tools, its tenants below):
# registered so that they can be imported, never queried.
MODEL_APPS = ("django.contrib.auth", "django.contrib.contenttypes", "common", "tenants", "handoffs")


def configure_django(latency_ms: int) -> None:
    """What ``agents.llm`` may read of Django's settings (the model itself gets its latency as an argument), and the
    app registry its imports need (:data:`MODEL_APPS`)."""
    import django
    from django.conf import settings

    if not settings.configured:
        settings.configure(OFFLINE_LLM_LATENCY_MS=latency_ms, INSTALLED_APPS=list(MODEL_APPS))
    django.setup()


def _pool(url: str, max_size: int) -> Any:
    """A psycopg pool as LangGraph's docs set it up for the checkpointer (autocommit, dict rows, no prepare)."""
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    return AsyncConnectionPool(url, min_size=min(2, max_size), max_size=max_size, kwargs=kwargs, open=False)


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver  # type: ignore[import-not-found]

    latency_ms = int(os.environ.get("OFFLINE_LLM_LATENCY_MS", "0") or 0)
    configure_django(latency_ms)
    async with _pool(os.environ["PEER_DATABASE_URL"], int(os.environ.get("PEER_POOL_MAX_SIZE", "5"))) as pool:
        checkpointer = AsyncPostgresSaver(pool)
        async with pool.connection() as conn:  # one worker at a time; the later ones find the tables there
            # Polled, not waited for in pg_advisory_lock: a session blocked in a statement would hold back the
            # CREATE INDEX CONCURRENTLY of the setup under way, which waits for every running statement to end.
            while not (await (await conn.execute(LOCK_SQL, (SETUP_LOCK,))).fetchone() or {}).get("locked"):
                await asyncio.sleep(0.05)
            try:
                await checkpointer.setup()
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK,))
        app.state.graph = build_graph(app.state.profile, latency_ms).compile(checkpointer=checkpointer)
        app.state.key = os.environ.get("PEER_API_KEY", "")
        yield


# --- HTTP ------------------------------------------------------------------------------------------------------


def _error(status: int, code: str, detail: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "detail": detail}}, status_code=status)


def parse_message(body: Any, agent_id: str) -> tuple[str, str] | str:
    """``(text, session_id)`` of our message body, or what is wrong with it."""
    if not isinstance(body, dict) or not isinstance(body.get("payload"), dict):
        return "a JSON object with a payload object is required"
    if body.get("agent_id") != agent_id:
        return f"this server answers agent_id {agent_id!r} only"
    text, session = body["payload"].get("text"), body["payload"].get("session_id")
    if not isinstance(text, str) or not text.strip():
        return "payload.text is required"
    if not isinstance(session, str) or not session or len(session) > 200:
        return "payload.session_id is required (at most 200 characters)"
    return text, session


async def message(request: Request) -> JSONResponse:
    from langchain_core.messages import HumanMessage

    key = request.app.state.key
    sent = request.headers.get("authorization", "")
    if not key or not hmac.compare_digest(sent.encode(), f"Bearer {key}".encode()):
        return _error(401, "not_authenticated", "a valid Authorization: Bearer key is required")
    try:
        body = await request.json()
    except ValueError:
        return _error(400, "invalid_json", "the body is not JSON")
    parsed = parse_message(body, request.app.state.profile.agent_id)
    if isinstance(parsed, str):
        return _error(400, "invalid", parsed)
    text, session = parsed
    conversation_key = f"{TENANT}:{request.app.state.profile.agent_id}:{session}"
    trace: list[dict[str, Any]] = []
    token = _trace.set(trace)
    try:
        state = await request.app.state.graph.ainvoke(
            {"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": conversation_key}}
        )
    finally:
        _trace.reset(token)
    return JSONResponse(
        {
            "conversation_key": conversation_key,
            "answer": state["messages"][-1].text,
            "agent": state["agent"],
            "intent": state["intent"],
            "metadata": {"llm": "offline", "trace": trace, "messages": len(state["messages"])},
        }
    )


async def health(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


def create_app(profile: Profile | None = None) -> Starlette:
    app = Starlette(
        routes=[Route("/api/gateway/message", message, methods=["POST"]), Route("/api/health", health)],
        lifespan=lifespan,
    )
    app.state.profile = profile or load_profile()
    return app


app = create_app()


# --- what was stored (run by peer_bench.py from .venv-peer) -----------------------------------------------------


async def stored_messages(url: str, prefix: str) -> dict[str, int]:
    """thread_id -> messages in its latest checkpoint, for every thread whose id starts with ``prefix``."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row

    async with await AsyncConnection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
        rows = await (
            await conn.execute(
                "SELECT DISTINCT thread_id FROM checkpoints WHERE checkpoint_ns = '' AND starts_with(thread_id, %s)",
                (prefix,),
            )
        ).fetchall()
        checkpointer = AsyncPostgresSaver(conn)
        counts = {}
        for row in rows:
            found = await checkpointer.aget_tuple({"configurable": {"thread_id": row["thread_id"]}})
            counts[row["thread_id"]] = len(found.checkpoint["channel_values"].get("messages", [])) if found else 0
        return counts


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "count":
        print("usage: python -m bench.peer_app count PREFIX  (PEER_DATABASE_URL set)", file=sys.stderr)
        return 2
    print(json.dumps(asyncio.run(stored_messages(os.environ["PEER_DATABASE_URL"], argv[1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
