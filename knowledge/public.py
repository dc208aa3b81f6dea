"""The door of ``knowledge/`` (docs/architecture.md, "Doors"): the search over a profile's passages, for the snapshot
and the engine; a document's upload, for the demo's seed; the documents and the synonyms a profile's versions hold,
for its documents and its publishes; its sources as plain data, for the YAML export and import; and the words of a
question, for the analytics. Its models are imported from ``knowledge.models``."""

from __future__ import annotations

from knowledge.exchange import SOURCE_FIELDS, knowledge_exported, source_import
from knowledge.reading import KnowledgeReadError
from knowledge.retrieval import (
    Considered,
    Retrieved,
    document_link,
    knowledge_profiles,
    knowledge_retrieve,
    knowledge_retrieve_followed,
)
from knowledge.services import CREATED, REPLACED, UNCHANGED, document_ingest, documents_hold
from knowledge.synonyms import Held as SynonymsHeld
from knowledge.synonyms import document_synonyms, synonyms_cleaned
from knowledge.versions import document_keys, knowledge_documents, knowledge_held
from knowledge.words import question_words

__all__ = [
    "CREATED",
    "REPLACED",
    "SOURCE_FIELDS",
    "UNCHANGED",
    "Considered",
    "KnowledgeReadError",
    "Retrieved",
    "SynonymsHeld",
    "document_ingest",
    "document_keys",
    "document_link",
    "document_synonyms",
    "documents_hold",
    "knowledge_documents",
    "knowledge_exported",
    "knowledge_held",
    "knowledge_profiles",
    "knowledge_retrieve",
    "knowledge_retrieve_followed",
    "question_words",
    "source_import",
    "synonyms_cleaned",
]
