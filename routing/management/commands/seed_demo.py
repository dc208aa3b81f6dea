"""``manage.py seed_demo``: the demo profiles (telecom_contas, retail_orders, telecom_assistente, finance_assistente)
from config/demo/."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from routing.configio import ConfigImportError, config_import
from routing.management.commands.import_config import read_sources, write_report

DEMO_DIR = settings.BASE_DIR / "config" / "demo"


class Command(BaseCommand):
    help = "Load the demo configuration (config/demo/*.yaml) through import_config. Running it again changes nothing."

    def handle(self, *args, **options):
        sources = read_sources([str(DEMO_DIR)])
        try:
            report = config_import(sources=sources)
        except ConfigImportError as exc:
            raise CommandError("\n".join(["The demo configuration is invalid:", *exc.messages])) from exc
        write_report(
            self, report, title="Demo data (telecom_contas, retail_orders, telecom_assistente, finance_assistente)"
        )
