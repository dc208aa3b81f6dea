from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from agents.mcp import McpUnavailable
from agents.models import McpServer
from agents.services import mcp_server_sync


class Command(BaseCommand):
    help = (
        "Read MCP servers' tools/list and create or update their tools (descriptions and argument schemas), then "
        "read their domain manifests (manifest://<domain>) into goals and capabilities. What was edited in the "
        "admin is kept."
    )

    def add_arguments(self, parser):
        parser.add_argument("server", nargs="?", help="Server name; all enabled servers when omitted.")

    def handle(self, *args, **options):
        name = options["server"]
        servers = McpServer.objects.filter(name=name) if name else McpServer.objects.filter(enabled=True)
        if name and not servers.exists():
            raise CommandError(f"Unknown MCP server {name!r}.")
        failures = 0
        for server in servers:
            try:
                report = mcp_server_sync(server=server)
            except (McpUnavailable, ValidationError) as exc:
                failures += 1
                self.stderr.write(f"{server.name}: {exc}")
                continue
            self.stdout.write(str(report))
            for line in report.lines:
                self.stdout.write(line)
            for error in report.errors:
                self.stderr.write(error)
            if not report.ok:
                failures += 1
        if failures:
            raise CommandError(f"{failures} server(s) could not be synchronised.")
