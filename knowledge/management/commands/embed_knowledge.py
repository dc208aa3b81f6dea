"""``manage.py embed_knowledge --profile AGENT_ID [--every]``.

Embeds the passages of the profile's documents that are not embedded by the model of ``KNOWLEDGE_EMBEDDINGS_MODEL``
after ``KNOWLEDGE_EMBEDDINGS_DOCUMENT_PREFIX`` (:func:`knowledge.vectors.profile_embed`): after a change of either, for
documents uploaded before the profile's search
used vectors, or when the endpoint failed at their upload. ``--every`` embeds every document again. Exits 1 when a
document could not be embedded (the admin's document page says why).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.models import AgentProfile
from knowledge.vectors import embedding_model, profile_embed


class Command(BaseCommand):
    help = "Embed a profile's knowledge passages with the configured embeddings model."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--profile", required=True, help="The profile's agent_id.")
        parser.add_argument("--every", action="store_true", help="Embed every document again, not only the stale.")

    def handle(self, *args: Any, **options: Any) -> None:
        profile = AgentProfile.objects.filter(agent_id=options["profile"]).first()
        if profile is None:
            raise CommandError(f"Unknown profile {options['profile']!r}.")
        model = embedding_model()
        if not model:
            raise CommandError("No embeddings endpoint: set KNOWLEDGE_EMBEDDINGS_BASE_URL (or ROUTER_EMBEDDINGS_*).")
        done, failed = profile_embed(profile.pk, every=options["every"])
        self.stdout.write(f"{done} documents embedded by {model}, {failed} not.")
        if failed:
            raise CommandError(f"{failed} documents could not be embedded: their admin pages say why.")
