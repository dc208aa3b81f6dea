"""The layers of docs/architecture.md, held against the code's own imports (scripts/architecture.py measures them)."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import sys
import typing
from pathlib import Path

import pytest
from django.apps import apps

from conversations.turn import Turn

ROOT = Path(__file__).resolve().parent.parent


def _architecture():
    spec = importlib.util.spec_from_file_location("architecture", ROOT / "scripts" / "architecture.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


architecture = _architecture()


@pytest.fixture(scope="module")
def house():
    return architecture.measure(ROOT)


def broken(house, word: str) -> list[str]:
    return [line for line in house.broken if word in line]


def test_every_import_between_apps_points_down_a_layer(house):
    assert broken(house, "not below it") == []


def test_nobody_imports_the_analytics(house):
    assert broken(house, "nobody imports the analytics") == []
    assert not [pair for pair in house.edges if pair[1] == "analytics"]


def test_no_two_apps_import_each_other(house):
    assert not [(a, b) for (a, b) in house.edges if (b, a) in house.edges]


def test_no_app_holds_more_than_its_share_of_the_product(house):
    shares = {app: round(house.share(app), 3) for app, _ in architecture.LAYERS}
    assert architecture.MAX_SHARE <= 0.30
    assert max(shares.values()) <= architecture.MAX_SHARE, shares


def test_no_files_import_each_other_counting_function_level_and_type_checking_imports(house):
    assert broken(house, "a circle between files") == []
    assert house.circles == []


def test_every_function_level_import_of_a_product_module_has_its_reason_listed(house):
    assert broken(house, "LATE_IMPORTS") == []
    assert all(reason.strip() for reason in architecture.LATE_IMPORTS.values())


def test_no_module_imports_another_modules_private_name(house):
    assert broken(house, "private") == []


# What one turn may keep of its own; the rest is in the parts its features define (docs/architecture.md, "The turn").
TURN_FIELDS_MAX = 20
TURN_PARTS = {"route", "guardrails", "stack", "chain", "supervisor", "escalation", "backend", "language", "store"}


def _dataclass_in(hint: object) -> type | None:
    """The dataclass a field holds (``GoalTurn | None`` holds ``GoalTurn``), or None."""
    kinds = [hint, *typing.get_args(hint)]
    return next((kind for kind in kinds if isinstance(kind, type) and dataclasses.is_dataclass(kind)), None)


def test_the_turn_keeps_at_most_twenty_fields_and_each_part_is_defined_in_a_module_that_does_not_import_it(house):
    own = dataclasses.fields(Turn)
    assert len(own) <= TURN_FIELDS_MAX, [field.name for field in own]
    hints = typing.get_type_hints(Turn)
    # The message as it came in (TurnInput) is the turn's own; every other dataclass it holds is a feature's part.
    parts = {field.name: _dataclass_in(hints[field.name]) for field in own if field.name != "input"}
    parts = {name: kind for name, kind in parts.items() if kind is not None}
    assert TURN_PARTS | {"memory", "goal"} <= set(parts), sorted(parts)
    for name, kind in parts.items():
        assert kind.__module__ != "conversations.turn", name
        path = kind.__module__.replace(".", "/") + ".py"
        assert (ROOT / path).exists(), path
        assert "conversations/turn.py" not in house.imports.get(path, {}), f"{name}: {path} imports the turn"


def test_each_app_says_its_layers_rule_at_the_top_of_its_package():
    for app, _ in architecture.LAYERS:
        doc = (ROOT / app / "__init__.py").read_text(encoding="utf-8")
        assert doc.startswith('"""') and "architecture.md" in doc, app


# The release lifecycle's models, which lived in routing/models.py until they moved with their rows.
RELEASE_MODELS = (
    "RoutingTestCase",
    "ConversationTest",
    "ConversationTestRun",
    "ConversationTestResult",
    "RolloutPlan",
    "RolloutDecision",
    "ReleaseRequest",
)


def test_every_model_lives_in_the_app_its_label_names():
    misplaced = [
        f"{model._meta.label} is defined in {model.__module__}"
        for model in apps.get_models()
        if model.__module__.split(".")[0] in {app for app, _ in architecture.LAYERS}
        and not model.__module__.startswith(f"{model._meta.app_config.name}.")
    ]
    assert misplaced == []


def test_the_release_models_are_the_releases_apps_and_imported_from_it_alone():
    assert {apps.get_model("releases", name)._meta.app_label for name in RELEASE_MODELS} == {"releases"}
    elsewhere = []
    folders = [app for app, _ in architecture.LAYERS] + ["bench", "mcp_servers", "scripts", "tests"]
    for path in (path for folder in folders for path in (ROOT / folder).rglob("*.py")):
        if "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module != "releases.models":
                named = {alias.name for alias in node.names} & set(RELEASE_MODELS)
                elsewhere += [f"{path.relative_to(ROOT)}: {name} from {node.module}" for name in sorted(named)]
    assert elsewhere == []


def test_the_rules_catch_an_upward_import_a_private_import_and_an_oversized_app(tmp_path):
    def write(relative: str, text: str) -> None:
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    write("common/text.py", "from conversations.graph import run_turn\n")  # the kernel reaching up
    write("tenants/auth.py", "from common.text import _fold\n" + "x = 1\n" * 500)  # a private name; most lines
    write("platform/urls.py", "from analytics import views\n")

    found = architecture.measure(tmp_path).broken

    assert any("common/text.py:1: common imports conversations.graph" in line for line in found)
    assert any("imports the private _fold of common.text" in line for line in found)
    assert any("nobody imports the analytics" in line for line in found)
    assert any(line.startswith("tenants/ holds") for line in found)


def test_the_rules_catch_a_circle_hidden_in_a_function_or_under_type_checking_and_an_unlisted_late_import(tmp_path):
    def write(relative: str, text: str) -> None:
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    write("routing/a.py", "def f():\n    from routing.b import g\n")
    write("routing/b.py", "from routing.a import f\n")
    write("chat/c.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from chat.d import D\n")
    write("chat/d.py", "from chat import c\n")

    house = architecture.measure(tmp_path)

    assert house.circles == [("chat/c.py", "chat/d.py"), ("routing/a.py", "routing/b.py")]
    assert "routing/a.py:2: imports routing.b inside a function, with no reason in LATE_IMPORTS" in house.broken
    assert any("routing/a.py:2 (function-level)" in line for line in broken(house, "a circle between files"))
    assert any("chat/c.py:3 (TYPE_CHECKING)" in line for line in broken(house, "a circle between files"))


def test_a_package_that_re_exports_its_submodules_is_no_circle(tmp_path):
    def write(relative: str, text: str) -> None:
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    write("releases/configio/__init__.py", "from releases.configio.parse import parse\n")
    write("releases/configio/parse.py", "from releases.configio import messages\n\ndef parse(): ...\n")
    write("releases/configio/messages.py", "ERROR = 'x'\n")

    house = architecture.measure(tmp_path)

    assert house.circles == []
    assert house.imports["releases/configio/parse.py"] == {
        "releases/configio/messages.py": ["releases/configio/parse.py:1"]
    }


def test_no_file_or_function_is_over_its_size_limit_but_those_listed_and_none_grew_past_its_listed_size(house):
    assert broken(house, "SIZE_ALLOWED") == []
    assert set(house.sizes) == set(architecture.SIZE_ALLOWED)
    assert all(reason.strip() for _, reason in architecture.SIZE_ALLOWED.values())


def test_the_size_rule_catches_a_new_oversized_file_and_function_a_listed_one_that_grew_and_one_now_small(tmp_path):
    def write(relative: str, text: str) -> None:
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    long_body = "    x = 1\n" * 100  # with its def, 101 lines
    write("routing/big.py", "x = 1\n\n" * 801)  # 801 non-blank lines: the blank ones do not count
    write("chat/views.py", "class View:\n    def post(self):\n" + long_body.replace("    ", "        "))
    write("agents/grown.py", f"def build():\n{long_body}")
    write("releases/small.py", "def build():\n    return 1\n")
    allowed = {
        "agents/grown.py::build": (100, "listed at 100 lines"),
        "releases/small.py::build": (120, "split since"),
        "releases/moved.py": (900, "moved since"),
    }

    found = architecture.measure(tmp_path, sizes_allowed=allowed).broken

    assert "routing/big.py: 801 non-blank lines, over the limit of 800, and not in SIZE_ALLOWED" in found
    assert "chat/views.py::View.post: 101 lines, over the limit of 100, and not in SIZE_ALLOWED" in found
    assert "agents/grown.py::build: 101 lines, grown past the 100 SIZE_ALLOWED lets it have" in found
    assert any(line.startswith("releases/small.py::build: SIZE_ALLOWED lets it have 120") for line in found)
    assert any(line.startswith("releases/moved.py: SIZE_ALLOWED") and "(gone)" in line for line in found)


def test_a_file_or_function_at_its_limit_passes(tmp_path):
    path = tmp_path / "routing" / "edge.py"
    path.parent.mkdir(parents=True)
    path.write_text("def f():\n" + "    x = 1\n" * 99 + "y = 1\n" * 700, encoding="utf-8")

    house = architecture.measure(tmp_path, sizes_allowed={})

    assert house.sizes == {} and broken(house, "SIZE_ALLOWED") == []


def test_every_family_of_modules_has_a_room_but_those_listed_and_none_grew(house):
    assert broken(house, "ROOMS_ALLOWED") == [] and broken(house, "give them a room") == []
    assert all(reason.strip() for _, reason in architecture.ROOMS_ALLOWED.values())


def test_the_rooms_rule_catches_a_new_flat_family_a_listed_one_that_grew_and_one_given_its_room(tmp_path):
    for relative in [
        "chat/openai_api.py",
        "chat/openai_params.py",
        "chat/openai_turns.py",
        "agents/desk_a.py",
        "agents/desk_b.py",
        "agents/desk_c.py",
        "agents/desk_d.py",
        "routing/goal/sync.py",  # a room: its modules' names are no family's
        "routing/goal/words.py",
        "releases/management/commands/run_a.py",  # Django's command folder names by command
        "releases/management/commands/run_b.py",
        "releases/management/commands/run_c.py",
        "conversations/memo_a.py",  # two of a family are no room yet
        "conversations/memo_b.py",
    ]:
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n", encoding="utf-8")
    allowed = {"agents/desk_": (3, "listed at three"), "routing/goal_": (4, "moved since")}

    found = architecture.measure(tmp_path, sizes_allowed={}, rooms_allowed=allowed).broken

    assert "chat/openai_*: 3 modules of one family side by side; give them a room (a package)" in found
    assert "agents/desk_*: 4 modules, grown past the 3 ROOMS_ALLOWED lets it have" in found
    assert "routing/goal_*: ROOMS_ALLOWED lets it have 4 modules; it has a room now: remove it" in found
    assert not [line for line in found if "memo_" in line or "run_" in line]


def test_every_import_of_another_app_goes_through_its_door_or_to_its_models_but_those_listed(house):
    assert broken(house, "door") == []
    listed = {(relative, module) for relative, modules in architecture.DOORS_ALLOWED.items() for module in modules}
    assert set(house.past) == listed
    assert all(modules for modules in architecture.DOORS_ALLOWED.values())
    assert not [app for app in house.doors if app in architecture.GROUND]


def test_the_doors_rule_catches_an_import_past_a_door_of_any_kind_and_a_listed_one_now_through_the_door(tmp_path):
    def write(relative: str, text: str) -> None:
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    write("common/text.py", "def fold(): ...\n")
    write("agents/models/__init__.py", "from agents.models.profiles import Profile\n")
    write("agents/models/profiles.py", "class Profile: ...\n")
    write("knowledge/public.py", "from knowledge.retrieval import search\n")
    write("knowledge/retrieval.py", "def search(): ...\n")
    write("knowledge/services.py", "from knowledge.public import search\n")  # its own app's door
    write("knowledge/models.py", "class Document: ...\n")
    write(  # the door, the models (a module, a package) and the ground: no rule broken
        "routing/door.py",
        "from common.text import fold\nfrom knowledge.public import search\nfrom knowledge import models\n"
        "from knowledge.models import Document\nfrom agents.models import Profile\n",
    )
    write("routing/past.py", "from knowledge.retrieval import search\nfrom agents.models.profiles import Profile\n")
    typed = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from knowledge import retrieval\n"
    write("routing/typed.py", typed)
    write("routing/listed.py", "from knowledge import services\n")
    write("routing/moved.py", "from knowledge.public import search\n")
    allowed = {"routing/listed.py": ("knowledge.services",), "routing/moved.py": ("knowledge.retrieval",)}

    house = architecture.measure(tmp_path, sizes_allowed={}, rooms_allowed={}, doors_allowed=allowed)

    assert broken(house, "door") == [
        "knowledge/services.py:1: imports its own app's door, knowledge.public: a circle waiting",
        "routing/past.py:2: imports agents.models.profiles past the agents door: import it from agents.public "
        "(re-export it there) or agents.models",
        "routing/past.py:1: imports knowledge.retrieval past the knowledge door: import it from knowledge.public "
        "(re-export it there) or knowledge.models",
        "routing/typed.py:3: imports knowledge.retrieval past the knowledge door: import it from knowledge.public "
        "(re-export it there) or knowledge.models",
        "routing/moved.py: DOORS_ALLOWED lets it import knowledge.retrieval past the door; it no longer does (now "
        "through the door): remove it",
    ]
    assert house.doors == ["knowledge"]
