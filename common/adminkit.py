"""Building blocks for the apps' admins (routing, agents, handoffs).

Every change page lists, under the admin's "Please correct the error below", the errors its inputs do not show
(:func:`unshown_errors`, drawn by ``templates/admin/change_form.html``, which every admin's change form extends).

Two kinds of read-only page recur: records the chat API writes (conversations,
messages, handoffs), which nobody writes through the admin, and related rows
listed on a parent's page, which are edited — if at all — on their own page.
And addresses that may carry credentials are shown masked and written only
(:class:`EndpointSecretsAdminMixin`). Every one of these mixins (and the field
history's, ``common.history.admin``) brings :class:`RelatedLinksMixin`: a page
links a related object only for users who may open it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from django import forms
from django.contrib import admin
from django.contrib.admin.helpers import AdminField, AdminForm, InlineAdminFormSet
from django.contrib.admin.options import IS_POPUP_VAR
from django.contrib.admin.utils import flatten, flatten_fieldsets, unquote
from django.core.exceptions import NON_FIELD_ERRORS, FieldDoesNotExist, ValidationError
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.text import capfirst

from common.endpoints import endpoint_mask
from common.forms import EndpointField, EndpointSecretsForm

if TYPE_CHECKING:
    from django.contrib.admin.options import BaseModelAdmin, InlineModelAdmin, ModelAdmin, _FieldGroups

    FieldGroups: TypeAlias = _FieldGroups  # what an admin's get_fields() returns: names, or tuples of names

    _AdminBase = BaseModelAdmin[Any]
    _InlineBase = InlineModelAdmin[Any, Any]
    _ModelAdminBase = ModelAdmin[Any]
    _ModelFormBase = forms.ModelForm[Any]
else:
    # At run time the mixins stay plain classes: the admin class they are mixed into comes later in the MRO.
    _AdminBase = _InlineBase = _ModelAdminBase = _ModelFormBase = object


class RelatedLinksMixin(_AdminBase):
    """A read-only foreign key links its object's page only for users who may open that page (view or change it);
    others read the object's name. Django links it whatever the user may open — a link to a 403 for a routing
    editor reading a conversation's tenant, say. The page's own fields and its inlines' rows alike, swapped when
    the page is rendered, after every override decided what is read-only."""

    def render_change_form(self, request: HttpRequest, context: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        related_links_permitted(request, self.admin_site, context)
        return super().render_change_form(request, context, *args, **kwargs)  # type: ignore[misc]  # a ModelAdmin's


def _foreign_key(model: type[models.Model], name: Any) -> models.ForeignKey[Any, Any] | None:
    """The foreign key (or one-to-one field) ``name`` of ``model``; ``None`` for anything else (a method, an
    admin's column, another field)."""
    if not isinstance(name, str):
        return None
    with contextlib.suppress(FieldDoesNotExist):
        field = model._meta.get_field(name)
        if isinstance(field, models.ForeignKey):  # a OneToOneField is one too
            return field
    return None


def _unlinked(field: models.Field[Any, Any], empty: str) -> Callable[[Any], str]:
    """A read-only column showing the related object of ``field`` by its name, with no link."""

    @admin.display(description=str(field.verbose_name))
    def column(obj: Any) -> str:
        value = getattr(obj, field.name, None)
        return empty if value is None else str(value)

    column.__name__ = field.name  # its CSS class and help text are the field's
    return column


def related_links_permitted(request: HttpRequest, site: admin.AdminSite, context: dict[str, Any]) -> None:
    """In a change page's ``context``, swap every read-only foreign key (or one-to-one) whose object's admin the
    request's user may not open for a column naming the object: the page's form and each inline's rows."""
    allowed: dict[type[models.Model], bool] = {}
    columns: dict[models.Field[Any, Any], Callable[[Any], str]] = {}  # one per field: read-only names are compared

    def may_open(model: type[models.Model]) -> bool:
        if model not in allowed:
            # Not registered: Django shows the name already (it finds no page to link).
            allowed[model] = not site.is_registered(model) or site.get_model_admin(model).has_view_or_change_permission(
                request
            )
        return allowed[model]

    def swapped(model: type[models.Model], names: Sequence[Any], read_only: Collection[Any], empty: str) -> list[Any]:
        result: list[Any] = []
        for name in names:
            if isinstance(name, (list, tuple)):
                result.append(tuple(swapped(model, name, read_only, empty)))
                continue
            field = _foreign_key(model, name) if name in read_only else None
            if field is not None and not may_open(field.related_model):
                if field not in columns:
                    columns[field] = _unlinked(field, empty)
                result.append(columns[field])
            else:
                result.append(name)
        return result

    def redo(page: Any, model: type[models.Model], read_only: Collection[Any], empty: str) -> None:
        page.readonly_fields = swapped(model, list(page.readonly_fields), read_only, empty)
        page.fieldsets = [
            (title, {**options, "fields": swapped(model, options["fields"], read_only, empty)})
            for title, options in page.fieldsets
        ]

    form = context.get("adminform")
    if form is not None:
        redo(form, form.form._meta.model, set(form.readonly_fields), form.model_admin.get_empty_value_display())
    for inline in context.get("inline_admin_formsets") or ():
        read_only = set(inline.readonly_fields)
        if not inline.has_change_permission:  # every field of a row the user may only view is read-only
            read_only |= set(flatten_fieldsets(inline.fieldsets))
        parent = getattr(inline.formset, "fk", None)  # a row's link to the page's own object is not shown
        read_only.discard(parent.name if parent is not None else None)
        redo(inline, inline.opts.model, read_only, inline.opts.get_empty_value_display())


ERROR_ROW_GONE = "this row is no longer stored (deleted since the page was opened?): reload the page."


def rendered_inputs(page: AdminForm) -> set[str]:
    """The fields of an admin page's form that its fieldsets render as visible inputs: not read-only text, not hidden
    (the admin renders a hidden field's row, its errors with it, invisibly)."""
    return {
        field.field.name
        for fieldset in page
        for line in fieldset
        for field in line
        if isinstance(field, AdminField) and not field.field.is_hidden  # not an AdminReadonlyField's text
    }


def _errors_said(form: forms.BaseForm, shown: Collection[str], where: str = "") -> list[str]:
    """The errors of ``form``'s fields not in ``shown``, each naming its field (and ``where``, a row)."""
    said = []
    for name, errors in form.errors.items():
        if name == NON_FIELD_ERRORS or name in shown:
            continue
        label = str(form.fields[name].label or name) if name in form.fields else name
        label = capfirst(label) or name
        said += [f"{where}{error}" if str(error).startswith(label) else f"{where}{label}: {error}" for error in errors]
    return said


def unshown_errors(page: AdminForm | None, inlines: Iterable[InlineAdminFormSet] = ()) -> list[str]:
    """The errors of an admin change page that its inputs do not show, each naming its field: those of the form's
    fields left out of its fieldsets or hidden (:func:`rendered_inputs`), and those of an inline row's fields that
    the row does not render as a visible input — its id, say, when the row was deleted meanwhile. The admin shows the
    non-field errors, and the others beside their inputs only; ``templates/admin/change_form.html`` lists these."""
    said = _errors_said(page.form, rendered_inputs(page)) if page is not None else []
    for inline in inlines:
        read_only = set(inline.readonly_fields)
        if not inline.has_change_permission:
            read_only |= set(flatten_fieldsets(inline.fieldsets))
        names = [name for name in flatten_fieldsets(inline.fieldsets) if name not in read_only]
        title = capfirst(str(inline.opts.verbose_name))
        pk = inline.formset.model._meta.pk.name
        for number, form in enumerate(inline.formset.forms, start=1):
            if not form.errors:
                continue
            shown = [name for name in names if name in form.fields and not form[name].is_hidden]
            if any(error.code == "invalid_choice" for error in form.errors.as_data().get(pk, ())):
                said.append(f"{title} {number}: {ERROR_ROW_GONE}")  # Django's words: "Select a valid choice"
                shown.append(pk)
            said += _errors_said(form, shown, f"{title} {number}: ")
    return said


def _field_label(model: type[models.Model], name: str) -> str:
    with contextlib.suppress(FieldDoesNotExist):
        return capfirst(str(getattr(model._meta.get_field(name), "verbose_name", name))) or name
    return name


class UnheldErrorsForm(_ModelFormBase):
    """A model form that says a model's error (``Model.clean()``) of a field it does not hold — read-only on its page,
    or left out — as one of its own errors, naming the field: Django raises ``ValueError`` for it, a 500 (a started
    rollout plan whose stored guards today's rules refuse, renamed)."""

    def _update_errors(self, errors: ValidationError) -> None:
        if hasattr(errors, "error_dict"):
            held: dict[str, list[ValidationError]] = {}
            for name, found in errors.error_dict.items():
                if name == NON_FIELD_ERRORS or name in self.fields:
                    held.setdefault(name, []).extend(found)
                    continue
                label = _field_label(self._meta.model, name)
                held.setdefault(NON_FIELD_ERRORS, []).extend(
                    ValidationError(text if text.startswith(label) else f"{label}: {text}")
                    for error in found
                    for text in error.messages
                )
            errors = ValidationError(held)
        super()._update_errors(errors)  # type: ignore[misc]  # BaseModelForm's, private: django-stubs leave it out


class RenderedFormMixin(_ModelAdminBase):
    """An add or change page's form holds only the fields the page's fieldsets name, and says the model's errors of
    the others (:class:`UnheldErrorsForm`). Django's keeps every field its form class declares, named or not (it
    leaves out only a read-only one): a declared field the page does not render would be validated — required, its
    choice checked — against a value no browser sends, its error shown nowhere. For an admin whose fieldsets leave
    out some of its form's declared fields, or whose read-only fields the model's validation reads, object by
    object."""

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        named = kwargs.get("fields")  # the page's fieldsets' (the admin's add and change views give them)
        # every field when none are named (the admin's get_fields() asks so), not a page's
        unnamed = [] if named is None else [name for name in form.declared_fields if name not in named]
        # A declared field is left out the way Django leaves out a read-only one: shadowed by None in a subclass.
        return type(form.__name__, (UnheldErrorsForm, form), dict.fromkeys(unnamed))


class ReadOnlyAdminMixin(RelatedLinksMixin):
    """Viewable but never written through the admin: for a ``ModelAdmin`` or an inline.

    Nobody — superusers included — may add, change or delete; view permission
    decides who sees the objects.
    """

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:  # inlines also pass ``obj``
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ListingInlineMixin(_InlineBase):
    """Related rows listed on the parent's page, each a link to the row's own page.

    No blank rows, no delete boxes, nothing added here, and every field named in
    ``fields`` is read-only. Whether the row's own page may be changed is left to
    the model's permissions: the link reads "Change" or "View" accordingly.
    """

    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return flatten(self.fields or [])


class ReadOnlyInlineMixin(ReadOnlyAdminMixin, ListingInlineMixin):
    """A :class:`ListingInlineMixin` whose rows may not be changed or deleted through the admin either."""


class EndpointSecretsAdminMixin(RelatedLinksMixin, _ModelAdminBase):
    """Addresses whose credentials are write-only: the ``endpoint_fields`` (an MCP server's endpoint, a model's or
    a backend's base URL, a webhook URL) are shown masked in the list, the form and a read-only page
    (:func:`common.endpoints.endpoint_mask`); a form posted back with the masked address keeps the stored
    credentials, a new address replaces them, and masked credentials never follow an address to another host
    (:class:`common.forms.EndpointSecretsForm`). A search finds them by their masked form only: a search by a
    secret's characters would read it back."""

    endpoint_fields: Sequence[str] = ()

    def formfield_for_dbfield(self, db_field: models.Field[Any, Any], request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name in self.endpoint_fields:
            kwargs["form_class"] = EndpointField
            kwargs["widget"] = EndpointField.widget
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        return type(form.__name__, (EndpointSecretsForm, form), {})

    def get_list_display(self, request: HttpRequest) -> list[Any]:
        return [self._masked(name, self.endpoint_fields) for name in super().get_list_display(request)]

    def get_search_fields(self, request: HttpRequest) -> list[str]:
        return [name for name in super().get_search_fields(request) if name.lstrip("^=@") not in self.endpoint_fields]

    def get_search_results(self, request: HttpRequest, queryset: QuerySet[Any], search_term: str) -> Any:
        """The admin's search, plus the rows whose masked address has every word of ``search_term``: an address is
        found by its host or path, never by its credentials (these tables hold a few rows: read in Python)."""
        found, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        words = search_term.lower().split()
        if not words or not self.endpoint_fields:
            return found, may_have_duplicates
        shown = [
            pk
            for pk, *addresses in queryset.values_list("pk", *self.endpoint_fields)
            if any(address and all(word in endpoint_mask(address).lower() for word in words) for address in addresses)
        ]
        return (found | queryset.filter(pk__in=shown)) if shown else found, may_have_duplicates

    def render_change_form(self, request: HttpRequest, context: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        # Whatever made an address read-only here (view permission only, or the admin's read-only fields), the
        # page shows its masked column: swapped in the page's own fieldsets, after every override decided them.
        page = context.get("adminform")
        if page is not None:
            shown = {name for name in self.endpoint_fields if name in page.readonly_fields}
            if shown:

                def swapped(fields: Sequence[Any]) -> list[Any]:
                    return [
                        tuple(swapped(item)) if isinstance(item, (list, tuple)) else self._masked(item, shown)
                        for item in fields
                    ]

                page.readonly_fields = swapped(page.readonly_fields)
                page.fieldsets = [
                    (title, {**options, "fields": swapped(options["fields"])}) for title, options in page.fieldsets
                ]
        return super().render_change_form(request, context, *args, **kwargs)

    def _masked(self, name: Any, fields: Collection[str]) -> Any:
        """The masked column of the address field ``name`` when it is one of ``fields``, else ``name`` itself."""
        if not isinstance(name, str) or name not in fields:
            return name
        columns: dict[str, Callable[[Any], str | None]] = self.__dict__.setdefault("_masked_columns", {})
        if name not in columns:
            field = self.model._meta.get_field(name)

            @admin.display(description=str(field.verbose_name), ordering=name)
            def column(obj: Any) -> str | None:
                value = getattr(obj, name)
                return endpoint_mask(value) if value else None

            column.__name__ = name  # its CSS class and help text are the field's
            columns[name] = column
        return columns[name]


# -- extension points ------------------------------------------------------------------------------------------


class AdminExtension:
    """What an app on a higher layer adds to the admin of a model that a lower app owns: an app registers the admins
    of its own models only, and nobody registers one again (a second registration, made in import order, would
    silently drop the first's changes or be dropped by them). The lower app's admin mixes in
    :class:`ExtensibleAdmin`; the higher app subclasses this and hands an instance to :func:`admin_extend` from its
    ``admin.py``. The hooks are asked request by request, so the order the apps' admin modules load in does not
    matter.

    Every hook is optional. Computed columns and read-only values are given as callables taking the object (the
    extension's own methods, ``@admin.display`` for their labels and ordering), never by a name the model admin
    would look up on itself. Its pages (:meth:`urls`) come before the model admin's own, whose
    ``<path:object_id>/`` would take them otherwise; they are named like the admin's own
    (``<app_label>_<model>_<page>``) so that ``reverse("admin:…")`` finds them. A template given here replaces the
    model admin's default page and should extend it.
    """

    change_form_template: str | None = None
    change_list_template: str | None = None

    def list_display(self, request: HttpRequest) -> Sequence[Callable[[Any], Any]]:
        """Columns added after the model admin's own."""
        return ()

    def readonly_fields(self, request: HttpRequest, obj: Any) -> Sequence[Any]:
        """Read-only values the :meth:`fieldsets` show: callables, or names of the model's own fields."""
        return ()

    def fieldsets(self, request: HttpRequest, obj: Any) -> list[tuple[str | None, dict[str, Any]]]:
        """Fieldsets shown before the model admin's own (``obj`` is ``None`` on the add page)."""
        return []

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """The model admin's queryset, with what the extension's columns read (an annotation, say)."""
        return queryset

    def urls(self, model_admin: ModelAdmin[Any]) -> list[Any]:
        """The extension's pages, each wrapped in ``model_admin.admin_site.admin_view``."""
        return []

    def change_context(self, model_admin: ModelAdmin[Any], request: HttpRequest, obj: Any) -> dict[str, Any]:
        """What the change page's template reads besides the admin's own context (``obj`` may be ``None``: not
        found, or not readable)."""
        return {}

    def actions(self, request: HttpRequest) -> Sequence[Callable[..., Any]]:
        """Actions on the list's selected rows that ``request``'s user may take: admin action functions
        (``(model_admin, request, queryset)``, ``@admin.action`` for their description), named by their function."""
        return ()


_EXTENSIONS: dict[type[models.Model], list[AdminExtension]] = {}


def admin_extend(model: type[models.Model], extension: AdminExtension) -> None:
    """Add ``extension`` to the admin of ``model``, which must be an :class:`ExtensibleAdmin` (a system check says so
    when it is not: :func:`admin_extensions_check`). Adding the same kind of extension twice keeps the first."""
    extensions = _EXTENSIONS.setdefault(model, [])
    if not any(type(added) is type(extension) for added in extensions):
        extensions.append(extension)


def admin_extensions(model: type[models.Model]) -> tuple[AdminExtension, ...]:
    return tuple(_EXTENSIONS.get(model, ()))


def admin_extensions_check(site: admin.AdminSite) -> list[str]:
    """The models given extensions whose registered admin does not apply them: none, or an extension is lost."""
    return [
        f"{model._meta.label}: its admin is not an ExtensibleAdmin, so {len(extensions)} extension(s) are not shown"
        for model, extensions in _EXTENSIONS.items()
        if extensions and not isinstance(site._registry.get(model), ExtensibleAdmin)
    ]


class ExtensibleAdmin(_ModelAdminBase):
    """A model admin that applies the :class:`AdminExtension` objects higher apps added to its model: their columns,
    first fieldsets and read-only values, queryset, pages, change page context and templates. Mixed in first, so
    that the admin's own overrides (which call ``super()``) see the extensions' additions."""

    def get_list_display(self, request: HttpRequest) -> Any:
        added = [column for extension in admin_extensions(self.model) for column in extension.list_display(request)]
        return [*super().get_list_display(request), *added]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        added = [
            field for extension in admin_extensions(self.model) for field in extension.readonly_fields(request, obj)
        ]
        return [*super().get_readonly_fields(request, obj), *added]

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        added = [
            fieldset for extension in admin_extensions(self.model) for fieldset in extension.fieldsets(request, obj)
        ]
        return [*added, *super().get_fieldsets(request, obj)]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        for extension in admin_extensions(self.model):
            queryset = extension.queryset(request, queryset)
        return queryset

    def get_urls(self) -> list[Any]:
        added = [url for extension in admin_extensions(self.model) for url in extension.urls(self)]
        return [*added, *super().get_urls()]

    def get_actions(self, request: HttpRequest) -> Any:
        actions = super().get_actions(request)
        if self.actions is None or IS_POPUP_VAR in request.GET:
            return actions  # where the admin offers no action, none is added
        for extension in admin_extensions(self.model):
            for action in extension.actions(request):
                found = self.get_action(action)
                if found is not None:
                    actions[found[1]] = found
        return actions

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> Any:
        # Only extensions that add to the page cost it a read of the object.
        extensions = [
            e for e in admin_extensions(self.model) if type(e).change_context is not AdminExtension.change_context
        ]
        if extensions:
            obj = self.get_object(request, unquote(object_id))
            added: dict[str, Any] = {}
            for extension in extensions:
                added.update(extension.change_context(self, request, obj))
            extra_context = {**(extra_context or {}), **added}
        return super().change_view(request, object_id, form_url, extra_context)

    def render_change_form(self, request: HttpRequest, context: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        return self._templated(super().render_change_form(request, context, *args, **kwargs), "change_form_template")

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        return self._templated(super().changelist_view(request, extra_context), "change_list_template")

    def _templated(self, response: Any, kind: str) -> Any:
        """``response`` drawn with an extension's template for the page, when one gives it (a redirect stays)."""
        template = next((getattr(e, kind) for e in admin_extensions(self.model) if getattr(e, kind)), None)
        if template and isinstance(response, TemplateResponse) and not response.is_rendered:
            response.template_name = template
        return response
