"""``manage.py idempotency_purge``: delete the Idempotency-Keys past their expiry (chat/idempotency.py)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from chat.idempotency import idempotency_purge


class Command(BaseCommand):
    help = "Delete expired Idempotency-Keys and their stored answers (IDEMPOTENCY_KEY_TTL_SECONDS)."

    def handle(self, *args, **options) -> None:
        deleted = idempotency_purge()
        self.stdout.write(f"Deleted {deleted} expired idempotency keys.")
