"""What the README and the docs say about the code, held to it: every file or folder of the repository they name
exists (and every ``file.py::name`` is defined there), every dotted name of a product module resolves (a module and
its attributes, a model label, a permission, a system check's id or a Celery task's name), and every list of the
graph's nodes is the graph's own (:data:`conversations.graph.NODES`, or :data:`~conversations.graph.HELD_NODES` for a
conversation a person holds), in its order, none left out. Prose about where code lives goes stale when code moves;
this test says where."""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

from django.apps import apps
from django.conf import settings

from conversations.graph import HELD_NODES, NODES
from platform.celery import app as celery_app

BASE = Path(settings.BASE_DIR)
PAGES = [BASE / "README.md", *sorted((BASE / "docs").rglob("*.md"))]
# The repository's folders: not those .gitignore leaves out (var/, test-output/), which a run makes.
IGNORED = {line.strip().strip("/") for line in (BASE / ".gitignore").read_text().splitlines() if line.endswith("/")}
FOLDERS = sorted(
    path.name for path in BASE.iterdir() if path.is_dir() and not path.name.startswith(".") and path.name not in IGNORED
)
PACKAGES = sorted(name for name in FOLDERS if (BASE / name / "__init__.py").exists())

# A path of the repository: a top folder, then at least one more part (`chat/intake.py`, `common/infra/`), and where
# it names a Python file optionally `::name` (a function, class or `Class.method` defined there). Not a pattern
# (`tests/test_*.py`, `chat/<channel>.py`). In a package, a last part with no suffix and no slash is an address
# (`handoffs/timeline` of the analytics API), not a file; a migration is named `app/0002` or `app.0002_name`.
PATH = re.compile(rf"(?<![\w./<-])((?:{'|'.join(FOLDERS)})/[\w./-]*\w/?)(?:::([\w.]+))?(?![*<{{\w./-])")
MIGRATION = re.compile(rf"(?<![\w./-])({'|'.join(PACKAGES)})[/.](\d{{4}}(?:_\w+)?)\b")
# A dotted name in backquotes that starts with a package of ours: `common.adminkit.admin_extend`.
DOTTED = re.compile(rf"`((?:{'|'.join(PACKAGES)})(?:\.\w+)+)`")
# "`NAME` in `file.py`": the name is defined in that file.
NAME_IN = re.compile(rf"`(\w+)` in\s+`((?:{'|'.join(FOLDERS)})/[\w/]+\.py)`")
NOT_PYTHON = (".yaml", ".yml", ".json", ".py", ".md", ".txt", ".toml", ".js", ".html", ".css")
FOREIGN = {"chat.completion", "chat.completion.chunk"}  # OpenAI's object types, not our modules
CHECK_ID = re.compile(r"^(\w+)\.[CEWI]\d{3}$")
# A chain or list of the graph's nodes: names (in backquotes or not) joined by arrows or commas.
CHAIN = re.compile(r"`?<?input_guardrails>?`?(?:\s*(?:→|,)\s*`?<?\w+>?`?)+")
TRACE_NODE = re.compile(r'\{"node": "(\w+)"')


def prose(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def named_paths(text: str) -> Iterator[tuple[str, str | None]]:
    """The repository's paths ``text`` names, each with the name it says is defined there (or ``None``)."""
    for match in PATH.finditer(text):
        path, name = match.group(1), match.group(2)
        if path.split("/", 1)[0] in PACKAGES and not path.endswith("/") and "." not in path.rsplit("/", 1)[-1]:
            continue  # an address or a migration (MIGRATION), not a file
        yield path.rstrip("/"), name
    for match in NAME_IN.finditer(text.replace("\n", " ")):
        yield match.group(2), match.group(1)


def migration_exists(app: str, name: str) -> bool:
    return any((BASE / app / "migrations").glob(f"{name}*.py"))


def defined(path: Path, qualname: str) -> bool:
    """Whether ``qualname`` (``f``, ``Class``, ``Class.method``, a module-level name) is defined in ``path``."""
    body: list[ast.stmt] = ast.parse(path.read_text(encoding="utf-8")).body
    for part in qualname.split("."):
        found = None
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == part:
                found = node
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(target, ast.Name) and target.id == part for target in targets):
                    found = node
        if found is None:
            return False
        body = getattr(found, "body", [])
    return True


def resolves(dotted: str) -> bool:
    """Whether a dotted name of ours names something: a module and attributes, a model (``app.Model``), a permission
    (``app.codename``), a system check's id (``app.W001``, found in the app's code) or a Celery task's name."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        try:
            for attribute in parts[end:]:
                found = getattr(found, attribute)
        except AttributeError:
            break
        return True
    label, _, name = dotted.partition(".")
    if "." not in name:
        if any(model._meta.app_label == label and model.__name__ == name for model in apps.get_models()):
            return True
        if name in permissions(label):
            return True
    if (check := CHECK_ID.match(dotted)) and any(
        f'"{dotted}"' in path.read_text(encoding="utf-8") for path in (BASE / check.group(1)).rglob("*.py")
    ):
        return True
    celery_app.loader.import_default_modules()
    return dotted in celery_app.tasks


def permissions(app_label: str) -> set[str]:
    """The codenames of an app's permissions: Django's four per model and those its models declare."""
    codenames: set[str] = set()
    for model in apps.get_models():
        if model._meta.app_label == app_label:
            codenames |= {f"{action}_{model._meta.model_name}" for action in model._meta.default_permissions}
            codenames |= {codename for codename, _ in model._meta.permissions}
    return codenames


def node_list(chain: str) -> list[str]:
    return [name.strip("`<> ") for name in re.split(r"→|,", chain)]


def is_the_graphs(names: list[str], *, any_specialist: bool = False) -> bool:
    """Whether ``names`` are one of the graph's node lists in order; the specialist's place may name the agent that
    answered (a trace records the node under the agent's name) when ``any_specialist``."""
    for nodes in (NODES, HELD_NODES):
        expected = [name for name, _ in nodes]
        if len(names) == len(expected) and all(
            said == node or (node == "specialist" and any_specialist)
            for said, node in zip(names, expected, strict=True)
        ):
            return True
    return False


def without_parentheses(text: str) -> str:
    while (stripped := re.sub(r"\([^()]*\)", "", text)) != text:
        text = stripped
    return text


def test_every_file_and_folder_the_docs_name_exists_and_every_named_function_is_defined_there():
    stale = []
    for page in PAGES:
        for path, name in named_paths(prose(page)):
            target = BASE / path
            where = f"{page.relative_to(BASE)}: {path}"
            if not target.exists():
                stale.append(f"{where} (no such file or folder)")
            elif name and (target.suffix != ".py" or not defined(target, name)):
                stale.append(f"{where}::{name} (not defined there)")
        for app, name in MIGRATION.findall(prose(page)):
            if not migration_exists(app, name):
                stale.append(f"{page.relative_to(BASE)}: migration {app} {name} (no such migration)")
    assert stale == [], stale


def test_every_dotted_name_of_a_product_module_the_docs_give_resolves():
    stale = sorted(
        {
            f"{page.relative_to(BASE)}: {dotted}"
            for page in PAGES
            for dotted in DOTTED.findall(prose(page))
            if not dotted.endswith(NOT_PYTHON)
            and dotted not in FOREIGN
            and not MIGRATION.fullmatch(dotted)
            and not resolves(dotted)
        }
    )
    assert stale == [], stale


def test_every_list_of_the_graphs_nodes_in_the_docs_is_the_graphs_own_in_order():
    stale = []
    for page in PAGES:
        text = without_parentheses(prose(page).replace("\n", " "))
        for chain in CHAIN.findall(text):
            if not is_the_graphs(node_list(chain)):
                stale.append(f"{page.relative_to(BASE)}: {chain}")
        trace = TRACE_NODE.findall(prose(page))
        if trace and not is_the_graphs(trace, any_specialist=True):
            stale.append(f"{page.relative_to(BASE)}: a trace of nodes {trace}")
    assert stale == [], stale


def test_the_checks_catch_a_missing_file_an_undefined_function_a_wrong_dotted_name_and_a_node_left_out(tmp_path):
    module = tmp_path / "module.py"
    module.write_text("class View:\n    def post(self): ...\n\nLIMIT = 3\n", encoding="utf-8")
    said = (
        "see `conversations/nowhere.py`, `common/infra/`, chat/intake.py::message_intake, `tests/test_*.py`, the "
        "analytics' `handoffs/timeline` and (`MOVES` in\n`conversations/graph.py`)"
    )

    assert list(named_paths(said)) == [
        ("conversations/nowhere.py", None),
        ("common/infra", None),
        ("chat/intake.py", "message_intake"),
        ("conversations/graph.py", None),
        ("conversations/graph.py", "MOVES"),
    ]
    assert migration_exists("knowledge", "0002") and not migration_exists("knowledge", "0002_something_else")
    assert defined(module, "View.post") and defined(module, "LIMIT") and not defined(module, "View.get")
    assert resolves("common.adminkit.admin_extend") and not resolves("common.adminkit.admin_extended")
    assert resolves("conversations.Conversation") and resolves("routing.specialist_step")
    assert not resolves("routing.change_nothing") and not resolves("routing.W999")
    names = [name for name, _ in NODES]
    assert is_the_graphs(names) and not is_the_graphs([name for name in names if name != "escalation"])
    assert node_list(CHAIN.findall("nodes `input_guardrails` → `person`, `persist`.")[0]) == [
        "input_guardrails",
        "person",
        "persist",
    ]
