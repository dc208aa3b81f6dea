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
* no module imports another module's private (underscored) name;
* no two files import each other, however far round: the files' graph counts every import of a product module,
  inside a function or under ``if TYPE_CHECKING:`` too, so a circle cannot hide behind a late import
  (``from package import submodule`` is an import of the submodule: a package's ``__init__`` that re-exports its
  submodules is no circle);
* every import of a product module inside a function has its reason in :data:`LATE_IMPORTS`;
* no file holds more than :data:`MAX_FILE_LINES` non-blank lines and no function more than
  :data:`MAX_FUNCTION_LINES` lines (from its ``def`` to its last line, docstring and nested functions included),
  but those in :data:`SIZE_ALLOWED`, each with its size when listed and why; the list only shrinks: an entry that
  grew past its size, or is no longer over the limit, or names a file or function that is gone, is broken too;
* an app that other apps import has a door, its ``public`` module (``knowledge/public.py``), and another app imports
  it only through that door, or its Django models (``<app>.models``, a module or a package: a ForeignKey or a
  queryset names them); the ground (:data:`GROUND`: ``platform/``'s settings and Celery app, the ``common/`` kernel)
  is imported module by module. What still goes past a door is in :data:`DOORS_ALLOWED`, and that list only
  shrinks: an import past a door it does not list breaks the rule, and so does a listed one no longer made; an
  app's own modules do not import its door;
* a feature's family is a room: no folder holds :data:`MAX_FAMILY` or more modules named with one prefix side by side
  (``openai_api.py``, ``openai_params.py``, …: they go in a sub-package, ``chat/openai/``), Django's command folders
  aside, but the families in :data:`ROOMS_ALLOWED`, each with its size when listed and why; that list only shrinks
  as :data:`SIZE_ALLOWED` does.
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
    ("knowledge", "a profile's documents cut into passages, their upload and the search over them"),
    ("routing", "intents, keywords, state policies, rollout flags; the compiled snapshot, router and decision"),
    ("conversations", "the engine: the conversation store and what happens to one message"),
    ("releases", "how a change reaches customers: versions, saved tests, calibration, rollout plans, YAML import"),
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
MAX_SHARE = 0.30

MODULE_LEVEL = "module-level"
FUNCTION_LEVEL = "function-level"
TYPE_CHECKING_ONLY = "TYPE_CHECKING"

# The product's imports of its own modules made inside a function, each with why it waits: a start-up hook that runs
# once the apps are loaded, or a module that loads a heavy library (numba, the OpenTelemetry SDK) or a process-wide
# mode that must be set first. Keyed by the importing file and the module it imports. A late import that only keeps
# two files from importing each other is no reason: the shared piece gets a module of its own instead. Imports of
# third-party libraries (the SDKs, redis, uvicorn) are not counted.
READY = "AppConfig.ready: connects the app's signals and hooks once every app is loaded"
WORKER_INIT = "Celery's worker_init: what the worker's main process loads before its pool forks"
SERVER_START = "the server's start, in each worker process it spawns (platform/serve.py runs before Django is set up)"
LATE_IMPORTS: dict[tuple[str, str], str] = {
    ("agents/apps.py", "agents.checks"): READY,
    ("agents/apps.py", "agents.models"): READY,
    ("agents/apps.py", "common.config_version"): READY,
    ("agents/apps.py", "common.history.registry"): READY,
    ("analytics/apps.py", "analytics.services"): READY,
    ("common/apps.py", "common.checks"): READY,
    ("analytics/apps.py", "conversations.public"): READY,
    ("conversations/apps.py", "conversations.desk.webhook"): READY,
    ("conversations/apps.py", "conversations.signals"): READY,
    ("releases/apps.py", "common.history.registry"): READY,
    ("releases/apps.py", "releases.checks"): READY,
    ("releases/apps.py", "releases.models"): READY,
    ("releases/apps.py", "releases.rollout.served"): READY,
    ("knowledge/apps.py", "common.config_version"): READY,
    ("knowledge/apps.py", "knowledge.models"): READY,
    ("tenants/apps.py", "common.config_version"): READY,
    ("tenants/apps.py", "tenants.models"): READY,
    ("tenants/apps.py", "tenants.throttles"): READY,
    ("routing/apps.py", "agents.models"): READY,
    ("routing/apps.py", "agents.public"): READY,
    ("routing/apps.py", "common.config_version"): READY,
    ("routing/apps.py", "common.history.registry"): READY,
    ("routing/apps.py", "routing.checks"): READY,
    ("routing/apps.py", "routing.goals.sync"): READY,
    ("routing/apps.py", "routing.models"): READY,
    ("conversations/tasks.py", "common.infra.heap"): WORKER_INIT,
    ("conversations/tasks.py", "common.language"): WORKER_INIT,
    ("conversations/tasks.py", "routing.public"): WORKER_INIT,
    ("platform/celery.py", "platform.logs"): "Celery's logger set-up signal, in the worker once Django is loaded: "
    "platform/logs.py stands on top (it masks what the guardrails mask), the Celery app on the ground",
    ("platform/serve.py", "platform.logs"): SERVER_START,
    ("platform/serve.py", "common.infra.heap"): SERVER_START,
    ("platform/serve.py", "routing.public"): SERVER_START,
    ("platform/serve.py", "common.infra.metrics"): "prometheus_client picks its mode when common.infra.metrics is "
    "first imported: after PROMETHEUS_MULTIPROC_DIR is set for the workers",
    ("common/language.py", "common.language_kernel"): "numba compiles the kernel: only a process that scores loads it",
    ("common/infra/tracing.py", "common.infra.otlp"): "the OpenTelemetry SDK and its exporter: loaded only when "
    "traces are on",
    ("routing/examples.py", "routing.examples_kernel"): "numba compiles the kernel: only examples load it",
    ("routing/tfidf.py", "routing.examples_kernel"): "numba compiles the kernel: only examples load it",
}

# The size limits, and what is over them today (keyed by file, or ``file::Class.function``): each entry's size
# when listed (non-blank lines of a file, lines of a function) and why it is still over. The list only shrinks:
# lower an entry's size when it shrinks, remove it once it is under the limit; nothing is added to it.
MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 100
SIZE_ALLOWED: dict[str, tuple[int, str]] = {
    "analytics/outcomes.py::routing_quality": (
        115,
        "one aggregate per routing method and its labels; owed a split by figure",
    ),
    "conversations/goals/engine.py::plan_execute": (
        124,
        "a goal plan's steps, retries and their records in one loop; owed a stage per step kind",
    ),
    "routing/documents.py::profile_compile": (
        164,
        "every profile setting's compile step in one body; owed a loop over agents.profile_settings' declarations",
    ),
    "routing/documents.py::profile_documents": (164, "one reader of every kind of row; owed one reader per kind"),
}
SIZE_KEY = "::"

# Rooms: a family (modules of one folder sharing the prefix before their first "_") of this many or more is owed a
# sub-package of its own. What is still flat, keyed "folder/prefix_", with its size when listed and why (none today).
MAX_FAMILY = 3
ROOMS_ALLOWED: dict[str, tuple[int, str]] = {}

# Doors: the module of an app through which the others import it, beside its models. The ground floors have none:
# every module of theirs is a library the whole house stands on (a door there would be one module re-exporting all).
DOOR = "public"
MODELS = "models"
GROUND = frozenset({"platform", "common"})
# What still goes past a door, by importing file: the modules it imports from another app that are neither that
# app's door nor its models. The list only shrinks: move an import to the door (re-export the name there) and drop
# it here; nothing is added to it. None today: every app the others import has its door.
DOORS_ALLOWED: dict[str, tuple[str, ...]] = {}


@dataclass
class House:
    lines: Counter[str] = field(default_factory=Counter)  # app -> non-blank lines
    edges: Counter[tuple[str, str]] = field(default_factory=Counter)  # (importer, imported) -> imports
    broken: list[str] = field(default_factory=list)  # "file:line: why"
    # file -> the product's files it imports, whatever kind of import: "file:line (kind)" for each
    imports: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    circles: list[tuple[str, ...]] = field(default_factory=list)  # files importing each other, round and round
    late: list[str] = field(default_factory=list)  # "file:line: module" of every function-level import of ours
    sizes: dict[str, int] = field(default_factory=dict)  # file, or file::qualname, over its limit -> its size
    past: dict[tuple[str, str], int] = field(default_factory=dict)  # (file, module past a door) -> first line
    doors: list[str] = field(default_factory=list)  # the apps with a door

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


@dataclass(frozen=True)
class Import:
    """One absolute ``import`` or ``from … import`` statement (one per name imported, for ``import a, b``)."""

    line: int
    module: str
    names: tuple[str, ...]
    where: str  # MODULE_LEVEL, FUNCTION_LEVEL or TYPE_CHECKING_ONLY


class _Imports(ast.NodeVisitor):
    """Every absolute import of a file, and where it runs: at import time, when a function is called, or never
    (under ``if TYPE_CHECKING:``). A class body runs at import time, so its imports are module-level."""

    def __init__(self) -> None:
        self.found: list[Import] = []
        self._where = [MODULE_LEVEL]

    def _inside(self, where: str, nodes: list[ast.stmt] | ast.AST) -> None:
        self._where.append(where)
        for node in nodes if isinstance(nodes, list) else [nodes]:
            self.visit(node)
        self._where.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        for decorator in getattr(node, "decorator_list", []):  # decorators and defaults run where the def is
            self.visit(decorator)
        self.visit(node.args)
        self._inside(FUNCTION_LEVEL, node.body)

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        ):
            self._inside(TYPE_CHECKING_ONLY if self._where[-1] == MODULE_LEVEL else self._where[-1], node.body)
            for statement in node.orelse:
                self.visit(statement)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found.extend(Import(node.lineno, alias.name, (), self._where[-1]) for alias in node.names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and not node.level:
            names = tuple(alias.name for alias in node.names)
            self.found.append(Import(node.lineno, node.module, names, self._where[-1]))


def _imports(tree: ast.AST) -> list[Import]:
    """Every absolute import in ``tree``, nested ones included, with where it runs."""
    visitor = _Imports()
    visitor.visit(tree)
    return visitor.found


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, int]]:
    """Every function and method of ``tree`` as ``(qualname, lines)``: ``Class.method``, ``outer.inner``; its lines
    run from its ``def`` to its last line."""
    found = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}{node.name}"
            found.append((name, (node.end_lineno or node.lineno) - node.lineno + 1))
            found.extend(_functions(node, f"{name}."))
        elif isinstance(node, ast.ClassDef):
            found.extend(_functions(node, f"{prefix}{node.name}."))
        else:
            found.extend(_functions(node, prefix))
    return found


def sizes_check(house: House, measured: dict[str, int], allowed: dict[str, tuple[int, str]]) -> None:
    """Record in ``house`` every file and function in ``measured`` (each one's size) over its limit, and break the
    rule for each one over it that ``allowed`` does not list, grew past its listed size, or is listed but no
    longer over (or gone)."""
    for key, size in sorted(measured.items()):
        limit = MAX_FUNCTION_LINES if SIZE_KEY in key else MAX_FILE_LINES
        if size <= limit:
            continue
        house.sizes[key] = size
        what = "lines" if SIZE_KEY in key else "non-blank lines"
        if key not in allowed:
            house.broken.append(f"{key}: {size} {what}, over the limit of {limit}, and not in SIZE_ALLOWED")
        elif size > allowed[key][0]:
            house.broken.append(f"{key}: {size} {what}, grown past the {allowed[key][0]} SIZE_ALLOWED lets it have")
    for key, (size, _) in sorted(allowed.items()):
        if key not in house.sizes:
            now = f"{measured[key]} lines" if key in measured else "gone"
            house.broken.append(
                f"{key}: SIZE_ALLOWED lets it have {size} lines; it is no longer over ({now}): remove it"
            )


def through_door(module: str) -> bool:
    """Whether another app may import ``module``: the ground's modules, an app's door and its models."""
    app = module.split(".", 1)[0]
    return app in GROUND or module in (f"{app}.{DOOR}", f"{app}.{MODELS}")


def doors_check(house: House, allowed: dict[str, tuple[str, ...]]) -> None:
    """Break the rule for each import past a door in ``house.past`` that ``allowed`` does not list, and for each
    listed one no longer made."""
    listed = {(relative, module) for relative, modules in allowed.items() for module in modules}
    for (relative, module), line in sorted(house.past.items()):
        if (relative, module) not in listed:
            app = module.split(".", 1)[0]
            house.broken.append(
                f"{relative}:{line}: imports {module} past the {app} door: import it from {app}.{DOOR} (re-export it "
                f"there) or {app}.{MODELS}"
            )
    for relative, module in sorted(listed - set(house.past)):
        house.broken.append(
            f"{relative}: DOORS_ALLOWED lets it import {module} past the door; it no longer does (now through the "
            "door): remove it"
        )


def rooms_check(house: House, paths: list[str], allowed: dict[str, tuple[int, str]]) -> None:
    """Break the rule for each family of :data:`MAX_FAMILY` or more modules side by side in one folder of ``paths``
    that ``allowed`` does not list or that grew past its listed size, and for each listed one no longer flat."""
    families: Counter[str] = Counter()
    for relative in paths:
        folder, _, name = relative.rpartition("/")
        if "management" in folder.split("/") or "_" not in name.strip("_"):
            continue
        families[f"{folder}/{name.split('_', 1)[0]}_"] += 1
    flat = {family: count for family, count in families.items() if count >= MAX_FAMILY}
    for family, count in sorted(flat.items()):
        if family not in allowed:
            house.broken.append(f"{family}*: {count} modules of one family side by side; give them a room (a package)")
        elif count > allowed[family][0]:
            house.broken.append(
                f"{family}*: {count} modules, grown past the {allowed[family][0]} ROOMS_ALLOWED lets it have"
            )
    for family, (count, _) in sorted(allowed.items()):
        if family not in flat:
            house.broken.append(f"{family}*: ROOMS_ALLOWED lets it have {count} modules; it has a room now: remove it")


def _module_of(relative: str) -> str:
    return relative.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def _imported_files(statement: Import, files: dict[str, str]) -> list[str]:
    """The product files a statement loads (``files``: module -> file). ``from package import a, b`` loads the
    submodules ``a`` and ``b`` where they are files; any other name comes from the longest part of the dotted
    module name that is a file of ours (``import a.b.c``: ``a/b/c.py``, or ``a/b.py`` holding ``c``)."""
    named = [f"{statement.module}.{name}" for name in statement.names]
    submodules = [files[name] for name in named if name in files]
    if submodules and len(submodules) == len(named):
        return submodules
    parts = statement.module.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in files:
            return [files[".".join(parts[:end])], *submodules]
    return submodules


def circles(graph: dict[str, dict[str, list[str]]]) -> list[tuple[str, ...]]:
    """The strongly connected components of ``graph`` with more than one file, each sorted, in order (Tarjan's
    algorithm, without recursion: the product's import chains are deeper than Python's stack allows)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, {}))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, {})))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(tuple(sorted(component)))
    return sorted(found)


def measure(
    root: Path = ROOT,
    sizes_allowed: dict[str, tuple[int, str]] | None = None,
    rooms_allowed: dict[str, tuple[int, str]] | None = None,
    doors_allowed: dict[str, tuple[str, ...]] | None = None,
) -> House:
    """Read the product's files and check them against the rules (the size limits against ``sizes_allowed``,
    :data:`SIZE_ALLOWED` unless given; the rooms against ``rooms_allowed``, :data:`ROOMS_ALLOWED` unless given; the
    doors against ``doors_allowed``, :data:`DOORS_ALLOWED` unless given)."""
    house = House()
    measured_sizes: dict[str, int] = {}
    apps = {name for name, _ in LAYERS}
    paths = _product_files(root)
    files = {_module_of(path.relative_to(root).as_posix()): path.relative_to(root).as_posix() for path in paths}
    late_seen: set[tuple[str, str]] = set()
    for path in paths:
        relative = path.relative_to(root).as_posix()
        source = path.read_text(encoding="utf-8")
        app = _app_of(relative)
        measured_sizes[relative] = sum(1 for line in source.splitlines() if line.strip())
        house.lines["platform" if app == TOP else app] += measured_sizes[relative]
        this_module = _module_of(relative)
        house.imports[relative] = {}
        tree = ast.parse(source, relative)
        for name, lines in _functions(tree):  # a name defined twice (a property's setter) counts its longest
            key = f"{relative}{SIZE_KEY}{name}"
            measured_sizes[key] = max(lines, measured_sizes.get(key, 0))
        for statement in _imports(tree):
            line, module = statement.line, statement.module
            target = module.split(".", 1)[0]
            if target not in apps:
                continue
            imported_files = _imported_files(statement, files)
            for imported in imported_files:
                if imported != relative:
                    how = "" if statement.where == MODULE_LEVEL else f" ({statement.where})"
                    house.imports[relative].setdefault(imported, []).append(f"{relative}:{line}{how}")
                if statement.where == FUNCTION_LEVEL:
                    imported_module = _module_of(imported)
                    house.late.append(f"{relative}:{line}: {imported_module}")
                    late_seen.add((relative, imported_module))
                    if (relative, imported_module) not in LATE_IMPORTS:
                        house.broken.append(
                            f"{relative}:{line}: imports {imported_module} inside a function, with no reason in "
                            "LATE_IMPORTS"
                        )
            private = [name for name in statement.names if name.startswith("_") and not name.startswith("__")]
            if private and module != this_module:
                house.broken.append(f"{relative}:{line}: imports the private {', '.join(private)} of {module}")
            if target == app and f"{app}.{DOOR}" in {_module_of(imported) for imported in imported_files}:
                house.broken.append(f"{relative}:{line}: imports its own app's door, {app}.{DOOR}: a circle waiting")
            if target == app or (app == TOP and target == "platform"):
                continue
            house.edges[(app, target)] += 1
            for imported in imported_files:
                if not through_door(_module_of(imported)):
                    house.past.setdefault((relative, _module_of(imported)), line)
            if target == "analytics":
                house.broken.append(f"{relative}:{line}: {app} imports {module}: nobody imports the analytics")
            elif rank(target) >= rank(app):
                house.broken.append(f"{relative}:{line}: {app} imports {module}, on a layer not below it")
    for relative, module in sorted(set(LATE_IMPORTS) - late_seen):
        if (root / relative).exists():
            house.broken.append(
                f"{relative}: LATE_IMPORTS gives a reason for importing {module} late; it no longer does"
            )
    house.circles = circles(house.imports)
    for circle in house.circles:
        inside = [
            where
            for importer in circle
            for imported, places in sorted(house.imports[importer].items())
            if imported in circle
            for where in places
        ]
        house.broken.append(f"a circle between files: {', '.join(circle)} (imports: {'; '.join(inside)})")
    for app, _ in LAYERS:
        if house.share(app) > MAX_SHARE:
            house.broken.append(f"{app}/ holds {house.share(app):.0%} of the product's lines (at most {MAX_SHARE:.0%})")
    sizes_check(house, measured_sizes, SIZE_ALLOWED if sizes_allowed is None else sizes_allowed)
    relatives = [path.relative_to(root).as_posix() for path in paths]
    rooms_check(house, relatives, ROOMS_ALLOWED if rooms_allowed is None else rooms_allowed)
    house.doors = [app for app, _ in LAYERS if app not in GROUND and (root / app / f"{DOOR}.py").exists()]
    doors_check(house, DOORS_ALLOWED if doors_allowed is None else doors_allowed)
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
    rows.append(
        f"Doors: {', '.join(house.doors) or 'none'}; {len(house.past)} imports past a door (DOORS_ALLOWED), "
        f"from {len({relative for relative, _ in house.past})} files."
    )
    return "\n".join(rows)


if __name__ == "__main__":
    measured = measure()
    print(report(measured))
    sys.exit(1 if measured.broken else 0)
