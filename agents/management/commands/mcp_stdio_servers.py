from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from agents.mcp_stdio import declared
from agents.models import McpServer, McpTransport


class Command(BaseCommand):
    help = (
        "Register the stdio MCP servers MCP_STDIO_SERVERS declares as MCP servers (endpoint stdio:<name>), so that "
        "their tools can be synced (sync_mcp_tools) and offered; list them with their command lines. The platform "
        "starts each one on first use and restarts it when it stops."
    )

    def handle(self, *args, **options):
        try:
            servers = declared()
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        if not servers:
            self.stdout.write("MCP_STDIO_SERVERS declares no stdio server.")
        for server in servers.values():
            row = McpServer.objects.filter(name=server.name).first()
            if row is not None and row.endpoint != server.endpoint:
                raise CommandError(
                    f"{server.name}: an MCP server of that name already exists at {row.endpoint!r}; rename one."
                )
            if row is None:
                row = McpServer(name=server.name, transport=McpTransport.STDIO, endpoint=server.endpoint)
                row.full_clean()
                row.save()
                said = "registered"
            else:
                said = "registered already"
            self.stdout.write(f"{server.name}: {said} ({server.endpoint}: {' '.join(server.command)})")
