"""``manage.py erase_customer --tenant T --user U [--dry-run]``: erase one end user of a tenant everywhere
(conversations/customer_data/erasure.py) and print the rows erased per model."""

from __future__ import annotations

import getpass

from django.core.management.base import BaseCommand, CommandError

from common.errors import DomainError
from conversations.customer_data import customer_erase, customer_of_tenant


class Command(BaseCommand):
    help = "Erase everything stored about one end user of a tenant (analytics counts are kept, anonymised)."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True, help="The tenant's slug.")
        parser.add_argument("--user", required=True, help="The user id, as the chat API received it.")
        parser.add_argument("--dry-run", action="store_true", help="Count what would be erased; change nothing.")

    def handle(self, *args, **options) -> None:
        try:
            customer = customer_of_tenant(tenant_slug=options["tenant"], user_id=options["user"])
        except DomainError as exc:
            raise CommandError(str(exc)) from None
        dry_run = options["dry_run"]
        counts = customer_erase(
            customer=customer,
            user_id=options["user"],
            actor=f"manage.py erase_customer ({getpass.getuser()})",
            dry_run=dry_run,
        )
        if not counts:
            self.stdout.write("Nothing stored about this user: nothing erased.")
            return
        for label, count in counts.items():
            self.stdout.write(f"{label}: {count}")
        self.stdout.write("Dry run: nothing changed." if dry_run else f"Erased {sum(counts.values())} rows.")
