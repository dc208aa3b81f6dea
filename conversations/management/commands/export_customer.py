"""``manage.py export_customer --tenant T --user U [--output FILE]``: everything stored about one end user of a
tenant, as one JSON document (conversations/customer_data/export.py), written as it is read."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError

from common.errors import DomainError
from conversations.customer_data import customer_export, customer_of_tenant


class Command(BaseCommand):
    help = "Export everything stored about one end user of a tenant as one JSON document."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True, help="The tenant's slug.")
        parser.add_argument("--user", required=True, help="The user id, as the chat API received it.")
        parser.add_argument("--output", default="", help="A file to write (default: standard output).")

    def handle(self, *args, **options) -> None:
        try:
            customer = customer_of_tenant(tenant_slug=options["tenant"], user_id=options["user"])
        except DomainError as exc:
            raise CommandError(str(exc)) from None
        chunks = customer_export(customer=customer, tenant_slug=options["tenant"], user_id=options["user"])
        if not options["output"]:
            for chunk in chunks:
                sys.stdout.write(chunk)
            sys.stdout.write("\n")
            return
        with open(options["output"], "w", encoding="utf-8") as output:
            output.writelines(chunks)
        self.stderr.write(f"Wrote {options['output']}.")
