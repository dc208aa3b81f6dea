"""No internal words in what business users read: every template, every model's names, help texts and choices, every
admin's labels (columns, actions, fieldsets and their descriptions, inlines) and every form's labels, help texts and
error messages are scanned for planning labels ("seed 002", "W2", "wave", issue numbers) and for paths of the docs
("docs/versions.md"): a docs page is reached by a link, never named as a file.

Template comments are the developers' and may name a docs file; planning labels belong nowhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django import forms
from django.apps import apps
from django.contrib import admin
from django.urls import get_resolver

ROOT = Path(__file__).resolve().parent.parent
PROJECT_APPS = ("common", "tenants", "handoffs", "agents", "routing", "conversations", "releases", "chat", "analytics")

PLANNING = re.compile(r"\bseed \d{3}\b|\bW[1-9](?: \d+/\d+)?\b|\bwave\b|\bissue #?\d+\b", re.IGNORECASE)
DOCS_PATH = re.compile(r"\bdocs/[\w./-]+\.md\b")
# What a template shows: its comments and the addresses of its links are not read as text.
COMMENTS = re.compile(r"{%\s*comment\s*%}.*?{%\s*endcomment\s*%}|{#.*?#}|<!--.*?-->", re.DOTALL)
LINK_ADDRESSES = re.compile(r"""\bhref\s*=\s*("[^"]*"|'[^']*')""")


def template_files() -> list[Path]:
    folders = [ROOT / "templates", *(ROOT / app / "templates" for app in PROJECT_APPS)]
    return sorted(path for folder in folders if folder.is_dir() for path in folder.rglob("*") if path.is_file())


def found_in(text: str, *, shown: str | None = None) -> list[str]:
    """The internal words of ``text``: planning labels anywhere, docs paths in what is ``shown`` (``text`` if None)."""
    words = [match.group(0) for match in PLANNING.finditer(text)]
    return words + [match.group(0) for match in DOCS_PATH.finditer(text if shown is None else shown)]


def _labels(obj: Any) -> Iterator[str]:
    for name in ("short_description", "verbose_name", "verbose_name_plural", "label", "help_text", "title"):
        value = getattr(obj, name, None)
        if isinstance(value, str) or (value is not None and type(value).__name__ == "__proxy__"):
            yield str(value)


def model_texts() -> Iterator[tuple[str, str]]:
    for model in apps.get_models():
        if model._meta.app_label not in PROJECT_APPS:
            continue
        where = model._meta.label
        yield f"{where} verbose name", str(model._meta.verbose_name)
        yield f"{where} verbose name plural", str(model._meta.verbose_name_plural)
        for field in model._meta.get_fields():
            for text in _labels(field):
                yield f"{where}.{field.name}", text
            for _value, label in getattr(field, "flatchoices", None) or ():
                yield f"{where}.{field.name} choice", str(label)


def form_texts(form: type[forms.BaseForm], where: str) -> Iterator[tuple[str, str]]:
    for name, field in form.base_fields.items():
        for text in _labels(field):
            yield f"{where}.{name}", text
        for text in (field.error_messages or {}).values():
            yield f"{where}.{name} error", str(text)


def admin_texts() -> Iterator[tuple[str, str]]:
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label not in (*PROJECT_APPS, "auditlog"):
            continue
        where = type(model_admin).__qualname__
        yield from _admin_object_texts(model_admin, where)
        for inline in model_admin.inlines:
            yield from _admin_object_texts(inline, f"{where} inline {inline.__qualname__}")
            for text in (getattr(inline, "verbose_name", None), getattr(inline, "verbose_name_plural", None)):
                if text:
                    yield f"{where} inline {inline.__qualname__}", str(text)


def _admin_object_texts(admin_object: Any, where: str) -> Iterator[tuple[str, str]]:
    for title, options in getattr(admin_object, "fieldsets", None) or ():
        if title:
            yield f"{where} fieldset", str(title)
        if options.get("description"):
            yield f"{where} fieldset {title} description", str(options["description"])
    for name in dir(admin_object):
        if name.startswith("__"):
            continue
        member = getattr(admin_object, name, None)
        if callable(member) and hasattr(member, "short_description"):  # admin.display and admin.action
            yield f"{where}.{name}", str(member.short_description)
    form = getattr(admin_object, "form", None)
    if isinstance(form, type) and issubclass(form, forms.BaseForm):
        yield from form_texts(form, f"{where} form")


def every_form() -> Iterator[type[forms.BaseForm]]:
    get_resolver().url_patterns  # noqa: B018 — imports every view, and the forms they use
    seen: set[type] = set()
    todo: list[type] = [forms.BaseForm]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
    return iter(sorted((c for c in seen if c.__module__.split(".")[0] in PROJECT_APPS), key=lambda c: c.__qualname__))


def python_texts() -> Iterator[tuple[str, str]]:
    yield from model_texts()
    yield from admin_texts()
    for form in every_form():
        yield from form_texts(form, f"{form.__module__}.{form.__qualname__}")


def test_no_template_shows_a_planning_label_or_names_a_docs_file():
    found = []
    for path in template_files():
        text = path.read_text(encoding="utf-8")
        shown = LINK_ADDRESSES.sub("", COMMENTS.sub("", text))
        found += [f"{path.relative_to(ROOT)}: {word}" for word in found_in(text, shown=shown)]

    assert found == []


@pytest.mark.django_db
def test_no_model_admin_or_form_text_shows_a_planning_label_or_names_a_docs_file():
    found = [f"{where}: {word}" for where, text in python_texts() for word in found_in(text)]

    assert sorted(set(found)) == []


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("Goal (seed 002: goals and capabilities over MCP)", ["seed 002"]),
        ("Run the review step (seed 004) on every turn", ["seed 004"]),
        ("Everything that decides it (docs/versions.md).", ["docs/versions.md"]),
        ("Built in W2 4/8, the second wave", ["W2 4/8", "wave"]),
        ("See issue 38", ["issue 38"]),
        ("Seedlings, 2 waves of a W-shaped wavelet; see the docs page", []),
    ],
)
def test_the_scan_finds_planning_labels_and_docs_files(text, words):
    assert found_in(text) == words


def test_a_template_may_link_a_docs_page_and_name_one_in_a_comment_but_not_show_its_path():
    text = (
        '{% comment %}see docs/versions.md{% endcomment %}<a href="/docs/versions.md">Versions</a>'
        "<p>Read docs/rollouts.md</p>"
    )

    assert found_in(text, shown=LINK_ADDRESSES.sub("", COMMENTS.sub("", text))) == ["docs/rollouts.md"]
