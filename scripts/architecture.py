"""The house as its imports draw it: the product's apps as nodes, Python imports as edges, lines per app.

    python scripts/architecture.py

prints the table ``docs/architecture.md`` quotes: each app's layer and share of the lines, the imports between
apps, and every import that breaks the rules below (none, or the command exits 1). ``tests/test_architecture.py``
holds the code to the same rules.

Product code is the Django apps in :data:`LAYERS`, outside ``tests/`` and ``migrations/``; its lines are the
non-blank lines of its ``.py`` files. An edge is an ``import`` or ``from … import`` statement, nested ones
included, whose module is another app's; a model named by a string (``"tenants.Tenant"``) is no import. The rules:

* an app imports only apps on lower layers, so no two apps import each other;
* ``platform/`` stands at both ends: its settings, environment reader and Celery app at the bottom, its URLs and
  servers (:data:`PLATFORM_TOP`) at the top;
* nobody imports the analytics, ``platform/``'s URLs included (they include its routes by module name);
* no app holds more than :data:`MAX_SHARE` of the product's lines;
* no module imports another module's private (underscored) name.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Lowest first; each app may import only those before it. One line each, as at the top of each package.
LAYERS: tuple[tuple[str, str], ...] = (
    ("platform", "settings, the environment reader and the Celery app (its URLs and servers are on top)"),
    ("common", "the kernel: events, text folding, domain errors and their HTTP mapping, admin helpers, config version"),
    ("tenants", "tenants and their API keys, and who a request is"),
    ("handoffs", "the agent_handoffs table, the control tools and the loop-safety rules"),
    ("agents", "profiles, specialists, prompt versions, MCP servers and tools; the MCP and model clients"),
    ("routing", "intents, keywords, state policies, rollout flags; the compiled snapshot, router and decision"),
    ("conversations", "the engine: the conversation store and what happens to one message"),
    ("chat", "the faces: every way a message comes in (REST, SSE, WebSocket, OpenAI-compatible, chat page)"),
    ("analytics", "reads everything, imported by nobody: the dashboard and the analytics API"),
)
PLATFORM_TOP = frozenset(
    {
        "platform/urls.py",
        "platform/asgi.py",
        "platform/wsgi.py",
        "platform/serve.py",
        "platform/logs.py",
        "platform/errors.py",
        "platform/middleware.py",
        "platform/gate.py",
    }
)
TOP = "platform (top)"
MAX_SHARE = 0.40


@dataclass
class House:
    lines: Counter[str] = field(default_factory=Counter)  # app -> non-blank lines
    edges: Counter[tuple[str, str]] = field(default_factory=Counter)  # (importer, imported) -> imports
    broken: list[str] = field(default_factory=list)  # "file:line: why"

    @property
    def total(self) -> int:
        return sum(self.lines.values())

    def share(self, app: str) -> float:
        return self.lines[app] / self.total if self.total else 0.0


def rank(app: str) -> int:
    """The app's layer, lowest 0; the platform's top files are above every app."""
    if app == TOP:
        return len(LAYERS)
    return [name for name, _ in LAYERS].index(app)


def _product_files(root: Path) -> list[Path]:
    files = []
    for app, _ in LAYERS:
        for path in sorted((root / app).rglob("*.py")):
            parts = path.relative_to(root).parts
            if "tests" in parts or "migrations" in parts:
                continue
            files.append(path)
    return files


def _app_of(relative: str) -> str:
    return TOP if relative in PLATFORM_TOP else relative.split("/", 1)[0]


def _imported_modules(tree: ast.AST) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every absolute import in ``tree``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.lineno, node.module, [alias.name for alias in node.names]))
    return found


def measure(root: Path = ROOT) -> House:
    """Read the product's files and check them against the rules."""
    house = House()
    apps = {name for name, _ in LAYERS}
    for path in _product_files(root):
        relative = path.relative_to(root).as_posix()
        source = path.read_text(encoding="utf-8")
        app = _app_of(relative)
        house.lines["platform" if app == TOP else app] += sum(1 for line in source.splitlines() if line.strip())
        this_module = relative.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        for line, module, names in _imported_modules(ast.parse(source, relative)):
            target = module.split(".", 1)[0]
            if target not in apps:
                continue
            private = [name for name in names if name.startswith("_") and not name.startswith("__")]
            if private and module != this_module:
                house.broken.append(f"{relative}:{line}: imports the private {', '.join(private)} of {module}")
            if target == app or (app == TOP and target == "platform"):
                continue
            house.edges[(app, target)] += 1
            if target == "analytics":
                house.broken.append(f"{relative}:{line}: {app} imports {module}: nobody imports the analytics")
            elif rank(target) >= rank(app):
                house.broken.append(f"{relative}:{line}: {app} imports {module}, on a layer not below it")
    for app, _ in LAYERS:
        if house.share(app) > MAX_SHARE:
            house.broken.append(f"{app}/ holds {house.share(app):.0%} of the product's lines (at most {MAX_SHARE:.0%})")
    return house


def report(house: House) -> str:
    rows = ["| layer | app | lines | share | imports (apps it uses) |", "|---|---|---|---|---|"]
    for index, (app, _) in enumerate(LAYERS):
        uses = ", ".join(
            f"{target} ({count})" for (source, target), count in sorted(house.edges.items()) if source == app
        )
        rows.append(f"| {index} | `{app}/` | {house.lines[app]:,} | {house.share(app):.0%} | {uses or '—'} |")
    top = ", ".join(f"{target} ({count})" for (source, target), count in sorted(house.edges.items()) if source == TOP)
    rows.append(f"| {len(LAYERS)} | `platform/` urls, asgi, wsgi, serve | (in platform) | | {top} |")
    rows.append(f"\n{house.total:,} lines of product code; {sum(house.edges.values())} imports between apps.")
    rows.append("Rules broken: " + ("none." if not house.broken else "\n" + "\n".join(house.broken)))
    return "\n".join(rows)


if __name__ == "__main__":
    measured = measure()
    print(report(measured))
    sys.exit(1 if measured.broken else 0)
