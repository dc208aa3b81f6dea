"""A profile's knowledge: sources, the documents uploaded into them, and the passages each document is cut into.

A source is shared by every tenant that talks to its profile, or kept to one tenant; a search made for a tenant
reads the shared sources and that tenant's only (:func:`knowledge.search.knowledge_search`). The passages' search
index is PostgreSQL full text (``search_vector``, a GIN index, trigrams on the text) or, on SQLite, an FTS5 table
the database keeps in step by triggers (migration 0002). Each source also keeps the words its passages hold, with how
many passages hold each (:class:`KnowledgeWord`): what a search reads to choose the words it filters on, and on
PostgreSQL to read a misspelt or unaccented word as one the documents use. A passage may also hold its embedding, for
the profiles whose search uses vectors (:mod:`knowledge.vectors`).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.search import SearchVectorField
from django.core.exceptions import ValidationError
from django.db import models

from agents.models import validate_language
from agents.public import validate_tags  # the tags' form, shared with the knowledge settings
from knowledge.synonyms import synonyms_cleaned, terms_count, validate_synonyms

EDIT_PERMISSION = "knowledge.edit_knowledge"
ERROR_TOO_MANY_SYNONYMS = (
    "This tenant's knowledge sources may hold at most {limit} synonyms (the shared ones count together)."
)


class KnowledgeSource(models.Model):
    """A named set of documents of one profile, in one language, that its specialists may consult."""

    profile = models.ForeignKey("agents.AgentProfile", on_delete=models.CASCADE, related_name="knowledge_sources")
    tenant = models.ForeignKey(
        "tenants.Tenant",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="knowledge_sources",
        help_text="Blank: the profile's conversations with every tenant may read it. Set: only this tenant's.",
    )
    name = models.CharField(max_length=200)
    language = models.CharField(
        max_length=8,
        default="pt",
        validators=[validate_language],
        help_text="The language of its documents unless a document says another (pt, es, en): search stems by it.",
    )
    tags = models.JSONField(
        default=list, blank=True, validators=[validate_tags], help_text="Words a search may filter on, e.g. billing."
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="Who keeps these documents up to date.",
    )
    enabled = models.BooleanField(default=True, help_text="Off: searches skip its documents.")
    synonyms = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_synonyms],
        help_text="Groups of equivalent terms a search reads as one (knowledge.synonyms), e.g. moda praia, biquíni.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["profile", "name"]
        constraints = [models.UniqueConstraint(fields=["profile", "name"], name="knowledge_source_unique_name")]
        permissions = [("edit_knowledge", "Can edit knowledge: sources, their documents and uploads")]

    def __str__(self) -> str:
        return f"{self.name} ({self.profile.agent_id})"

    def clean(self) -> None:
        """Its synonyms stored cleaned (:func:`knowledge.synonyms.synonyms_cleaned`), and within its tenant's bound
        (``KNOWLEDGE_MAX_SYNONYM_TERMS``: the shared sources count together, as for documents)."""
        super().clean()
        try:
            self.synonyms = synonyms_cleaned(self.synonyms)
        except ValidationError:
            return  # said by the field's validator
        if not self.synonyms:
            return
        others = KnowledgeSource.objects.filter(
            models.Q(tenant__isnull=True) if self.tenant_id is None else models.Q(tenant_id=self.tenant_id)
        ).exclude(pk=self.pk)
        held = sum(terms_count(groups or ()) for groups in others.values_list("synonyms", flat=True))
        if held + terms_count(self.synonyms) > settings.KNOWLEDGE_MAX_SYNONYM_TERMS:
            limit = settings.KNOWLEDGE_MAX_SYNONYM_TERMS
            raise ValidationError({"synonyms": ERROR_TOO_MANY_SYNONYMS.format(limit=limit)})


class DocumentKind(models.TextChoices):
    MARKDOWN = "markdown", "Markdown"
    HTML = "html", "HTML"
    TEXT = "text", "Plain text"
    PDF = "pdf", "PDF"


class KnowledgeDocument(models.Model):
    """One uploaded file (or pasted text) of a source. Its ``file_name`` is its identity in the source: uploading a
    file of the same name again replaces it. Its content never changes once a published version holds it
    (``held_by``): a new upload of its file name, or its deletion, then marks it ``replaced_at`` and leaves it to the
    versions that hold it, the draft reading the new one (:mod:`knowledge.versions`)."""

    source = models.ForeignKey(KnowledgeSource, on_delete=models.CASCADE, related_name="documents")
    title = models.CharField(max_length=300)
    file_name = models.CharField(max_length=255)
    kind = models.CharField(max_length=16, choices=DocumentKind.choices)
    language = models.CharField(max_length=8, validators=[validate_language])
    tags = models.JSONField(default=list, blank=True, validators=[validate_tags])
    content_hash = models.CharField(max_length=64, help_text="SHA-256 of the uploaded bytes.")
    size_bytes = models.PositiveIntegerField(default=0)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    uploaded_at = models.DateTimeField()
    replaced_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a new upload of its file name, or its deletion, took it out of the draft (blank: the draft's). "
        "Kept while a version customers or a rollout are served holds it.",
    )
    held_by = models.JSONField(
        default=list,
        blank=True,
        help_text="The numbers of the profile's versions served (live, or a rollout's candidate) that hold it, as "
        "their last publish recorded them.",
    )
    # The vector search (knowledge.vectors): the embeddings model its passages' vectors are of (blank: none, the
    # search reads it by its words alone), or why they could not be embedded.
    embedding_model = models.CharField(max_length=200, blank=True, editable=False)
    embedding_error = models.TextField(blank=True, editable=False)

    class Meta:
        ordering = ["source", "file_name", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["source", "file_name"],
                condition=models.Q(replaced_at__isnull=True),
                name="knowledge_document_unique_file_name",
            )
        ]

    def __str__(self) -> str:
        return self.title


class KnowledgePassage(models.Model):
    """A bounded piece of a document under its heading path (``Billing › Refunds``), in document order."""

    document = models.ForeignKey(KnowledgeDocument, on_delete=models.CASCADE, related_name="passages")
    position = models.PositiveIntegerField()
    heading = models.CharField(max_length=500, blank=True)
    text = models.TextField()
    # PostgreSQL's weighted tsvector of heading and text in the document's language; unused (NULL) on SQLite.
    search_vector = SearchVectorField(null=True, blank=True)
    # Its heading and text embedded by the model its document names (float32 bytes, L2-normalised); NULL when not.
    embedding = models.BinaryField(null=True, blank=True, editable=False)
    # SQLite: the Snowball stems of its words (knowledge.words.passage_stems), which its FTS5 table indexes beside
    # heading and text; empty on PostgreSQL, whose configurations stem.
    stems = models.TextField(blank=True, default="", editable=False)

    class Meta:
        ordering = ["document", "position"]
        constraints = [
            models.UniqueConstraint(fields=["document", "position"], name="knowledge_passage_unique_position")
        ]

    def __str__(self) -> str:
        return f"{self.document} #{self.position}"


class KnowledgeWord(models.Model):
    """A word some passage of a source holds, as written (lower case) and folded (case and accents aside), its first
    letters (``stem``, :data:`agents.passages.STEM_CHARS`), and how many of the source's passages hold it. Written
    with the passages (:func:`knowledge.services.document_ingest`), counted down when a document is replaced or
    deleted (:func:`knowledge.services.document_delete`), deleted with its source."""

    source = models.ForeignKey(KnowledgeSource, on_delete=models.CASCADE, related_name="+")
    word = models.CharField(max_length=64)
    folded = models.CharField(max_length=64)
    stem = models.CharField(max_length=8)
    passages = models.IntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["source", "word"], name="knowledge_word_unique")]
        indexes = [models.Index(fields=["source", "stem"], name="knowledge_word_stem")]

    def __str__(self) -> str:
        return self.word


class UploadStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    INDEXING = "indexing", "Indexing"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class KnowledgeUpload(models.Model):
    """A file handed to a source, read into a document by a Celery worker where a broker exists and in the request
    otherwise (:mod:`knowledge.uploads`): its status, and once read, what it changed (``report``) or why it was refused
    (``error``). Its bytes are kept only until it is read."""

    source = models.ForeignKey(KnowledgeSource, on_delete=models.CASCADE, related_name="uploads")
    file_name = models.CharField(max_length=255)
    title = models.CharField(max_length=300, blank=True)
    language = models.CharField(max_length=8, blank=True)
    tags = models.JSONField(default=list, blank=True)
    data = models.BinaryField(default=bytes, editable=False)
    size_bytes = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=UploadStatus.choices, default=UploadStatus.QUEUED)
    report = models.JSONField(default=dict, blank=True, help_text="What reading it changed: passages added, removed.")
    error = models.TextField(blank=True)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["source", "-created_at"], name="knowledge_upload_recent")]

    def __str__(self) -> str:
        return f"{self.file_name} ({self.status})"
