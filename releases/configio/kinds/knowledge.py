"""The ``knowledge_sources:`` section of a ``knowledge.<agent_id>.yaml`` file: a profile's knowledge sources and their
documents, each with its readable text (what ``export_config`` writes: :func:`knowledge.exchange.knowledge_exported`).

A source is named in its profile (its ``agent_id:``, else ``--profile``); an import creates it or updates the settings
the file gives, and creates or replaces each document by file name, as an upload of it would (the same bounds per
tenant, the same "unchanged" for a document that cuts into the same passages). A source's owner is a username, its
tenant a tenant's slug (left out: shared by every tenant), its ``synonyms`` a list of groups of terms. Writing a source
or a document takes the ``knowledge.edit_knowledge`` permission.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from agents.models import AgentProfile
from common.language import LANGUAGES
from knowledge.models import EDIT_PERMISSION, validate_tags
from knowledge.public import (
    SOURCE_FIELDS,
    UNCHANGED,
    KnowledgeReadError,
    document_ingest,
    source_import,
    synonyms_cleaned,
)
from releases.configio.fields import check, keys_of, name_of
from releases.configio.messages import ERROR_UNKNOWN_PROFILE
from releases.configio.rights import Touch
from releases.configio.source import Node, Problems
from releases.configio.world import ImportReport
from tenants.models import Tenant

KNOWLEDGE_KEYS = ("knowledge_sources",)
SOURCE_KEYS = ("name", *SOURCE_FIELDS, "documents")
DOCUMENT_KEYS = ("file_name", "title", "kind", "language", "tags", "text")
ERROR_LANGUAGE = "unknown language {value!r}: one of {languages}"
ERROR_UNKNOWN_USER = "unknown user {name!r}"
ERROR_UNKNOWN_TENANT = "unknown tenant {name!r}"
ERROR_KIND = "the file name {file_name!r} makes it {kind}, not {value}"
ERROR_NO_PROFILE = "knowledge_sources: name the profile with agent_id (or --profile)"


@dataclass
class SourceEntry:
    """One source of a file, checked on its own: its profile, settings (as written), documents."""

    agent_id: str
    node: Node
    name: str
    settings: dict[str, tuple[Node, Any]] = field(default_factory=dict)
    documents: list[tuple[Node, dict[str, Any]]] = field(default_factory=list)


def _tags(node: Node, problems: Problems) -> list[str] | None:
    if node.value is None:
        return []
    if not check(node, "list", problems):
        return None
    try:
        validate_tags(node.value)
    except ValidationError as error:
        problems.add(node, error.messages[0])
        return None
    return list(node.value)


def _synonyms(node: Node, problems: Problems) -> list[list[str]] | None:
    """A source's synonyms: a list of groups, each a list of terms (``knowledge.synonyms``)."""
    if node.value is None:
        return []
    try:
        return synonyms_cleaned(node.value)
    except ValidationError as error:
        problems.add(node, error.messages[0])
        return None


def _language(node: Node, problems: Problems) -> str | None:
    value = name_of(node, problems)
    if value is not None and value not in LANGUAGES:
        problems.add(node, ERROR_LANGUAGE.format(value=value, languages=", ".join(LANGUAGES)))
        return None
    return value


def parse_knowledge(
    section: Node, agent_node: Node | None, problems: Problems, entries: list[SourceEntry], profile_option: str | None
) -> None:
    """The sources of ``section`` (a list), for the profile ``agent_node`` names (else ``profile_option``)."""
    agent_id = name_of(agent_node, problems) if agent_node is not None else profile_option
    if agent_id is None:
        if agent_node is None:
            problems.add(section, ERROR_NO_PROFILE)
        return
    if section.value is None or not check(section, "list", problems):
        return
    for node in section.elements():
        keys = keys_of(node, problems, SOURCE_KEYS, required=("name",))
        if keys is None or "name" not in keys or (name := name_of(keys["name"], problems)) is None:
            continue
        entry = SourceEntry(agent_id, node, name)
        for key in SOURCE_FIELDS:
            if key not in keys:
                continue
            child = keys[key]
            value: Any = None
            if key == "language":
                value = _language(child, problems)
            elif key == "tags":
                value = _tags(child, problems)
            elif key in ("owner", "tenant"):
                value = "" if child.value is None else name_of(child, problems)
            elif key == "synonyms":
                value = _synonyms(child, problems)
            elif check(child, "boolean", problems):
                value = child.value
            if value is not None:
                entry.settings[key] = (child, value)
        documents = keys.get("documents")
        if documents is not None and documents.value is not None and check(documents, "list", problems):
            for document in documents.elements():
                read = _document(document, problems)
                if read is not None:
                    entry.documents.append((document, read))
        entries.append(entry)


def _document(node: Node, problems: Problems) -> dict[str, Any] | None:
    keys = keys_of(node, problems, DOCUMENT_KEYS, required=("file_name", "text"))
    if keys is None or "file_name" not in keys or "text" not in keys:
        return None
    file_name = name_of(keys["file_name"], problems)
    if file_name is None or not check(keys["text"], "string", problems):
        return None
    read: dict[str, Any] = {"file_name": file_name, "text": keys["text"].value}
    if "title" in keys and check(keys["title"], "text", problems):
        read["title"] = (keys["title"].value or "").strip()
    if "kind" in keys and (kind := name_of(keys["kind"], problems)) is not None:
        read["kind"] = kind
    if "language" in keys and (language := _language(keys["language"], problems)) is not None:
        read["language"] = language
    if "tags" in keys and (tags := _tags(keys["tags"], problems)) is not None:
        read["tags"] = tags
    return read


def knowledge_write(
    entries: list[SourceEntry], report: ImportReport, user: Any, problems: Problems, touched: list[Touch]
) -> None:
    """Write each source and its documents (after the profiles: a profile the import creates is there). Each change
    is recorded in ``touched`` as needing the edit-knowledge permission; what cannot be written is a problem."""
    users = get_user_model()
    for entry in entries:
        profile = AgentProfile.objects.filter(agent_id=entry.agent_id).first()
        if profile is None:
            problems.add(entry.node, ERROR_UNKNOWN_PROFILE.format(name=entry.agent_id))
            continue
        settings: dict[str, Any] = {}
        for key, (node, value) in entry.settings.items():
            if key == "owner" and value:
                value = users.objects.filter(**{users.USERNAME_FIELD: value}).first()
                if value is None:
                    problems.add(node, ERROR_UNKNOWN_USER.format(name=entry.settings[key][1]))
                    continue
            elif key == "tenant" and value:
                value = Tenant.objects.filter(slug=value).first()
                if value is None:
                    problems.add(node, ERROR_UNKNOWN_TENANT.format(name=entry.settings[key][1]))
                    continue
            settings[key] = value or None if key in ("owner", "tenant") else value
        if problems:
            continue
        try:
            source, outcome = source_import(profile=profile, name=entry.name, settings=settings)
        except ValidationError as error:  # a bound of the tenant's (its synonyms)
            problems.add(entry.node, "; ".join(error.messages))
            continue
        report.count("knowledge source", outcome)
        if outcome != UNCHANGED:
            touched.append(Touch(EDIT_PERMISSION, entry.node, "create" if outcome == "created" else "change"))
        for node, document in entry.documents:
            _document_write(source, node, document, report, user, problems, touched)


def _document_write(
    source: Any,
    node: Node,
    document: dict[str, Any],
    report: ImportReport,
    user: Any,
    problems: Problems,
    touched: list[Touch],
) -> None:
    try:
        ingested = document_ingest(
            source=source,
            file_name=document["file_name"],
            data=document["text"].encode(),
            title=document.get("title", ""),
            language=document.get("language", ""),
            tags=document.get("tags"),
            user=user if getattr(user, "pk", None) else None,
            readable=True,
        )
    except KnowledgeReadError as error:
        problems.add(node, error.message)
        return
    kind = source.documents.filter(pk=ingested.document_id).values_list("kind", flat=True).first()
    if "kind" in document and document["kind"] != kind:
        problems.add(node, ERROR_KIND.format(file_name=document["file_name"], kind=kind, value=document["kind"]))
    status = {"created": "created", "replaced": "updated"}.get(ingested.outcome, "unchanged")
    report.count("knowledge document", status)
    if status != "unchanged":
        touched.append(Touch(EDIT_PERMISSION, node, "create" if status == "created" else "change"))
