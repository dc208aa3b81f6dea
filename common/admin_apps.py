"""Django's admin app with :class:`common.admin_site.PlatformAdminSite` as its default site (in ``INSTALLED_APPS``
in place of ``django.contrib.admin``): ``admin.site`` and every ``@admin.register`` use it."""

from django.contrib.admin.apps import AdminConfig


class PlatformAdminConfig(AdminConfig):
    default_site = "common.admin_site.PlatformAdminSite"
