"""The business users' workspace for routing: intents and keywords, state policies, goals and capabilities,
rollout flags.

Writes go through the services where a rule lives there (the keyword rule,
rollout flags and their history); bulk actions save per object
inside :func:`config_batch` so the invalidation signals fire and the compiled
routing is rebuilt once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.options import IS_POPUP_VAR
from django.contrib.admin.utils import unquote
from django.contrib.admin.views.autocomplete import AutocompleteJsonView
from django.contrib.admin.widgets import AutocompleteSelect
from django.contrib.auth import get_permission_codename
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.formats import localize
from django.utils.html import format_html, format_html_join
from django.utils.timezone import localtime

from agents.models import AgentProfile, McpServer, McpTool, Specialist
from agents.public import (
    SpecialistListFilter,
    profile_translations_missing,
    servers_sync_messages,
    specialist_choices,
    specialist_translations_missing,
)
from common.adminkit import AdminExtension, ExtensibleAdmin, ReadOnlyAdminMixin, admin_extend
from common.config_version import config_batch
from common.forms import LinesField, PrettyJSONField, label_choices
from common.history.admin import FieldHistoryAdminMixin
from common.history.registry import user_id_pseudonym
from common.personal_data import pseudonym_shaped
from common.translation_forms import missing_warning, translation_boxes, translations_form
from routing import admin_views
from routing.admin_views import may_publish
from routing.forms import (
    IntentAdminForm,
    IntentChangelistForm,
    KeywordAdminForm,
    KeywordInlineForm,
    KeywordInlineFormSet,
    StatePolicyAdminForm,
    exclusion_written,
)
from routing.goals.planner import GOAL_TRANSLATED
from routing.models import (
    INTENT_TRANSLATED,
    Capability,
    Goal,
    Intent,
    Keyword,
    RolloutFlag,
    RolloutFlagChange,
    RolloutTenantOverride,
    RolloutUserOverride,
    StatePolicy,
    Stickiness,
)
from routing.selectors import (
    goal_language,
    goal_translations_missing,
    intent_translations_missing,
    live_version,
    profile_goals,
)
from routing.services import (
    keywords_validate_unique,
    rollout_actor_admin,
    rollout_actor_words,
    rollout_flag_delete,
    rollout_flag_set,
    rollout_tenant_override_set,
    rollout_user_override_set,
)
from tenants.models import Tenant

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django_stubs_ext import WithAnnotations

# -- shared pieces ---------------------------------------------------------------


def intent_label(intent: Intent) -> str:
    """How an intent is named wherever one is chosen: with its profile, as specialists are (two profiles may each
    have a "support_request")."""
    return f"{intent.profile.agent_id}/{intent.name}"


class IntentAutocompleteView(AutocompleteJsonView):
    """The intent picker's choices (``routing/intent/autocomplete/``): the admin's own, each named with its
    profile (:func:`intent_label`)."""

    def get_queryset(self) -> QuerySet[Intent]:
        # The admin's queryset counts keywords (a GROUP BY, which drops the model's ordering): ordered again, by
        # profile first, as the labels read.
        return super().get_queryset().select_related("profile").order_by(*(Intent._meta.ordering or ()))

    def serialize_result(self, obj: Any, to_field_name: str) -> dict[str, Any]:
        return {**super().serialize_result(obj, to_field_name), "text": intent_label(obj)}


class IntentAutocompleteSelect(AutocompleteSelect):
    """An intent picker that asks :class:`IntentAutocompleteView` for its choices."""

    def get_url(self) -> str:
        return reverse(f"{self.admin_site.name}:routing_intent_autocomplete")


DRAFT_NOTE = 'Saved to the draft of {profile} — <a href="{url}">publish</a> to serve it.'
DRAFT_NOTE_NO_PUBLISH = "Saved to the draft of {profile}: customers get it once it is published."


class DraftNoteMixin:
    """After an add or change page saves a row of a profile whose customers are served a published version, a note
    says the change went to the draft — with a link to publish it, for a user who may. A profile never published
    serves its draft, and gets no note — unless it needs a second person (then it serves no draft)."""

    def draft_profile(self, obj: Any) -> AgentProfile:
        raise NotImplementedError

    def response_add(self, request: HttpRequest, obj: Any, post_url_continue: str | None = None) -> HttpResponse:
        response = super().response_add(request, obj, post_url_continue)  # type: ignore[misc]
        self._draft_note(request, obj)
        return response

    def response_change(self, request: HttpRequest, obj: Any) -> HttpResponse:
        response = super().response_change(request, obj)  # type: ignore[misc]
        self._draft_note(request, obj)
        return response

    def _draft_note(self, request: HttpRequest, obj: Any) -> None:
        if IS_POPUP_VAR in request.POST:
            return
        profile = self.draft_profile(obj)
        if live_version(profile) is None and not profile.release_needs_approval:
            return
        if may_publish(request):
            url = reverse("admin:agents_agentprofile_publish", args=[profile.pk])
            messages.info(request, format_html(DRAFT_NOTE, profile=profile.agent_id, url=url))
        else:
            messages.info(request, DRAFT_NOTE_NO_PUBLISH.format(profile=profile.agent_id))


def staff_user(request: HttpRequest) -> User:
    """Who makes a change in the admin: always a signed-in user (the admin site lets no one else in)."""
    user = request.user
    if not user.is_authenticated:
        raise PermissionDenied
    return user


# What the admins' get_queryset() annotate, read by their list columns.
class _IntentTotals(TypedDict):
    keyword_total: int


class _FlagTotals(TypedDict):
    user_override_total: int
    tenant_override_total: int


# -- routing content -------------------------------------------------------------


class KeywordInline(admin.TabularInline):
    model = Keyword
    form = KeywordInlineForm
    formset = KeywordInlineFormSet
    fields = ["text", "exclusions", "languages"]
    extra = 5
    verbose_name_plural = (
        "keywords (matched case- and accent-insensitively, on word boundaries; “Not in”: phrases where one does not "
        "count; “Only in”: the languages it counts in, none ticked for every language)"
    )


@admin.register(Intent)
class IntentAdmin(ExtensibleAdmin, DraftNoteMixin, FieldHistoryAdminMixin, admin.ModelAdmin):
    form = IntentAdminForm
    inlines = [KeywordInline]
    list_display = [
        "name",
        "profile",
        "specialist_name",
        "domain",
        "priority",
        "enabled",
        "keyword_count",
        "tool_names",
        "next_state",
        "updated_at",
    ]
    list_display_links = ["name"]
    list_editable = ["priority", "enabled"]
    list_filter = ["profile", ("specialist", SpecialistListFilter), "domain", "enabled"]
    list_select_related = ["profile", "specialist"]
    search_fields = ["name", "profile__agent_id", "description", "keywords__text", "keywords__normalized"]
    filter_horizontal = ["mcp_tools"]
    actions = ["enable_intents", "disable_intents"]
    save_on_top = True
    fieldsets = [
        (None, {"fields": ["profile", "name", "specialist", "domain", "priority", "enabled"]}),
        ("What it means", {"fields": ["description", "examples"]}),
        ("In other languages", {"fields": ["missing_translations", *translation_boxes(INTENT_TRANSLATED)]}),
        ("When it wins", {"fields": ["mcp_tools", "next_state", "escalate_to"]}),
    ]
    readonly_fields = ["missing_translations"]

    @admin.display(description="missing translations")
    def missing_translations(self, obj: Intent) -> str:
        if obj.pk is None:
            return "—"
        return missing_warning(intent_translations_missing(intents=[obj], language=obj.profile.language, named=False))

    def get_queryset(self, request: HttpRequest) -> QuerySet[Intent]:
        return (
            super()
            .get_queryset(request)
            .annotate(keyword_total=Count("keywords", distinct=True))
            .prefetch_related("mcp_tools")
        )

    def get_changelist_form(self, request: HttpRequest, **kwargs: Any):
        kwargs.setdefault("form", IntentChangelistForm)
        return super().get_changelist_form(request, **kwargs)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        return specialist_choices(db_field, super().formfield_for_foreignkey(db_field, request, **kwargs))

    def get_urls(self):
        urls = [
            path(
                "preview/",
                self.admin_site.admin_view(admin_views.RoutePreviewView.as_view(model_admin=self)),
                name="routing_intent_preview",
            ),
            path(
                "autocomplete/",
                self.admin_site.admin_view(IntentAutocompleteView.as_view(admin_site=self.admin_site)),
                name="routing_intent_autocomplete",
            ),
        ]
        return urls + super().get_urls()

    def draft_profile(self, obj: Intent) -> AgentProfile:
        return obj.profile

    @admin.display(description="specialist", ordering="specialist__name")
    def specialist_name(self, obj: Intent) -> str:
        return obj.specialist.name

    @admin.display(description="keywords", ordering="keyword_total")
    def keyword_count(self, obj: WithAnnotations[Intent, _IntentTotals]) -> int:
        return obj.keyword_total

    @admin.display(description="MCP tools")
    def tool_names(self, obj: Intent) -> str:
        return ", ".join(tool.name for tool in obj.mcp_tools.all()) or "—"

    @admin.action(description="Enable selected intents", permissions=["change"])
    def enable_intents(self, request: HttpRequest, queryset: QuerySet[Intent]) -> None:
        enabled = 0
        with config_batch():
            for intent in queryset.filter(enabled=False).order_by("priority", "name"):
                intent.enabled = True
                try:
                    keywords_validate_unique(intent=intent, texts=list(intent.keywords.values_list("text", flat=True)))
                except ValidationError as exc:
                    self.message_user(request, f"Not enabled: {intent.name}. {' '.join(exc.messages)}", messages.ERROR)
                    continue
                intent.save(update_fields=["enabled", "updated_at"])
                enabled += 1
        if enabled:
            self.message_user(request, f"Enabled {enabled} intent(s).", messages.SUCCESS)

    @admin.action(description="Disable selected intents", permissions=["change"])
    def disable_intents(self, request: HttpRequest, queryset: QuerySet[Intent]) -> None:
        disabled = 0
        with config_batch():
            for intent in queryset.filter(enabled=True):
                intent.enabled = False
                intent.save(update_fields=["enabled", "updated_at"])
                disabled += 1
        self.message_user(request, f"Disabled {disabled} intent(s).", messages.SUCCESS)


@admin.register(Keyword)
class KeywordAdmin(DraftNoteMixin, FieldHistoryAdminMixin, admin.ModelAdmin):
    form = KeywordAdminForm
    list_display = ["text", "not_in", "only_in", "intent", "profile", "intent_enabled", "normalized"]
    list_filter = ["intent__profile", "intent__enabled"]
    list_select_related = ["intent__profile"]
    search_fields = ["text", "normalized", "intent__name"]
    autocomplete_fields = ["intent"]

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "intent":
            kwargs["widget"] = IntentAutocompleteSelect(db_field, self.admin_site, using=kwargs.get("using"))
        formfield = super().formfield_for_foreignkey(db_field, request, **kwargs)
        if db_field.name == "intent" and formfield is not None and formfield.queryset is not None:
            formfield.queryset = formfield.queryset.select_related("profile")
            label_choices(formfield, intent_label)
        return formfield

    def draft_profile(self, obj: Keyword) -> AgentProfile:
        return obj.intent.profile

    @admin.display(description="profile", ordering="intent__profile__agent_id")
    def profile(self, obj: Keyword) -> str:
        return obj.intent.profile.agent_id

    @admin.display(description="intent enabled", boolean=True, ordering="intent__enabled")
    def intent_enabled(self, obj: Keyword) -> bool:
        return obj.intent.enabled

    @admin.display(description="not in")
    def not_in(self, obj: Keyword) -> str:
        limits = obj.exclusion_languages or {}
        written = (exclusion_written(str(phrase), limits.get(phrase, ())) for phrase in obj.exclusions or ())
        return ", ".join(written) or "—"

    @admin.display(description="only in")
    def only_in(self, obj: Keyword) -> str:
        return ", ".join(str(language) for language in obj.languages or ()) or "every language"


@admin.register(StatePolicy)
class StatePolicyAdmin(DraftNoteMixin, FieldHistoryAdminMixin, admin.ModelAdmin):
    form = StatePolicyAdminForm
    list_display = ["state", "profile", "specialist_name", "intent", "enabled", "updated_at"]
    list_editable = ["enabled"]
    list_filter = ["profile", ("specialist", SpecialistListFilter), "enabled"]
    list_select_related = ["profile", "specialist", "intent"]
    search_fields = ["state", "description", "specialist__name", "intent__name"]
    fields = ["profile", "state", "specialist", "intent", "description", "enabled"]

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        formfield = super().formfield_for_foreignkey(db_field, request, **kwargs)
        if db_field.name == "intent" and formfield is not None and formfield.queryset is not None:
            formfield.queryset = formfield.queryset.select_related("profile")
            label_choices(formfield, intent_label)
            return formfield
        return specialist_choices(db_field, formfield)

    @admin.display(description="specialist", ordering="specialist__name")
    def specialist_name(self, obj: StatePolicy) -> str:
        return obj.specialist.name

    def draft_profile(self, obj: StatePolicy) -> AgentProfile:
        return obj.profile


# -- goals and capabilities --------------------------------------------------------
# Read from the domains' manifests (routing/goals/sync.py) and edited here; a re-sync keeps what was edited. The
# "Routing editors" group may add, change and view them, not delete them (a re-sync would bring them back).


def _json_field(name: str, **kwargs: Any) -> PrettyJSONField:
    return PrettyJSONField(
        required=False,
        error_messages={"invalid": f"{name}: enter valid JSON, an object in braces ({{}} for none)."},
        **kwargs,
    )


def _synced_block(obj: Goal | Capability | None) -> str:
    if obj is None or obj.pk is None or not obj.synced:
        return "Never synced: made here."
    when = localize(localtime(obj.synced_at)) if obj.synced_at else "—"
    edited = obj.edited_fields()
    note = f"Edited since: {', '.join(edited)} (a re-sync keeps them)." if edited else "Nothing edited since."
    return format_html(
        '<p>Last sync: {}. {}</p><pre style="white-space: pre-wrap; margin: 0">{}</pre>',
        when,
        note,
        json.dumps(obj.synced, ensure_ascii=False, indent=2),
    )


GoalTranslations = translations_form({"description": "Description"}, long=["description"])


class GoalAdminForm(GoalTranslations, forms.ModelForm):  # type: ignore[valid-type,misc]  # built by a call
    examples = LinesField(required=False, help_text="One example message per line; the model reads them.")
    capabilities = LinesField(
        required=False,
        help_text="One capability name per line: the goal's capability when no enum of its entities chooses one.",
    )
    entities_schema = _json_field(
        "entities_schema",
        help_text="The entities the model extracts, as in the domain's manifest: type string, enum (with "
        "values), list or boolean; an enum's capability_map names the capability of each value.",
    )

    class Meta:
        model = Goal
        fields = [
            "server",
            "domain",
            "name",
            "enabled",
            "confidence_threshold",
            "description",
            "examples",
            "entities_schema",
            "capabilities",
        ]

    def clean_entities_schema(self) -> Any:
        value = self.cleaned_data.get("entities_schema")
        return {} if value in (None, "") else value


class CapabilityAdminForm(forms.ModelForm):
    keywords = LinesField(required=False, help_text="One word or phrase per line (the manifest's intent_hints).")
    examples = LinesField(required=False, help_text="One example message per line (the manifest's intent_hints).")
    metadata = _json_field(
        "metadata",
        help_text="What drives the planner, as in the domain's manifest: decomposition.array_params, "
        "composition, flow.pre, roles.",
    )

    class Meta:
        model = Capability
        fields = ["server", "domain", "name", "tool", "enabled", "description", "keywords", "examples", "metadata"]

    def clean_metadata(self) -> Any:
        value = self.cleaned_data.get("metadata")
        return {} if value in (None, "") else value


class SyncedAdmin(FieldHistoryAdminMixin, admin.ModelAdmin):
    """What goals and capabilities share: the edited-since-sync column, the synced values read-only, and the
    re-sync action."""

    actions = ["resync"]
    save_on_top = True

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # Where it comes from is the manifest's to say; a row made here names it once.
        return ["synced_values"] if obj is None else ["server", "domain", "name", "synced_values"]

    @admin.display(description="edited since sync")
    def edited(self, obj: Goal | Capability) -> str:
        if not obj.synced:
            return "made here"
        return ", ".join(obj.edited_fields()) or "—"

    @admin.display(description="synced from the manifest")
    def synced_values(self, obj: Goal | Capability | None) -> str:
        return _synced_block(obj)

    @admin.action(description="Re-sync from the MCP server", permissions=["change"])
    def resync(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        """Sync the servers of the selected rows: their tools, goals and capabilities (edits are kept)."""
        servers = McpServer.objects.filter(pk__in=queryset.values("server_id"))
        servers_sync_messages(self, request, servers)


@admin.register(Goal)
class GoalAdmin(SyncedAdmin):
    form = GoalAdminForm
    list_display = ["name", "domain", "enabled", "threshold", "edited", "synced_at"]
    list_filter = ["domain", "enabled"]
    search_fields = ["name", "domain", "description"]
    fieldsets = [
        (None, {"fields": ["server", "domain", "name", "enabled", "confidence_threshold"]}),
        ("What the model reads", {"fields": ["description", "examples", "entities_schema", "capabilities"]}),
        ("In other languages", {"fields": ["missing_translations", *translation_boxes(GOAL_TRANSLATED)]}),
        ("Synced", {"fields": ["synced_values"], "classes": ["collapse"]}),
    ]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [*super().get_readonly_fields(request, obj), "missing_translations"]

    @admin.display(description="threshold", ordering="confidence_threshold")
    def threshold(self, obj: Goal) -> str:
        return "profile's" if obj.confidence_threshold is None else f"{obj.confidence_threshold:g}"

    @admin.display(description="missing translations")
    def missing_translations(self, obj: Goal) -> str:
        if obj.pk is None:
            return "—"
        return missing_warning(goal_translations_missing(goals=[obj], language=goal_language(obj), named=False))


@admin.register(Capability)
class CapabilityAdmin(SyncedAdmin):
    form = CapabilityAdminForm
    list_display = ["name", "domain", "tool", "enabled", "edited", "synced_at"]
    list_filter = ["domain", "enabled"]
    list_select_related = ["tool"]
    search_fields = ["name", "domain", "description", "tool__name"]
    fieldsets = [
        (None, {"fields": ["server", "domain", "name", "tool", "enabled"]}),
        ("What the model and the planner read", {"fields": ["description", "keywords", "examples", "metadata"]}),
        ("Synced", {"fields": ["synced_values"], "classes": ["collapse"]}),
    ]

    def get_form(self, request: HttpRequest, obj: Capability | None = None, change: bool = False, **kwargs: Any):
        form = super().get_form(request, obj, change, **kwargs)
        tool = form.base_fields.get("tool")
        if obj is not None and isinstance(tool, forms.ModelChoiceField):
            tool.queryset = McpTool.objects.filter(server_id=obj.server_id)  # its server's tools
        return form


# -- rollout flags -----------------------------------------------------------------
# Operators change flags; the "Routing editors" group only reads them and their history (view permissions). Every
# write goes through the rollout services, which record the history.

HISTORY_SHOWN = 50
CONFIRMED = "_rollout_confirmed"  # posted by the confirmation page's "Yes" with the form it confirms


@dataclass(frozen=True)
class Exposure:
    """Who a flag is on for, as far as its percentage and kill switch decide (overrides aside)."""

    percentage: int
    kill_switch: bool
    stickiness: str

    @property
    def share(self) -> int:
        return 0 if self.kill_switch else self.percentage

    @property
    def who(self) -> str:
        return "sessions" if self.stickiness == Stickiness.SESSION_ID else "customers"


def exposure_change_words(key: str, old: Exposure | None, new: Exposure) -> list[str]:
    """What a change of a flag's percentage, kill switch or stickiness does to customers, in sentences; [] when it
    changes nothing for them. ``old`` is None for a new flag."""
    if old is None:
        if new.share == 0:
            return []
        return [f"{new.share} % of {new.who} will get {key}, was 0 % (a new flag)."]
    if old == new or (old.share == new.share == 0 and old.kill_switch == new.kill_switch):
        return []
    said = []
    if new.kill_switch and not old.kill_switch:
        said.append(f"The kill switch turns {key} off for everyone, overrides included.")
    elif old.kill_switch and not new.kill_switch:
        said.append(f"The kill switch is released: {key} is on again for the share below and the overrides.")
    said.append(f"{new.share} % of {new.who} will get {key}, was {old.share} %.")
    if new.stickiness != old.stickiness and new.share:
        said.append(
            f"Who gets it is drawn again, by {Stickiness(new.stickiness).label.lower()} instead of "
            f"{Stickiness(old.stickiness).label.lower()}: some who had it lose it and others get it."
        )
    elif new.share > old.share:
        said.append(f"{new.share - old.share} % more of {new.who} get it; those who had it keep it.")
    elif new.share < old.share:
        said.append(f"{old.share - new.share} % of {new.who} who had it lose it.")
    return said


USER_ID_SEARCH = "user_overrides__user_id"


def customer_ids_readable(request: HttpRequest) -> bool:
    """Whether the request's user reads a user override's customer id as written: who may change overrides
    (operators). Everyone else — an editor may view a flag, and holds no right over the tenants' customers — reads
    and searches it as the histories name it (:func:`common.history.registry.user_id_pseudonym`)."""
    codename = get_permission_codename("change", RolloutUserOverride._meta)
    return request.user.has_perm(f"{RolloutUserOverride._meta.app_label}.{codename}")


class RolloutUserOverrideInline(admin.TabularInline):
    model = RolloutUserOverride
    fields = ["user_id", "enabled", "note"]
    extra = 1
    verbose_name_plural = "user overrides (ticked: always on; unticked: always off; the kill switch still wins)"

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if customer_ids_readable(request):
            return self.fields
        return ["customer", "enabled", "note"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [*super().get_readonly_fields(request, obj), "customer"]

    @admin.display(description="user id")
    def customer(self, override: RolloutUserOverride) -> str:
        return user_id_pseudonym(override.user_id)


class RolloutTenantOverrideInline(admin.TabularInline):
    model = RolloutTenantOverride
    fields = ["tenant", "enabled", "note"]
    extra = 1
    verbose_name_plural = "tenant overrides (every user of the tenant; a user override wins)"


@admin.register(RolloutFlag)
class RolloutFlagAdmin(FieldHistoryAdminMixin, admin.ModelAdmin):
    list_display = [
        "key",
        "percentage",
        "kill_switch",
        "stickiness",
        "user_override_count",
        "tenant_override_count",
        "updated_at",
    ]
    list_filter = ["kill_switch", "stickiness"]
    search_fields = ["key", "description", "user_overrides__user_id", "tenant_overrides__tenant__slug"]
    inlines = [RolloutUserOverrideInline, RolloutTenantOverrideInline]
    fieldsets = [
        (None, {"fields": ["key", "description"]}),
        ("Who gets it", {"fields": ["kill_switch", "percentage", "stickiness"]}),
        ("History", {"fields": ["history"]}),
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[RolloutFlag]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                user_override_total=Count("user_overrides", distinct=True),
                tenant_override_total=Count("tenant_overrides", distinct=True),
            )
        )

    def get_readonly_fields(self, request: HttpRequest, obj: RolloutFlag | None = None) -> list[str]:
        # Code asks for a flag by its key: renaming one would switch it off silently.
        return ["history"] if obj is None else ["key", "history"]

    def get_search_fields(self, request: HttpRequest) -> list[str]:
        # Searching a raw id would tell who may not read it whether that customer has an override.
        fields = list(super().get_search_fields(request))
        return fields if customer_ids_readable(request) else [name for name in fields if name != USER_ID_SEARCH]

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[RolloutFlag], search_term: str
    ) -> tuple[QuerySet[RolloutFlag], bool]:
        """The admin's search, where a word that reads as a pseudonym (``user:3f9a…``, as the histories name a
        customer) finds the flags that have an override for that customer, whoever searches."""
        words = search_term.split()
        pseudonyms = {word for word in words if pseudonym_shaped(word)}
        if not pseudonyms:
            return super().get_search_results(request, queryset, search_term)
        rest = " ".join(word for word in words if word not in pseudonyms)
        queryset, may_have_duplicates = super().get_search_results(request, queryset, rest)
        # One pass over the overrides, a keyed hash each: the pseudonym is not stored, it depends on the key.
        overrides = RolloutUserOverride.objects.values_list("flag_id", "user_id")
        found: dict[str, set[int]] = {pseudonym: set() for pseudonym in pseudonyms}
        for flag_id, user_id in overrides.iterator():
            pseudonym = user_id_pseudonym(user_id)
            if pseudonym in found:
                found[pseudonym].add(flag_id)
        for flags in found.values():
            queryset = queryset.filter(pk__in=flags)
        return queryset, may_have_duplicates

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "tenant":
            kwargs.setdefault("queryset", Tenant.objects.order_by("slug"))
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    @admin.display(description="user overrides", ordering="user_override_total")
    def user_override_count(self, obj: WithAnnotations[RolloutFlag, _FlagTotals]) -> int:
        return obj.user_override_total

    @admin.display(description="tenant overrides", ordering="tenant_override_total")
    def tenant_override_count(self, obj: WithAnnotations[RolloutFlag, _FlagTotals]) -> int:
        return obj.tenant_override_total

    @admin.display(description="changes, newest first")
    def history(self, obj: RolloutFlag | None) -> str:
        if obj is None or obj.pk is None:
            return "—"
        changes = list(obj.changes.select_related("changed_by")[: HISTORY_SHOWN + 1])
        if not changes:
            return "—"
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} → {}</td></tr>",
            (
                (
                    localize(localtime(change.changed_at)),
                    rollout_actor_words(change.actor, user=change.changed_by),
                    change.what,
                    change.old_value,
                    change.new_value,
                )
                for change in changes[:HISTORY_SHOWN]
            ),
        )
        more = ""
        if len(changes) > HISTORY_SHOWN:
            more = format_html(
                '<p><a href="{}?flag_key={}">All changes of {}</a></p>',
                reverse("admin:routing_rolloutflagchange_changelist"),
                obj.key,
                obj.key,
            )
        return format_html(
            "<table><thead><tr><th>when</th><th>who</th><th>what</th><th>old → new</th></tr></thead>"
            "<tbody>{}</tbody></table>{}",
            rows,
            more,
        )

    def changeform_view(self, request: HttpRequest, object_id=None, form_url: str = "", extra_context=None):
        """A change of who gets the flag (its percentage, kill switch or stickiness) is saved once confirmed: the
        first post answers a page that says what changes for customers, whose "Yes" posts the same form again."""
        if request.method == "POST" and CONFIRMED not in request.POST:
            confirmation = self._confirmation(request, object_id)
            if confirmation is not None:
                return confirmation
        return super().changeform_view(request, object_id, form_url, extra_context)

    def _confirmation(self, request: HttpRequest, object_id: str | None) -> TemplateResponse | None:
        """The confirmation page for a valid post that changes who gets the flag; None to go on as usual (nothing
        to confirm, an error the form shows, or no right to change it, which the admin refuses)."""
        obj = self.get_object(request, unquote(object_id)) if object_id else None
        if object_id and (obj is None or not self.has_change_permission(request, obj)):
            return None
        if not object_id and not self.has_add_permission(request):
            return None
        before = Exposure(obj.percentage, obj.kill_switch, obj.stickiness) if obj is not None else None
        form = self.get_form(request, obj, change=obj is not None)(request.POST, request.FILES, instance=obj)
        if not form.is_valid():
            return None
        data = form.cleaned_data
        key = obj.key if obj is not None else data["key"]
        after = Exposure(data["percentage"], data["kill_switch"], data["stickiness"])
        words = exposure_change_words(key, before, after)
        if not words:
            return None
        opts = self.opts
        back = reverse(f"admin:routing_rolloutflag_{'change' if obj else 'add'}", args=[obj.pk] if obj else [])
        context = {
            **self.admin_site.each_context(request),
            "opts": opts,
            "app_label": opts.app_label,
            "title": f"Change who gets {key}?",
            "subtitle": None,
            "original": obj,
            "words": words,
            "posted": [
                (name, value)
                for name, values in request.POST.lists()
                for value in values
                if name != "csrfmiddlewaretoken"
            ],
            "confirmed": CONFIRMED,
            "cancel_url": back,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/routing/rolloutflag/confirm_change.html", context)

    def save_model(self, request: HttpRequest, obj: RolloutFlag, form, change: bool) -> None:
        user = staff_user(request)
        rollout_flag_set(
            key=obj.key,
            actor=rollout_actor_admin(user=user),
            user=user,
            description=obj.description,
            kill_switch=obj.kill_switch,
            percentage=obj.percentage,
            stickiness=obj.stickiness,
            create=not change,
        )
        # The admin goes on with ``obj`` (inlines, log entry, redirect): make it the stored flag.
        stored = RolloutFlag.objects.get(key=obj.key)
        for field in RolloutFlag._meta.concrete_fields:
            setattr(obj, field.attname, getattr(stored, field.attname))
        obj._state.adding = False
        obj._state.db = stored._state.db

    def save_formset(self, request: HttpRequest, form, formset, change: bool) -> None:
        if formset.model not in (RolloutUserOverride, RolloutTenantOverride):
            super().save_formset(request, form, formset, change)
            return
        # commit=False fills new/changed/deleted_objects for the admin's change message and writes nothing;
        # the services write and record the history.
        formset.save(commit=False)
        removals: list[str] = []
        sets: list[RolloutUserOverride | RolloutTenantOverride] = []
        for inline_form in formset.forms:
            existing = inline_form.instance.pk is not None
            if inline_form in formset.deleted_forms:
                if existing:
                    removals.append(self._override_identity(formset.model, inline_form.initial))
                continue
            if not inline_form.has_changed():
                continue
            identity_field = "user_id" if formset.model is RolloutUserOverride else "tenant"
            if existing and identity_field in inline_form.changed_data:  # the row now names someone else
                removals.append(self._override_identity(formset.model, inline_form.initial))
            sets.append(inline_form.instance)
        # Removals first: a row may take the user or tenant another row just gave up.
        for identity in removals:
            self._override_set(request, form.instance, formset.model, identity, enabled=None, note=None)
        for override in sets:
            identity = override.user_id if isinstance(override, RolloutUserOverride) else override.tenant.slug
            self._override_set(
                request, form.instance, formset.model, identity, enabled=override.enabled, note=override.note
            )

    @staticmethod
    def _override_identity(model, initial: dict[str, Any]) -> str:
        if model is RolloutUserOverride:
            return initial["user_id"]
        return Tenant.objects.values_list("slug", flat=True).get(pk=initial["tenant"])

    @staticmethod
    def _override_set(request, flag: RolloutFlag, model, identity: str, *, enabled: bool | None, note: str | None):
        common = {
            "key": flag.key,
            "enabled": enabled,
            "note": note,
            "actor": rollout_actor_admin(user=request.user),
            "user": request.user,
        }
        if model is RolloutUserOverride:
            rollout_user_override_set(user_id=identity, **common)
        else:
            rollout_tenant_override_set(tenant_slug=identity, **common)

    def delete_model(self, request: HttpRequest, obj: RolloutFlag) -> None:
        user = staff_user(request)
        rollout_flag_delete(key=obj.key, actor=rollout_actor_admin(user=user), user=user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[RolloutFlag]) -> None:
        user = staff_user(request)
        with config_batch():
            for key in queryset.values_list("key", flat=True):
                rollout_flag_delete(key=key, actor=rollout_actor_admin(user=user), user=user)


class ActorFilter(admin.SimpleListFilter):
    """Who made the changes, named as people say it (:func:`routing.services.rollout_actor_words`)."""

    title = "by"
    parameter_name = "actor"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        actors = RolloutFlagChange.objects.order_by("actor").values_list("actor", flat=True).distinct()
        return [(actor, rollout_actor_words(actor)) for actor in actors]

    def queryset(self, request: HttpRequest, queryset: QuerySet[RolloutFlagChange]) -> QuerySet[RolloutFlagChange]:
        return queryset.filter(actor=self.value()) if self.value() else queryset


@admin.register(RolloutFlagChange)
class RolloutFlagChangeAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["changed_at", "flag_key", "what", "old_value", "new_value", "by"]
    list_filter = ["flag_key", ActorFilter, "changed_at"]
    list_select_related = ["changed_by"]
    search_fields = ["flag_key", "what", "old_value", "new_value", "actor"]
    date_hierarchy = "changed_at"
    fields = ["changed_at", "flag", "flag_key", "what", "old_value", "new_value", "by"]

    @admin.display(description="by", ordering="actor")
    def by(self, obj: RolloutFlagChange) -> str:
        return rollout_actor_words(obj.actor, user=obj.changed_by)


class ProfileTranslations(AdminExtension):
    """The profile page's warning: which of its own, its specialists', intents' and served goals' texts lack which
    language."""

    def readonly_fields(self, request: HttpRequest, obj: AgentProfile | None) -> list[Any]:
        return [self.missing_translations]

    def fieldsets(self, request: HttpRequest, obj: AgentProfile | None) -> list[tuple[str | None, dict[str, Any]]]:
        return [] if obj is None else [("Languages", {"fields": [self.missing_translations]})]

    @admin.display(description="missing translations")
    def missing_translations(self, obj: AgentProfile) -> str:
        specialists = Specialist.objects.filter(profile=obj).order_by("name")
        intents = Intent.objects.filter(profile=obj).order_by("name")
        return missing_warning(
            [
                *profile_translations_missing(obj),
                *specialist_translations_missing(specialists=specialists, language=obj.language, named=True),
                *intent_translations_missing(intents=intents, language=obj.language, named=True),
                *goal_translations_missing(goals=profile_goals(obj), language=obj.language, named=True),
            ]
        )


admin_extend(AgentProfile, ProfileTranslations())
