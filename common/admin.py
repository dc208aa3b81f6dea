"""The "Routing changes" list: auditlog's entries, read-only for everyone (see ``common.history_admin``)."""

from auditlog.models import LogEntry
from django.contrib import admin

from common.history_admin import RoutingChangeAdmin

# auditlog's own admin registered it first ("auditlog" comes before "common" in INSTALLED_APPS).
if admin.site.is_registered(LogEntry):
    admin.site.unregister(LogEntry)
admin.site.register(LogEntry, RoutingChangeAdmin)
