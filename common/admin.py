"""The "Routing changes" list: auditlog's entries, read-only for everyone (see ``common.history.admin``); and the
check that every admin extension is applied (``common.adminkit.admin_extend``)."""

from typing import Any

from auditlog.models import LogEntry
from django.contrib import admin
from django.core.checks import CheckMessage, Error, Tags, register

from common.adminkit import admin_extensions_check
from common.history.admin import RoutingChangeAdmin

# auditlog's own admin registered it first ("auditlog" comes before "common" in INSTALLED_APPS). django-auditlog
# (3.4) registers its LogEntryAdmin unconditionally, with no setting to leave it out, and its "Routing changes" list
# is read-only and worded here: replacing its registration is the only way.
if admin.site.is_registered(LogEntry):
    admin.site.unregister(LogEntry)
admin.site.register(LogEntry, RoutingChangeAdmin)


@register(Tags.admin)
def admin_extensions_applied(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """An app's additions to another app's admin (:func:`common.adminkit.admin_extend`) are shown: the model's admin
    applies them."""
    return [
        Error(problem, hint="Mix common.adminkit.ExtensibleAdmin into that admin, first.", id="common.E001")
        for problem in admin_extensions_check(admin.site)
    ]
