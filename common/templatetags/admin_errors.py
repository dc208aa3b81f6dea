"""``{% unshown_errors adminform inline_admin_formsets as said %}``: the errors of an admin change page that its inputs
do not show (:func:`common.adminkit.unshown_errors`), for ``templates/admin/change_form.html``."""

from __future__ import annotations

from collections.abc import Iterable

from django import template
from django.contrib.admin.helpers import AdminForm, InlineAdminFormSet

from common import adminkit

register = template.Library()


@register.simple_tag
def unshown_errors(page: AdminForm | None, inlines: Iterable[InlineAdminFormSet] | None = None) -> list[str]:
    return adminkit.unshown_errors(page, inlines or ())
