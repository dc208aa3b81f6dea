"""Import and export of the configuration in the admin (docs/versions.md "Import and export in the admin").

"Import configuration" takes uploaded (or pasted) YAML files and imports them like ``manage.py import_config``
(a routing tests file — ``profile:`` and ``tests:`` — like ``manage.py routing_test --file``, and a conversation
tests file — ``profile:`` and ``conversation_tests:`` —: their tests are added or updated by name, for users who may
add and change them):
"Dry run" shows, per profile, what would change in words and the problems as ``file:line: path: message``;
"Import into the drafts" writes them into the drafts and shows the same changes, with a link to each changed
profile's "Publish draft" page. It never publishes. "Download the draft" gives a profile's YAML files in a zip
(re-importable: importing it changes nothing), "Download version N" a published version's document as JSON.

The pages hang off the Intent admin (its changelist links to them; :class:`ConfigPages`); they need
``routing.change_intent``.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from functools import partial
from typing import Any

from django import forms
from django.contrib.admin import ModelAdmin
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse

from agents.models import AgentProfile
from common.adminkit import AdminExtension, admin_extend
from releases.configio import ConfigImportError, Source, config_import
from releases.configio.exporter import HEADER, config_export_data, dump, goals_file_name, routing_file_name
from releases.configio.rights import IMPORT_PERMISSION
from releases.configio.source import plain_value
from releases.evals.transfer import (
    ConversationTestsImportRefused,
    conversation_tests_files,
    conversation_tests_import,
    is_conversation_tests_file,
)
from releases.routing_tests import LoadReport, RoutingTestsFileError, routing_tests_load, routing_tests_parse
from releases.versions import Change, document_diff, document_masked
from routing.models import Intent, RoutingVersion
from routing.public import profile_documents

TESTS_PERMISSIONS = ("releases.add_routingtestcase", "releases.change_routingtestcase")
YAML_SUFFIXES = (".yaml", ".yml")
MAX_FILE_BYTES = 2 * 1024 * 1024


def may_edit_config(request: HttpRequest) -> bool:
    return bool(request.user.is_active and request.user.is_staff and request.user.has_perm(IMPORT_PERMISSION))


def may_download(request: HttpRequest) -> bool:
    """A draft's files and a version's document: for who edits the configuration or reads its versions (the release
    approvers review what they approve)."""
    return may_edit_config(request) or bool(request.user.has_perm("routing.view_routingversion"))


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput(attrs={"accept": ".yaml,.yml"}))
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        if isinstance(data, (list, tuple)):
            return [single(item, initial) for item in data]
        return [single(data, initial)] if data else []


class ImportForm(forms.Form):
    yaml_files = MultipleFileField(required=False, label="YAML files", help_text="One or more .yaml files.")
    text = forms.CharField(
        required=False,
        label="Or paste YAML",
        widget=forms.Textarea(attrs={"rows": 12, "cols": 100, "class": "vLargeTextField"}),
    )
    text_name = forms.CharField(
        required=False,
        initial="pasted.yaml",
        label="File name of the pasted YAML",
        help_text=(
            "agents.yaml, tools.yaml, mcp_servers.yaml, routing.<agent_id>.yaml, goals.<domain>.yaml, a routing "
            "tests file (profile: and tests:) or a conversation tests file (profile: and conversation_tests:)."
        ),
    )
    profile = forms.ModelChoiceField(
        queryset=AgentProfile.objects.order_by("agent_id"),
        to_field_name="agent_id",
        required=False,
        label="Profile for routing files without agent_id",
    )

    def clean(self):
        cleaned = super().clean() or {}
        sources: list[Source] = []
        for upload in cleaned.get("yaml_files") or []:
            if not upload.name.endswith(YAML_SUFFIXES):
                self.add_error("yaml_files", f"{upload.name}: not a .yaml file.")
                continue
            if upload.size > MAX_FILE_BYTES:
                self.add_error("yaml_files", f"{upload.name}: larger than {MAX_FILE_BYTES // 1024 // 1024} MB.")
                continue
            try:
                sources.append(Source(name=upload.name, text=upload.read().decode("utf-8")))
            except UnicodeDecodeError:
                self.add_error("yaml_files", f"{upload.name}: not UTF-8 text.")
        if (cleaned.get("text") or "").strip():
            sources.append(Source(name=cleaned.get("text_name") or "pasted.yaml", text=cleaned["text"]))
        if not sources and not self.errors:
            raise forms.ValidationError("Upload a .yaml file or paste YAML.")
        cleaned["sources"] = sources
        return cleaned


@dataclass
class ProfileChanges:
    """What an import did (or would do) to one profile's draft."""

    profile: AgentProfile | None
    agent_id: str
    changes: list[Change]

    @property
    def publish_url(self) -> str | None:
        if self.profile is None:
            return None
        return reverse("admin:agents_agentprofile_publish", args=[self.profile.pk])


def import_sources(
    sources: list[Source], *, profile: str | None = None, user=None, dry_run: bool
) -> tuple[list[ProfileChanges], list[str]]:
    """Import ``sources`` (or try them, ``dry_run``): the changed profiles' changes and the warnings.

    Raises :class:`ConfigImportError` when the files are refused (nothing written)."""
    before = profile_documents()
    after: dict[str, dict[str, Any]] = {}
    report = config_import(
        sources=sources,
        profile=profile,
        user=user,
        dry_run=dry_run,
        written=lambda: after.update(profile_documents()),
    )
    changed = sorted(agent_id for agent_id, document in after.items() if before.get(agent_id) != document)
    profiles = AgentProfile.objects.in_bulk(changed, field_name="agent_id")
    result = [
        ProfileChanges(
            profile=None if dry_run and agent_id not in before else profiles.get(agent_id),
            agent_id=agent_id,
            changes=document_diff(before.get(agent_id), after[agent_id]),
        )
        for agent_id in changed
    ]
    return result, report.warnings


def is_tests_file(source: Source) -> bool:
    """A routing tests file (``profile:`` and ``tests:``) rather than configuration: what the importer hands to
    :func:`routing_tests_parse`. A file that is not YAML is the configuration importer's to report."""
    data = plain_value(source.text)  # within the importer's bounds: an alias bomb or deep nesting is its to report
    return isinstance(data, dict) and "tests" in data and not {"agents", "intents", "agent_id"} & set(data)


@dataclass
class TestsLoaded:
    """What importing one routing tests file did (or would do) to a profile's saved tests."""

    file: str
    agent_id: str
    report: LoadReport


class TestsImportRefused(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__(f"{len(problems)} problem(s) in the routing tests; nothing was imported.")
        self.messages = problems


def tests_import(sources: list[Source], *, user: Any) -> list[TestsLoaded]:
    """Add or update the tests of each routing tests file, by name (none is deleted). Raises
    :class:`TestsImportRefused` with every problem (unreadable files, unknown profiles, missing permissions)."""
    if not sources:
        return []
    missing = [permission for permission in TESTS_PERMISSIONS if not user.has_perm(permission)]
    if missing:
        names = ", ".join(source.name for source in sources)
        raise TestsImportRefused([f"{names}: importing routing tests needs the permission(s) {', '.join(missing)}."])
    parsed: list[tuple[Source, str, list[Any]]] = []
    problems: list[str] = []
    for source in sources:
        try:
            agent_id, cases = routing_tests_parse(source.text, name=source.name)
        except RoutingTestsFileError as exc:
            problems.extend(exc.problems)
            continue
        parsed.append((source, agent_id, cases))
    profiles = AgentProfile.objects.in_bulk([agent_id for _, agent_id, _ in parsed], field_name="agent_id")
    unknown = [(source.name, agent_id) for source, agent_id, _ in parsed if agent_id not in profiles]
    problems.extend(f"{name}: profile: no profile {agent_id!r}." for name, agent_id in unknown)
    if problems:
        raise TestsImportRefused(problems)
    return [
        TestsLoaded(source.name, agent_id, routing_tests_load(profile=profiles[agent_id], cases=cases))
        for source, agent_id, cases in parsed
    ]


def profile_files(profile: AgentProfile) -> dict[str, str]:
    """The YAML files of one profile's draft: agents.yaml with it alone, its routing file, the servers and tools,
    its domain's goals file and its conversation tests. Importing them changes nothing."""
    data = config_export_data()
    agents = [entry for entry in data["agents.yaml"]["agents"] if entry["agent_id"] == profile.agent_id]
    files: dict[str, dict[str, Any]] = {
        "mcp_servers.yaml": data["mcp_servers.yaml"],
        "tools.yaml": data["tools.yaml"],
        "agents.yaml": {"agents": agents},
        routing_file_name(profile.agent_id): data[routing_file_name(profile.agent_id)],
    }
    goals = goals_file_name(profile.domain) if profile.domain else None
    if goals and goals in data:
        files[goals] = data[goals]
    return {name: HEADER + dump(content) for name, content in files.items()} | conversation_tests_files([profile])


def profile_zip(profile: AgentProfile) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in profile_files(profile).items():
            archive.writestr(name, text)
    return buffer.getvalue()


class ConfigPages(AdminExtension):
    """The Intent admin's (the routing app's) configuration import page and downloads, linked from its list."""

    change_list_template = "admin/routing/config/intent_change_list.html"

    def urls(self, model_admin: ModelAdmin[Any]) -> list[Any]:
        wrap = model_admin.admin_site.admin_view
        return [
            path("config/import/", wrap(partial(self.import_view, model_admin)), name="routing_config_import"),
            path("config/draft/<int:profile_pk>/", wrap(self.draft_download_view), name="routing_config_draft"),
            path(
                "config/version/<int:version_pk>/",
                wrap(self.version_download_view),
                name="routing_config_version",
            ),
        ]

    def import_view(self, model_admin: ModelAdmin[Any], request: HttpRequest) -> HttpResponse:
        if not may_edit_config(request):
            raise PermissionDenied
        context: dict[str, Any] = {
            **model_admin.admin_site.each_context(request),
            "opts": model_admin.model._meta,
            "title": "Import configuration",
            "profiles": AgentProfile.objects.order_by("agent_id"),
        }
        form = ImportForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            dry_run = "_import" not in request.POST
            profile = form.cleaned_data.get("profile")
            context["dry_run"] = dry_run
            context["file_names"] = [source.name for source in form.cleaned_data["sources"]]
            sources = form.cleaned_data["sources"]
            conversation = [source for source in sources if is_conversation_tests_file(source)]
            tests = [source for source in sources if source not in conversation and is_tests_file(source)]
            config = [source for source in sources if source not in tests and source not in conversation]
            try:
                with transaction.atomic():  # the configuration and the tests, or nothing
                    changed, warnings = (
                        import_sources(
                            config, profile=profile.agent_id if profile else None, user=request.user, dry_run=dry_run
                        )
                        if config
                        else ([], [])
                    )
                    loaded = tests_import(tests, user=request.user)
                    conversations_loaded = conversation_tests_import(conversation, user=request.user)
                    transaction.set_rollback(dry_run)
            except ConfigImportError as exc:
                context.update(refused=str(exc), problems=exc.messages, warnings=exc.warnings)
            except (TestsImportRefused, ConversationTestsImportRefused) as exc:
                context.update(refused=str(exc), problems=exc.messages)
            else:
                context.update(
                    done=True,
                    changed=changed,
                    warnings=warnings,
                    tests_loaded=loaded,
                    conversation_tests_loaded=conversations_loaded,
                )
        context["form"] = form
        return TemplateResponse(request, "admin/routing/config/import.html", context)

    def draft_download_view(self, request: HttpRequest, profile_pk: int) -> HttpResponse:
        if not may_download(request):
            raise PermissionDenied
        profile = get_object_or_404(AgentProfile, pk=profile_pk)
        response = HttpResponse(profile_zip(profile), content_type="application/zip")
        response["Content-Disposition"] = f'attachment; filename="{profile.agent_id}-draft.zip"'
        return response

    def version_download_view(self, request: HttpRequest, version_pk: int) -> HttpResponse:
        if not may_download(request):
            raise PermissionDenied
        version = get_object_or_404(RoutingVersion.objects.select_related("profile"), pk=version_pk)
        body = json.dumps(document_masked(version.document), ensure_ascii=False, indent=2, sort_keys=True)
        response = HttpResponse(body, content_type="application/json")
        name = f"{version.profile.agent_id}-version-{version.number}.json"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response


admin_extend(Intent, ConfigPages())
