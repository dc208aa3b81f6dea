"""The admin of the profiles' knowledge: a source's page lists its documents (with their passages) and its latest
uploads (their status, and what each changed), its synonyms (one group a line), and its upload page takes files or
pasted text. Reading takes ``view_knowledgesource``; every change, upload and delete takes
``knowledge.edit_knowledge`` (the "Routing editors" hold both)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from common.language import LANGUAGES
from knowledge.models import (
    EDIT_PERMISSION,
    KnowledgeDocument,
    KnowledgePassage,
    KnowledgeSource,
    KnowledgeUpload,
    UploadStatus,
    validate_tags,
)
from knowledge.reading import SUFFIXES
from knowledge.services import IngestReport, document_delete
from knowledge.synonyms import synonyms_cleaned, synonyms_parsed, synonyms_written
from knowledge.uploads import uploads_queue
from knowledge.vectors import document_vectors_state, embed_queue

PASTED_SUFFIX = ".txt"
DRAFT_DOCUMENTS = Q(documents__replaced_at__isnull=True)  # a source's counts: its draft's documents


def may_edit(request: HttpRequest) -> bool:
    return request.user.has_perm(EDIT_PERMISSION)


def report_words(report: IngestReport) -> str:
    """One line for the editor: what an upload did to a document and its passages."""
    if report.outcome == "unchanged":
        return f"{report.file_name}: unchanged ({report.passages} passages)."
    vectors = f" Vectors: {report.vectors}." if report.vectors else ""
    return (
        f"{report.file_name}: {report.outcome}, {report.passages} passages "
        f"({report.added} added, {report.removed} removed, {report.kept} kept).{vectors}"
    )


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files in one field (Django's documented recipe)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", MultipleFileInput(attrs={"accept": ",".join(SUFFIXES)}))
        super().__init__(*args, **kwargs)

    def clean(self, data: Any, initial: Any = None) -> Any:
        single = super().clean
        if isinstance(data, list | tuple):
            return [single(item, initial) for item in data]
        return [single(data, initial)] if data else []


class UploadForm(forms.Form):
    uploads = MultipleFileField(required=False, help_text="Markdown, HTML, plain text or PDF.")
    title = forms.CharField(max_length=300, required=False, help_text="For pasted text; a file's own title wins.")
    pasted = forms.CharField(widget=forms.Textarea(attrs={"rows": 12}), required=False, label="Or paste text")
    pasted_name = forms.CharField(
        max_length=200, required=False, label="Pasted text's name", help_text="Pasting under the same name replaces it."
    )
    language = forms.ChoiceField(choices=[("", "the source's"), *((code, code) for code in LANGUAGES)], required=False)
    tags = forms.CharField(required=False, help_text="Comma-separated, e.g. billing, refunds.")

    def clean_tags(self) -> list[str]:
        tags = [tag.strip() for tag in self.cleaned_data["tags"].split(",") if tag.strip()]
        validate_tags(tags)
        return tags

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not data.get("uploads") and not data.get("pasted", "").strip():
            raise ValidationError("Choose files to upload or paste text.")
        if data.get("pasted", "").strip() and not data.get("pasted_name", "").strip():
            self.add_error("pasted_name", "Name the pasted text: pasting under the same name replaces it.")
        return data


def document_state(document: KnowledgeDocument) -> str:
    """Whether a document is the draft's or replaced, and which versions served hold it."""
    state = (
        "the draft's"
        if document.replaced_at is None
        else f"replaced {document.replaced_at:%Y-%m-%d %H:%M} (out of the draft)"
    )
    if document.held_by:
        numbers = ", ".join(str(number) for number in document.held_by)
        return f"{state}; held by version {numbers}"
    return f"{state}; in no version served"


class DocumentFormSet(forms.BaseInlineFormSet):
    def delete_existing(self, obj: Any, commit: bool = True) -> None:
        if commit:
            document_delete(document=obj)  # its words counted out of the source's


class DocumentInline(admin.TabularInline):
    model = KnowledgeDocument
    formset = DocumentFormSet
    extra = 0
    fields = (
        "title", "file_name", "kind", "language", "tags", "passages_count", "versions", "vectors", "uploaded_by",
        "uploaded_at",
    )  # fmt: skip
    readonly_fields = fields
    show_change_link = True  # its page: the passages an answer cites

    @admin.display(description="versions")
    def versions(self, obj: Any) -> str:
        return document_state(obj)

    @admin.display(description="vectors")
    def vectors(self, obj: Any) -> str:
        return document_vectors_state(obj)

    def get_queryset(self, request: HttpRequest) -> QuerySet[KnowledgeDocument]:
        return super().get_queryset(request).select_related("uploaded_by").annotate(passage_total=Count("passages"))

    @admin.display(description="passages")
    def passages_count(self, obj: Any) -> int:
        return obj.passage_total

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # documents come in through the upload page

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return may_edit(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm("knowledge.view_knowledgesource") or may_edit(request)


class ReadOnlyInline(admin.TabularInline):
    """Rows a source's or a document's page lists and nobody edits there: read with the view permission."""

    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm("knowledge.view_knowledgesource") or may_edit(request)


class UploadInline(ReadOnlyInline):
    """The source's latest uploads (:data:`knowledge.uploads.UPLOADS_KEPT`): queued, being read, done or refused."""

    model = KnowledgeUpload
    fields = ("file_name", "status", "outcome", "uploaded_by", "created_at", "finished_at")
    readonly_fields = fields
    verbose_name_plural = "latest uploads"

    def get_queryset(self, request: HttpRequest) -> QuerySet[KnowledgeUpload]:
        return super().get_queryset(request).select_related("uploaded_by").defer("data")

    @admin.display(description="what it changed, or why it was refused")
    def outcome(self, obj: Any) -> str:
        if obj.status == UploadStatus.FAILED:
            return obj.error
        if obj.status == UploadStatus.DONE and obj.report:
            return report_words(IngestReport(**obj.report))
        return "—"


class PassageInline(ReadOnlyInline):
    model = KnowledgePassage
    fields = ("position", "heading", "text")
    readonly_fields = fields


@admin.register(KnowledgeDocument)
class KnowledgeDocumentAdmin(admin.ModelAdmin):
    """A document's page, read only: its passages in order, the page an answer's citation links to
    (:func:`knowledge.retrieval.document_link`). Documents come in, and are replaced, through their source's upload
    page; deleting one takes the edit permission."""

    list_display = ("title", "source", "file_name", "language", "uploaded_at", "versions", "vectors")
    list_filter = ("language", "source__profile")
    search_fields = ("title", "file_name", "source__name")
    list_select_related = ("source__profile",)
    fields = (
        "source", "title", "file_name", "kind", "language", "tags", "size_bytes", "uploaded_by", "uploaded_at",
        "versions", "vectors",
    )  # fmt: skip
    readonly_fields = fields
    inlines = [PassageInline]

    @admin.display(description="versions")
    def versions(self, obj: Any) -> str:
        """The draft's or replaced, and the versions served that hold it: a published version answers from the
        documents it was published with (:mod:`knowledge.versions`)."""
        return document_state(obj)

    @admin.display(description="vectors")
    def vectors(self, obj: Any) -> str:
        """Whether its passages are embedded, by which model, or why not (:mod:`knowledge.vectors`)."""
        return document_vectors_state(obj)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        document_delete(document=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[KnowledgeDocument]) -> None:
        for document in queryset:
            document_delete(document=document)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return may_edit(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm("knowledge.view_knowledgesource") or may_edit(request)


class SourceForm(forms.ModelForm):
    """A source's settings, its synonyms written one group a line (:mod:`knowledge.synonyms`)."""

    synonyms = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6}),
        required=False,
        help_text=(
            "One group of equivalent terms a line, separated by commas (moda praia, biquíni, maiô): a search reads "
            "them as one. Part of the profile's versions: customers are served them once the profile is published."
        ),
    )

    class Meta:
        model = KnowledgeSource
        fields = ("profile", "tenant", "name", "language", "tags", "owner", "enabled", "synonyms")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.is_bound:
            self.initial["synonyms"] = synonyms_written(self.instance.synonyms or [])

    def clean_synonyms(self) -> list[list[str]]:
        return synonyms_cleaned(synonyms_parsed(self.cleaned_data.get("synonyms") or ""))


@admin.register(KnowledgeSource)
class KnowledgeSourceAdmin(admin.ModelAdmin):
    list_display = ("name", "profile", "tenant", "language", "enabled", "documents_count", "passages_count")
    list_filter = ("enabled", "language", "profile")
    search_fields = ("name", "profile__agent_id")
    list_select_related = ("profile", "tenant")
    form = SourceForm
    fields = ("profile", "tenant", "name", "language", "tags", "owner", "enabled", "synonyms")
    inlines = [DocumentInline, UploadInline]
    actions = ["embed_again"]

    @admin.action(
        description="Embed their profiles' documents not embedded by the configured model", permissions=["edit"]
    )
    def embed_again(self, request: HttpRequest, queryset: QuerySet[KnowledgeSource]) -> None:
        """For a profile whose search uses vectors: after a change of model, for documents uploaded before vectors were
        on, or after the endpoint failed (:func:`knowledge.vectors.embed_queue`)."""
        self.message_user(request, embed_queue(queryset.values_list("profile_id", flat=True)))

    def has_edit_permission(self, request: HttpRequest) -> bool:
        return may_edit(request)

    def get_inlines(self, request: HttpRequest, obj: Any) -> list[type[admin.options.InlineModelAdmin]]:
        return [DocumentInline] if obj is None else [DocumentInline, UploadInline]  # a new source has no uploads

    def get_queryset(self, request: HttpRequest) -> QuerySet[KnowledgeSource]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                document_total=Count("documents", filter=DRAFT_DOCUMENTS, distinct=True),
                passage_total=Count("documents__passages", filter=DRAFT_DOCUMENTS),
            )
        )

    @admin.display(description="documents", ordering="document_total")
    def documents_count(self, obj: Any) -> int:
        return obj.document_total

    @admin.display(description="passages", ordering="passage_total")
    def passages_count(self, obj: Any) -> int:
        return obj.passage_total

    def has_add_permission(self, request: HttpRequest) -> bool:
        return may_edit(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return may_edit(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return may_edit(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_view_permission(request, obj) or may_edit(request)

    def get_urls(self):
        return [
            path(
                "<path:object_id>/upload/",
                self.admin_site.admin_view(self.upload_view),
                name="knowledge_knowledgesource_upload",
            ),
            *super().get_urls(),
        ]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra_context = {**(extra_context or {}), "may_upload": may_edit(request)}
        return super().change_view(request, object_id, form_url, extra_context)

    def upload_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """GET: the form; POST: each file (and the pasted text) read into the source, one message per document."""
        source = self.get_object(request, unquote(object_id))
        if source is None:
            redirect = self._get_obj_does_not_exist_redirect  # type: ignore[attr-defined]  # private Django method
            return redirect(request, self.opts, object_id)
        if not may_edit(request):
            raise PermissionDenied
        form = UploadForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid() and self._ingest(request, source, form.cleaned_data):
            return HttpResponseRedirect(reverse("admin:knowledge_knowledgesource_change", args=[source.pk]))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "app_label": self.opts.app_label,
            "title": f"Upload to {source.name}",
            "subtitle": None,
            "original": source,
            "form": form,
        }
        return TemplateResponse(request, "admin/knowledge/knowledgesource/upload.html", context)

    def _ingest(self, request: HttpRequest, source: KnowledgeSource, data: dict[str, Any]) -> bool:
        """Each upload on its own: one refused file does not stop the others. True when none was refused (a queued
        one is read by a worker: its status is on the source's page)."""
        # One byte past the bound is enough to refuse a file: a huge upload is never read whole.
        limit = settings.KNOWLEDGE_MAX_FILE_BYTES + 1
        files = [(upload.name, upload.read(limit), "") for upload in data["uploads"]]
        if data["pasted"].strip():
            files.append((data["pasted_name"].strip() + PASTED_SUFFIX, data["pasted"].encode(), data["title"]))
        uploads = uploads_queue(
            source=source, files=files, language=data["language"], tags=data["tags"], user=request.user
        )
        for upload in uploads:
            if upload.status == UploadStatus.FAILED:
                self.message_user(request, f"{upload.file_name}: {upload.error}", messages.ERROR)
                continue
            self.log_change(request, source, [{"changed": {"name": "document", "object": upload.file_name}}])
            if upload.status == UploadStatus.DONE:
                self.message_user(request, report_words(IngestReport(**upload.report)), messages.SUCCESS)
            else:
                queued = f"{upload.file_name}: queued, read in the background; its status is under latest uploads."
                self.message_user(request, queued, messages.INFO)
        return all(upload.status != UploadStatus.FAILED for upload in uploads)
