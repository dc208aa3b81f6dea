"""``manage.py purge_expired [--tenant T] [--dry-run]``: purge the conversations past their tenant's retention window
with every row they left (conversations/customer_data/retention.py), now — what the periodic job does — and print
the rows purged per model, tenant by tenant, and agent_handoffs' months dropped whole (PostgreSQL)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from conversations.customer_data import Purge, retention_purge, retention_purge_all
from tenants.models import Tenant


class Command(BaseCommand):
    help = "Purge the conversations past their tenant's retention window, with every row they left."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", help="Only this tenant (its slug); by default every tenant with a window.")
        parser.add_argument("--dry-run", action="store_true", help="Count what would be purged; change nothing.")

    def handle(self, *args, **options) -> None:
        dry_run = options["dry_run"]
        if options["tenant"]:
            tenant = Tenant.objects.filter(slug=options["tenant"]).first()
            if tenant is None:
                raise CommandError(f"No tenant {options['tenant']!r}.")
            purge = retention_purge(tenant=tenant, dry_run=dry_run)
            if purge is None:
                self.stdout.write(f"{tenant.slug}: conversations are kept forever; nothing purged.")
                return
            purges = [purge]
        else:
            purges = retention_purge_all(dry_run=dry_run)
        for purge in purges:
            self._report(purge, dry_run=dry_run)
        if not purges:
            self.stdout.write("No tenant has a retention window: nothing purged.")

    def _report(self, purge: Purge, *, dry_run: bool) -> None:
        verb = "would purge" if dry_run else "purged"
        self.stdout.write(
            f"{purge.tenant}: {purge.window_days} days, before {purge.cutoff:%Y-%m-%d}: {verb} "
            f"{sum(purge.counts.values())} rows in {purge.batches} {'batch' if purge.batches == 1 else 'batches'} "
            f"({purge.seconds:.1f} s)."
        )
        for label, count in purge.counts.items():
            self.stdout.write(f"  {label}: {count}")
        for month in purge.handoff_months:
            self.stdout.write(f"  {'would drop' if dry_run else 'dropped'} agent_handoffs' month {month} whole")
