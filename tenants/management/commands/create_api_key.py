from django.core.management.base import BaseCommand, CommandError
from django.utils.text import slugify

from tenants.services import api_key_create


class Command(BaseCommand):
    help = "Create an API key for a tenant (creating the tenant if needed). The key is printed alone on the last line."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True, help="Tenant id (slug), e.g. tenant_a.")
        parser.add_argument("--name", default="", help="A label for the key.")
        parser.add_argument("--debug", action="store_true", help="The key may call /api/debug/*.")
        parser.add_argument("--preview", action="store_true", help="The key may call the multi-agent preview route.")
        parser.add_argument(
            "--answer", action="store_true", help="The key may answer escalated conversations (an external desk)."
        )

    def handle(self, *args, **options):
        slug = options["tenant"].strip()
        if not slug or slugify(slug).replace("-", "_") != slug.replace("-", "_"):
            raise CommandError(f"--tenant must be a slug (letters, digits, _ and -), got {slug!r}.")
        key, raw = api_key_create(
            tenant_slug=slug,
            name=options["name"],
            is_debug=options["debug"],
            can_preview=options["preview"],
            can_answer=options["answer"],
        )
        flags = ", ".join(
            flag
            for flag, on in (("debug", key.is_debug), ("preview", key.can_preview), ("answer", key.can_answer))
            if on
        )
        self.stderr.write(f"Created key {key.prefix}… for tenant {key.tenant.slug}" + (f" ({flags})" if flags else ""))
        self.stdout.write(raw)
