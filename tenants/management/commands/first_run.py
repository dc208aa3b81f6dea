"""The first run of a deployment: an admin user, demo data when asked, a tenant and an API key.

    python manage.py first_run [--demo [--sync]] [--tenant tenant_a] [--new-key | --key-file PATH]
                               [--password-file PATH] [--output-secret NAME]

Safe to run again: an existing superuser keeps its password unless ``ADMIN_PASSWORD`` is set, the demo is loaded
only where it is missing (``seed_demo``, which also rolls the ``multi_agent`` flag out to everyone while nobody has
changed the flag), and the tenant gets a key only while it has no active one (``--new-key`` makes one every time).
With ``--key-file`` the raw key is kept in that file (mode 600) and printed again on every run while it is still an
active key of the tenant with the rights asked for; a new one is made when it is missing or was revoked. What was
made is printed on stdout as ``name value`` lines (``admin_user``, ``admin_password``, ``api_key``; a value is empty
when it is not new), for the operator's terminal (`docker compose run --rm first-run`) or a script (scripts/start);
it is never logged. With ``--output-secret`` (Kubernetes, where a Job's output is its log) the values go to that
Secret of the pod's namespace instead, the new ones only (those not new keep what an earlier run stored), and stdout
has the admin's name alone; what was made is stored in the database only once the Secret has it
(:func:`common.infra.kubernetes.kubernetes_secret_merge`).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils.text import slugify

from common.infra.kubernetes import KubernetesError, kubernetes_secret_merge
from tenants.auth import key_hash
from tenants.models import ApiKey
from tenants.services import api_key_create


class Command(BaseCommand):
    help = "Create the admin user, demo data when asked (--demo), a tenant and an API key; prints what it made."

    def add_arguments(self, parser):
        parser.add_argument(
            "--demo",
            action="store_true",
            help="Load the demo profiles, with the multi_agent flag at 100 %% while untouched (manage.py seed_demo "
            "--multi-agent-for-everyone).",
        )
        parser.add_argument(
            "--sync",
            action="store_true",
            help="With --demo: read the finance server's manifest into goals before publishing (seed_demo --sync).",
        )
        parser.add_argument("--tenant", default="tenant_a", help="The tenant to make a key for (created if needed).")
        parser.add_argument("--new-key", action="store_true", help="Make a key even if the tenant has one.")
        parser.add_argument("--debug", action="store_true", help="The key may call /api/debug/*.")
        parser.add_argument("--preview", action="store_true", help="The key may call the multi-agent preview route.")
        parser.add_argument(
            "--key-file",
            default="",
            help="Keep the raw API key in this file (mode 600) and print it again while it is valid.",
        )
        parser.add_argument(
            "--password-file",
            default="",
            help="Keep a generated admin password in this file (mode 600) instead of printing it only once.",
        )
        parser.add_argument(
            "--output-secret",
            default="",
            metavar="NAME",
            help="Kubernetes: write the admin password and the API key to this Secret of the pod's namespace (it "
            "must exist; the pod's service account patches it), not to stdout.",
        )

    def handle(self, *args, **options):
        slug = options["tenant"].strip()
        if not slug or slugify(slug).replace("-", "_") != slug.replace("-", "_"):
            raise CommandError(f"--tenant must be a slug (lowercase letters, digits, _ and -), got {slug!r}.")
        if options["sync"] and not options["demo"]:
            raise CommandError("--sync reads the demo's finance manifest: give it with --demo.")
        if options["new_key"] and options["key_file"]:
            raise CommandError("--new-key and --key-file: give one of them.")
        if options["demo"]:
            demo = ["--multi-agent-for-everyone", *(["--sync"] if options["sync"] else [])]
            call_command("seed_demo", *demo, stdout=self.stderr)
        password_file = Path(options["password_file"]) if options["password_file"] else None
        if not options["output_secret"]:
            username, password = self._admin(password_file)
            raw_key = self._key(slug, options)
            self.stdout.write(f"admin_user {username}")
            self.stdout.write(f"admin_password {password}")
            self.stdout.write(f"api_key {raw_key}")
            return
        secret = options["output_secret"]
        # One transaction: a Secret that cannot be written leaves no admin nor key whose secret nobody has.
        with transaction.atomic():
            username, password = self._admin(password_file)
            raw_key = self._key(slug, options)
            made = {"admin_password": password, "api_key": raw_key}
            try:
                kubernetes_secret_merge(
                    name=secret, values={"admin_user": username, **{k: v for k, v in made.items() if v}}
                )
            except KubernetesError as exc:
                raise CommandError(f"--output-secret {secret}: {exc}; nothing was made.") from exc
        written = [name for name, value in made.items() if value]
        self.stderr.write(
            f"Secret {secret}: {', '.join(written) or 'nothing new'} written "
            f"(kubectl get secret {secret} -o jsonpath='{{.data.api_key}}' | base64 -d)."
        )
        self.stdout.write(f"admin_user {username}")

    def _admin(self, password_file: Path | None) -> tuple[str, str]:
        """The superuser's name, and its password when this run set it or the password file knows it."""
        user_model = get_user_model()
        username = os.environ.get("ADMIN_USERNAME", "admin")
        wanted = os.environ.get("ADMIN_PASSWORD", "")
        with transaction.atomic():
            admin = user_model.objects.filter(username=username).first()
            if wanted:
                if admin is None:
                    user_model.objects.create_superuser(username, os.environ.get("ADMIN_EMAIL", ""), wanted)
                else:
                    admin.set_password(wanted)
                    admin.save(update_fields=["password"])
                if password_file is not None:
                    password_file.unlink(missing_ok=True)
                self.stderr.write(f"Admin user {username}: password from ADMIN_PASSWORD.")
                return username, wanted
            superuser = admin if admin is not None and admin.is_superuser else None
            superuser = superuser or user_model.objects.filter(is_superuser=True).order_by("pk").first()
            if superuser is None:
                if admin is not None:
                    raise CommandError(
                        f"User {username!r} exists but is not a superuser; set ADMIN_USERNAME to another name."
                    )
                password = secrets.token_urlsafe(12)
                user_model.objects.create_superuser(username, os.environ.get("ADMIN_EMAIL", ""), password)
                if password_file is not None:
                    password_file.touch(mode=0o600)
                    password_file.write_text(password + "\n")
                self.stderr.write(f"Admin user {username} created with a generated password.")
                return username, password
        name = superuser.get_username()
        known = ""
        if password_file is not None and password_file.exists() and name == username:
            known = password_file.read_text().strip()
        self.stderr.write(f"Admin user {name} exists; password unchanged (set ADMIN_PASSWORD to reset it).")
        return name, known

    def _key(self, slug: str, options: dict) -> str:
        if options["key_file"]:
            return self._kept_key(slug, Path(options["key_file"]), options)
        has_key = ApiKey.objects.filter(tenant__slug=slug, is_active=True).exists()
        if has_key and not options["new_key"]:
            self.stderr.write(f"Tenant {slug} already has an active key; none made (--new-key makes one).")
            return ""
        key, raw = api_key_create(
            tenant_slug=slug, name="first run", is_debug=options["debug"], can_preview=options["preview"]
        )
        self.stderr.write(f"Created key {key.prefix}… for tenant {slug}.")
        return raw

    def _kept_key(self, slug: str, key_file: Path, options: dict) -> str:
        """The key in ``key_file`` while it is an active key of ``slug`` with the rights asked; else a new one."""
        raw = key_file.read_text().strip() if key_file.exists() else ""
        if raw:
            kept = ApiKey.objects.filter(
                key_hash=key_hash(raw), is_active=True, tenant__slug=slug, tenant__is_active=True
            ).first()
            wanted = (kept.is_debug or not options["debug"], kept.can_preview or not options["preview"]) if kept else ()
            if kept is not None and all(wanted):
                self.stderr.write(f"Tenant {slug}: key {kept.prefix}… from {key_file.name} is still valid; kept.")
                return raw
            self.stderr.write(f"Tenant {slug}: the key in {key_file.name} was revoked or lacks a right; making one.")
        key, raw = api_key_create(
            tenant_slug=slug, name="first run", is_debug=options["debug"], can_preview=options["preview"]
        )
        key_file.unlink(missing_ok=True)
        key_file.touch(mode=0o600)
        key_file.write_text(raw + "\n")
        self.stderr.write(f"Created key {key.prefix}… for tenant {slug}, kept in {key_file.name}.")
        return raw
