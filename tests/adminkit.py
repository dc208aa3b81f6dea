"""Helpers for admin tests: URLs, re-submitting a rendered change form, conversation data."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

from django.db import models
from django.forms import BaseForm, MultiWidget, Textarea
from django.urls import reverse
from django.utils.html import strip_tags

from conversations.models import Conversation, Message, RouteDecisionRecord, ToolCall
from handoffs.models import Handoff, HandoffKind


def changelist_url(model: type[models.Model]) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


def add_url(model: type[models.Model]) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_add")


def change_url(obj: models.Model) -> str:
    return reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])


def history_url(obj: models.Model) -> str:
    return reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_history", args=[obj.pk])


def delete_url(obj: models.Model) -> str:
    return reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_delete", args=[obj.pk])


def _post_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return [str(item) for item in value]
    return str(value)


def shown_fields(response) -> set[str]:
    """The fields of an admin page's main form that its fieldsets render as inputs (a read-only field is text)."""
    return {
        field.field.name
        for fieldset in response.context["adminform"]
        for line in fieldset
        for field in line
        if not field.is_readonly
    }


def _inner(form: BaseForm) -> list[Any]:
    """The formsets a page renders inside its main form (``form.formsets``: a conversation test's turns)."""
    return list(getattr(form, "formsets", ()))


NAMED = re.compile(r'<(?:input|select|textarea|button)\b[^>]*?\sname="([^"]+)"')


def form_data(response, *, newline: str = "\n") -> dict[str, Any]:
    """The POST data a browser would send back for an admin add/change page as rendered.

    Covers the main form's fields the page renders (:func:`shown_fields`: a read-only field is text, a field left out
    of the fieldsets is nowhere) — each must be an input of the page, or this fails —, every inline formset's
    inputs on the page (management form included; a row the user may only view is text) and leaves unticked
    checkboxes out, as browsers do. A browser sends a text box's lines ended by CRLF: ``newline="\r\n"`` does too.
    """
    main = response.context["adminform"].form
    shown = shown_fields(response)
    inputs = set(NAMED.findall(response.content.decode()))

    def rendered(name: str) -> bool:  # a multi-widget's parts are name_0, name_1…
        return name in inputs or any(found.startswith(f"{name}_") for found in inputs)

    unrendered = sorted(main[name].html_name for name in shown if not rendered(main[name].html_name))
    assert not unrendered, f"the page renders no input named {unrendered}, which its fieldsets name"
    forms = [main]
    for formset in [*(inline.formset for inline in response.context["inline_admin_formsets"]), *_inner(main)]:
        forms.append(formset.management_form)
        forms.extend(formset.forms)
    data: dict[str, Any] = {}
    for form in forms:
        for bound in form:
            if bound.field.disabled or (form is main and bound.name not in shown):
                continue
            if form is not main and not rendered(bound.html_name):
                continue  # not on the page (a read-only row's field is text)
            value = bound.value()
            widget = getattr(bound.field.widget, "widget", bound.field.widget)  # unwrap the related-field wrapper
            if isinstance(widget, MultiWidget):  # one input per part (a plan's guards table): name_0, name_1…
                parts = value if form.is_bound else widget.decompress(value)
                for suffix, part in zip(widget.widgets_names, parts, strict=True):
                    data[bound.html_name + suffix] = _post_value(part)
                continue
            if getattr(widget, "allow_multiple_selected", False):
                if value:
                    data[bound.html_name] = _post_value(value)
                continue
            if isinstance(value, bool) or bound.widget_type == "checkbox":
                if value:
                    data[bound.html_name] = "on"
                continue
            value = _post_value(value)
            if isinstance(widget, Textarea) and isinstance(value, str):
                value = value.replace("\r\n", "\n").replace("\n", newline)
            data[bound.html_name] = value
    return data


def error_messages(response) -> list[str]:
    """Every error message the admin form and its inline formsets show, unescaped."""
    collected: list[str] = []
    forms = [response.context["adminform"].form]
    for formset in [*(inline.formset for inline in response.context["inline_admin_formsets"]), *_inner(forms[0])]:
        collected.extend(formset.non_form_errors())
        forms.extend(formset.forms)
    for form in forms:
        for errors in form.errors.values():
            collected.extend(errors)
    return collected


# Elements whose content a person does not read: hidden by the admin's CSS class, an attribute or a style.
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
UNREAD = {"head", "script", "style", "template", "noscript", "select", "option", "textarea"}
SPACES = re.compile(r"\s+")


class _VisibleText(HTMLParser):
    """The text of a page a person reads: outside ``<head>``, scripts, form controls' own text and any element
    hidden by the ``hidden`` attribute or class or by ``display: none``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = []
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in VOID:
            return
        attr = {name: value or "" for name, value in attrs}
        style = attr.get("style", "").replace(" ", "").lower()
        hidden = (
            (bool(self.stack) and self.stack[-1][1])
            or tag in UNREAD
            or "hidden" in attr
            or "hidden" in attr.get("class", "").split()
            or "display:none" in style
        )
        self.stack.append((tag, hidden))

    def handle_endtag(self, tag: str) -> None:
        for index in range(len(self.stack) - 1, -1, -1):
            if self.stack[index][0] == tag:
                del self.stack[index:]
                return

    def handle_data(self, data: str) -> None:
        if not (self.stack and self.stack[-1][1]):
            self.parts.append(data)


def visible_text(html: str) -> str:
    """The text of ``html`` a person reads (:class:`_VisibleText`), its white space collapsed."""
    parser = _VisibleText()
    parser.feed(html)
    return SPACES.sub(" ", " ".join(parser.parts))


def unread_errors(response) -> list[str]:
    """The errors of a page's forms whose text a person does not read on the page: an admin form's and its inlines'
    (:func:`error_messages`), or those of every form a page of its own was drawn with."""
    if "adminform" in response.context:
        errors = error_messages(response)
    else:
        context = response.context
        names = context.keys() if hasattr(context, "keys") else context.flatten().keys()  # a ContextList, or one
        forms = {id(context[name]): context[name] for name in names if isinstance(context[name], BaseForm)}
        errors = [error for form in forms.values() for found in form.errors.values() for error in found]
    text = visible_text(response.content.decode())
    return [str(error) for error in errors if SPACES.sub(" ", strip_tags(str(error))).strip() not in text]


def conversation_with_history(*, tenant, profile) -> Conversation:
    """A conversation with one exchange, its route decision, a tool call and a handoff."""
    conversation = Conversation.objects.create(
        tenant=tenant,
        profile=profile,
        session_id="s-1",
        conversation_key=f"{tenant.slug}:{profile.agent_id}:s-1",
        user_id="u-1",
        channel="web",
        active_specialist="billing_agent",
        message_count=2,
    )
    question = Message.objects.create(conversation=conversation, role="user", content="Minha fatura veio alta")
    Message.objects.create(
        conversation=conversation, role="assistant", agent="billing_agent", content="Sua fatura subiu por roaming."
    )
    RouteDecisionRecord.objects.create(
        conversation=conversation,
        message=question,
        mode="router",
        route="billing_agent",
        agent="billing_agent",
        intent="billing_invoice_explanation",
        confidence=0.8,
        reason="Keyword 'fatura' matched.",
        method="keyword",
    )
    ToolCall.objects.create(
        conversation=conversation,
        message=question,
        agent="billing_agent",
        tool="consultar_fatura",
        server="telecom",
        status="ok",
        latency_ms=12.5,
        result={"total": 120},
    )
    Handoff.objects.create(
        conversation=conversation,
        tenant=tenant,
        profile=profile,
        from_agent="support_agent",
        to_agent="billing_agent",
        kind=HandoffKind.ROUTING,
        reason="The user asks about the invoice.",
    )
    return conversation
