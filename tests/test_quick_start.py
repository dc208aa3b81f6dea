"""The README's Quick start and scripts/start agree: every page it lists is in the banner, every command exists; and
the README's first requests — curl, the OpenAI SDK, the WebSocket — print on a fresh demo what the README shows."""

from __future__ import annotations

import asyncio
import io
import json
import re
import shlex
import sys
import tokenize

import httpx
import pytest
from django.conf import settings
from django.core.management import call_command, get_commands

README = (settings.BASE_DIR / "README.md").read_text(encoding="utf-8")
OPENAI_PAGE = (settings.BASE_DIR / "docs" / "openai.md").read_text(encoding="utf-8")
START = (settings.BASE_DIR / "scripts" / "start").read_text(encoding="utf-8")


def quick_start() -> str:
    return README.split("## Quick start", 1)[1].split("\n## ", 1)[0]


def test_the_banner_lists_every_page_the_quick_start_lists():
    pages = re.findall(r"http://127\.0\.0\.1:8000(/[\w/.-]*)", quick_start())
    assert {"/admin/", "/analytics/", "/chat/", "/api/docs/", "/api/health"} <= set(pages)
    banner = START.split("cat <<EOF", 1)[1]
    assert [page for page in pages if f"$base{page}\n" not in banner] == []


def test_every_manage_py_command_the_readme_shows_exists():
    shown = set(re.findall(r"manage\.py (\w+)", README))
    assert {"first_run", "seed_demo", "create_api_key", "routing_publish", "set_rollout"} <= shown
    assert sorted(shown - set(get_commands())) == []


def test_scripts_start_keeps_its_api_key_and_loads_the_demo_once():
    first_run = re.search(r"manage\.py first_run ([^\n]*\n[^\n]*)", START).group(1)
    assert "--key-file" in first_run and "--new-key" not in first_run
    assert "--demo --sync" in first_run


# -- the README's first requests, run on a fresh demo ------------------------------------------------------------
# The README's examples are read from it, run as written against the platform served as scripts/start serves it
# (platform.asgi under uvicorn, debug mode, the demo loaded by `first_run --demo`, the example MCP servers), and what
# they print is held against what the README shows. In what the README shows, "..." stands for anything: `{...}`
# for any value, a string ending in "..." for any text after it, `, ...}` for more keys; a number is an example (an
# id, a time), whatever its value; an object shows some of the keys.

README_BASE = "http://127.0.0.1:8000"
README_KEY = "ark_..."
ANY = "<any value>"


def section(title: str) -> str:
    return README.split(f"\n{title}\n", 1)[1].split("\n## ", 1)[0]


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.DOTALL)


def shown(text: str) -> object:
    """What the README shows as JSON, its "..." made wildcards (module comment)."""
    text = re.sub(r"\{\.\.\.\}|\[\.\.\.\]", f'"{ANY}"', text.strip())
    text = re.sub(r",\s*\.\.\.\s*([}\]])", r"\1", text)
    return json.loads(re.sub(r"\s+\.\.\.$", "", text))


def matches(expected: object, actual: object, where: str = "") -> list[str]:
    """Where ``actual`` differs from what the README shows (``expected``, from :func:`shown`)."""
    if expected == ANY or expected == "...":
        return []
    if isinstance(expected, str) and expected.endswith("..."):
        prefix = expected[:-3].rstrip()
        ok = isinstance(actual, str) and actual.startswith(prefix)
        return [] if ok else [f"{where}: {actual!r} does not start with {prefix!r}"]
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{where}: {actual!r} is not an object"]
        problems = [f"{where}.{key}: missing" for key in expected if key not in actual]
        for key in expected.keys() & actual.keys():
            problems += matches(expected[key], actual[key], f"{where}.{key}")
        return problems
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{where}: {actual!r} is not a list of {len(expected)}"]
        pairs = enumerate(zip(expected, actual, strict=True))
        return [problem for i, (one, other) in pairs for problem in matches(one, other, f"{where}[{i}]")]
    if isinstance(expected, int | float) and not isinstance(expected, bool):
        ok = isinstance(actual, int | float) and not isinstance(actual, bool)
        return [] if ok else [f"{where}: {actual!r} is not a number"]
    return [] if expected == actual else [f"{where}: {actual!r}, the README shows {expected!r}"]


def curl(command: str, base: str, key: str) -> httpx.Response:
    """The README's ``curl`` line, sent as curl would send it."""
    words = shlex.split(command.replace("\\\n", " ").replace("$KEY", key))
    assert words[0] == "curl", command
    method, headers, data, url = "GET", {}, None, None
    options = iter(words[1:])
    for word in options:
        if word == "-X":
            method = next(options)
        elif word == "-H":
            name, _, value = next(options).partition(":")
            headers[name.strip()] = value.strip()
        elif word == "-d":
            data, method = next(options), "POST" if method == "GET" else method
        elif word.startswith("http"):
            url = word.replace(README_BASE, base)
        else:
            assert word in ("-sS", "-N"), f"an option the test does not know: {word}"
    return httpx.request(method, url, headers=headers, content=data, timeout=30)


def misprinted(code: str, base: str, key: str) -> dict[int, tuple[str, list[str]]]:
    """Run a README Python example as written, its address and key the served ones; the lines ``print(...)  # what
    it prints`` whose last output is not what their comment says (``...`` at the end: any text after): line number →
    (the comment, what the line printed). Fails when the example has no such line."""
    code = code.replace(README_BASE, base).replace(ws(README_BASE), ws(base)).replace(README_KEY, key)
    printed: dict[int, list[str]] = {}

    def recorded(*values: object, sep: str = " ", end: str = "\n", **_: object) -> None:
        printed.setdefault(sys._getframe(1).f_lineno, []).append(sep.join(map(str, values)))

    exec(compile(code, "README.md", "exec"), {"print": recorded, "__name__": "readme"})  # noqa: S102 — the README's
    comments = {
        token.start[0]: token.string.lstrip("#").strip()
        for token in tokenize.generate_tokens(io.StringIO(code).readline)
        if token.type == tokenize.COMMENT and token.line.strip().startswith("print(")
    }
    assert comments, "no print(...) with a comment saying what it prints"
    wrong = {}
    for line, comment in comments.items():
        last = printed.get(line, [""])[-1]
        ok = last.startswith(comment[:-3].rstrip()) if comment.endswith("...") else last == comment
        if not ok:
            wrong[line] = (comment, printed.get(line, []))
    return wrong


def ws(url: str) -> str:
    return url.replace("http://", "ws://", 1)


@pytest.fixture
def fresh_demo(migrated_flag, asgi_server, mcp_servers, settings, tmp_path) -> tuple[str, str]:
    """A fresh install as scripts/start makes it (`first_run --demo`, a kept key), served in debug mode: its address
    and key. The demo's MCP servers are the running example servers."""
    from agents.models import McpServer
    from common.config_version import config_version_bump

    settings.DEBUG = True
    out = io.StringIO()
    call_command("first_run", "--demo", "--key-file", str(tmp_path / "api-key"), stdout=out, stderr=io.StringIO())
    for name, url in mcp_servers.items():
        McpServer.objects.filter(name=name).update(endpoint=url)
    config_version_bump()
    return asgi_server, dict(line.split(" ", 1) for line in out.getvalue().splitlines())["api_key"]


def test_the_readmes_curl_sdk_and_websocket_examples_print_what_the_readme_shows_on_a_fresh_demo(fresh_demo):
    base, key = fresh_demo
    api = section("## API")

    # curl: the gateway message, and the answer the README shows.
    (command,) = [block for block in blocks(api, "sh") if "/api/gateway/message" in block and "KEY=" in block]
    response = curl(command.split("\n", 1)[1], base, key)
    assert response.status_code == 200, response.text
    answer_shown = api.split(command, 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    problems = matches(shown(answer_shown), response.json())
    assert problems == [], "\n".join(problems)

    # The OpenAI SDK, in the page the README's section links: each print with a comment prints what it says.
    assert "(docs/openai.md)" in section("## OpenAI-compatible endpoint")
    (sdk,) = [block for block in blocks(OPENAI_PAGE, "python") if "import openai" in block]
    assert misprinted(sdk, base, key) == {}

    # The WebSocket: websocat's frame with its subprotocol, and the Python client, as the README shows them.
    websocket = section("### WebSocket chat")
    (transcript,) = [block for block in blocks(websocket, "sh") if block.startswith("websocat")]
    opening, frame, *shown_events = transcript.strip().splitlines()
    url = re.search(r'"(ws://[^"]+)"', opening)[1].replace(ws(README_BASE), ws(base))
    protocol = re.search(r'--protocol "([^"]+)"', opening)[1].replace("$KEY", key)
    events = asyncio.run(websocket_turn(url, protocol, frame))
    remaining = iter(events)  # the events shown, in their order, among those sent
    for line in shown_events:
        wanted = shown(line.lstrip("# "))
        found = next((event for event in remaining if not matches(wanted, event)), None)
        alike = [matches(wanted, event) for event in events if event["type"] == wanted["type"]]
        assert found is not None, (line, alike)
    (client,) = [block for block in blocks(websocket, "python") if "websockets" in block]
    assert misprinted(client, base, key) == {}


async def websocket_turn(url: str, protocol: str, frame: str) -> list[dict]:
    """One frame sent as websocat sends it (the key as a subprotocol), the events until ``done``."""
    from websockets.asyncio.client import connect

    async with connect(url, subprotocols=[protocol]) as socket:
        await socket.send(frame)
        events = [json.loads(await asyncio.wait_for(socket.recv(), timeout=30))]
        while events[-1]["type"] != "done":
            events.append(json.loads(await asyncio.wait_for(socket.recv(), timeout=30)))
    return events
