"""YAML from outside (the admin's import, pasted or uploaded, ``manage.py import_config``, routing tests files) is
read within bounds (releases/configio/source.py): what its aliases repeat is counted while the text is parsed, and a
file whose aliases would repeat more than the budget — a "billion laughs" — is refused, naming the file and line,
before anything is built from it; so is a file nested deeper than the importer reads, or larger than it takes."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from releases.configio.messages import ERROR_ALIASES, ERROR_TOO_DEEP, ERROR_TOO_LARGE
from releases.configio.source import (
    MAX_ALIAS_CHARS,
    MAX_ALIAS_VALUES,
    MAX_DEPTH,
    MAX_TEXT_CHARS,
    Problems,
    Source,
    load,
)
from routing.models import Keyword

IMPORT_URL = "/admin/routing/intent/config/import/"


def alias_bomb(levels: int, width: int) -> str:
    """The classic: each level a list of ``width`` aliases of the level below; ``width ** levels`` values in all."""
    lines = [f"a0: &a0 [{', '.join(['lol'] * width)}]"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


# The probe's bomb, byte for byte: nine levels of nine, 387,420,489 values from 342 bytes.
BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{name}: &{name} [{','.join([f'*{below}'] * 9)}]\n" for below, name in zip("abcdefgh", "bcdefghi", strict=True)
)


def loaded(text: str, name: str = "pasted.yaml") -> tuple[object, Source, list[str]]:
    source, problems = Source(name=name, text=text), Problems()
    node = load(source, problems)
    return (node.value if node else None), source, [str(problem) for problem in problems.errors]


def test_the_probes_342_byte_alias_bomb_is_refused_naming_the_file_and_its_line():
    assert len(BOMB) == 342

    value, source, errors = loaded(BOMB)

    assert value is None
    assert len(errors) == 1 and errors[0].startswith("pasted.yaml:")
    assert ERROR_ALIASES.format(values=MAX_ALIAS_VALUES, chars=MAX_ALIAS_CHARS) in errors[0]
    assert len(source.lines) <= 100  # nothing was built from it: each value built records its line


def test_a_bomb_of_a_hundred_thousand_values_is_refused_before_its_values_are_built():
    value, source, errors = loaded(alias_bomb(levels=5, width=10))

    assert value is None and errors
    assert ERROR_ALIASES.format(values=MAX_ALIAS_VALUES, chars=MAX_ALIAS_CHARS) in errors[0]
    assert len(source.lines) <= MAX_ALIAS_VALUES  # the work done stays within the budget, not 10 ** 5


def test_a_long_text_repeated_by_aliases_counts_its_characters():
    text = f"big: &big {'x' * 20_000}\nmany: [{', '.join(['*big'] * (MAX_ALIAS_CHARS // 20_000 + 1))}]\n"

    value, _, errors = loaded(text)

    assert value is None and ERROR_ALIASES.format(values=MAX_ALIAS_VALUES, chars=MAX_ALIAS_CHARS) in errors[0]


def test_aliases_within_the_budget_still_read_as_the_values_they_repeat():
    text = "tools: &tools [consultar_fatura, segunda_via]\nbilling: {tools: *tools}\nsupport: {tools: *tools}\n"

    value, _, errors = loaded(text)

    assert errors == []
    assert value == {
        "tools": ["consultar_fatura", "segunda_via"],
        "billing": {"tools": ["consultar_fatura", "segunda_via"]},
        "support": {"tools": ["consultar_fatura", "segunda_via"]},
    }


@pytest.mark.parametrize("depth", [MAX_DEPTH + 5, 5_000, 200_000])
def test_a_file_nested_deeper_than_the_importer_reads_is_refused_whatever_the_depth(depth):
    value, _, errors = loaded("[" * depth + "]" * depth)

    assert value is None
    assert len(errors) == 1 and errors[0].startswith("pasted.yaml:1:") and ERROR_TOO_DEEP in errors[0]


def test_a_text_larger_than_the_importer_takes_is_refused_without_parsing():
    value, source, errors = loaded("a: " + "x" * MAX_TEXT_CHARS)

    assert value is None and source.lines == {}
    assert errors == [f"pasted.yaml:1: {ERROR_TOO_LARGE.format(megabytes=MAX_TEXT_CHARS // 1024 // 1024)}"]


@pytest.mark.sqlite_too
@pytest.mark.django_db
@pytest.mark.parametrize(
    ("text", "message"),
    [
        (BOMB, ERROR_ALIASES.format(values=MAX_ALIAS_VALUES, chars=MAX_ALIAS_CHARS)),
        ("[" * 5_000 + "]" * 5_000, ERROR_TOO_DEEP),
    ],
    ids=["alias-bomb", "deep"],
)
def test_the_admins_import_shows_the_refusal_on_the_page_for_pasted_yaml(admin_client, text, message):
    response = admin_client.post(IMPORT_URL, {"text": text, "text_name": "bomb.yaml", "_import": "1"})

    assert response.status_code == 200
    problems = response.context["problems"]
    assert len(problems) == 1 and problems[0].startswith("bomb.yaml:") and message in problems[0]
    assert "nothing was imported" in response.content.decode()


@pytest.mark.django_db
def test_import_config_refuses_the_bomb_with_a_command_error_naming_the_file(tmp_path):
    path = tmp_path / "routing.telecom_contas.yaml"
    path.write_text(BOMB, encoding="utf-8")
    keywords = Keyword.objects.count()

    with pytest.raises(CommandError) as refused:
        call_command("import_config", str(path), stdout=StringIO(), stderr=StringIO())

    assert f"{path}:" in str(refused.value)
    assert ERROR_ALIASES.format(values=MAX_ALIAS_VALUES, chars=MAX_ALIAS_CHARS) in str(refused.value)
    assert Keyword.objects.count() == keywords
