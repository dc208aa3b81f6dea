"""django-auditlog's app under the name the admin index shows it by: its list of entries is the routing models'
field history (``common.history.registry``), read-only."""

from auditlog.apps import AuditlogConfig


class RoutingChangesConfig(AuditlogConfig):
    verbose_name = "Routing changes"
