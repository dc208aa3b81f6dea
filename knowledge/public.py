"""The door of ``knowledge/`` (docs/architecture.md, "Doors"): the search over a profile's passages, for the snapshot
and the engine, a document's upload, for the demo's seed, and the words of a question, for the analytics. Its
models are imported from ``knowledge.models``."""

from __future__ import annotations

from knowledge.retrieval import Considered, Retrieved, document_link, knowledge_profiles, knowledge_retrieve
from knowledge.services import CREATED, REPLACED, document_ingest
from knowledge.words import question_words

__all__ = [
    "CREATED",
    "REPLACED",
    "Considered",
    "Retrieved",
    "document_ingest",
    "document_link",
    "knowledge_profiles",
    "knowledge_retrieve",
    "question_words",
]
