"""MCP servers and the tools they publish."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from agents.mcp_stdio import SCHEME as STDIO_SCHEME
from agents.schemas import validate_mcp_endpoint, validate_tool_args_schema


class McpTransport(models.TextChoices):
    STREAMABLE_HTTP = "streamable_http", "Streamable HTTP"
    # Declared in MCP_STDIO_SERVERS, registered by `manage.py mcp_stdio_servers`: never chosen in a form.
    STDIO = "stdio", "stdio (declared by the operator)"


class McpServer(models.Model):
    name = models.SlugField(max_length=64, unique=True)
    description = models.TextField(blank=True)
    transport = models.CharField(max_length=32, choices=McpTransport.choices, default=McpTransport.STREAMABLE_HTTP)
    endpoint = models.CharField(
        max_length=500,
        validators=[validate_mcp_endpoint],
        help_text="e.g. http://localhost:8100/mcp; stdio:<name> for a stdio server the operator declared "
        "(MCP_STDIO_SERVERS).",
    )
    endpoint_template = models.CharField(
        max_length=500,
        blank=True,
        editable=False,
        help_text="The endpoint as the imported file wrote it, with its ${NAME} or ${NAME:-default} references "
        "(the endpoint is what they expanded to); the export writes it back. Blank when the endpoint was typed "
        "(an address typed in the admin clears it).",
    )
    enabled = models.BooleanField(default=True)
    timeout = models.FloatField(
        default=10.0,
        validators=[MinValueValidator(0.1), MaxValueValidator(300.0)],
        help_text="Seconds before a call to this server is given up.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "MCP server"

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        stdio = self.endpoint.startswith(STDIO_SCHEME)
        if stdio != (self.transport == McpTransport.STDIO):
            raise ValidationError(
                {"transport": "A stdio: endpoint goes with the stdio transport, and only such an endpoint does."}
            )


class McpTool(models.Model):
    """An MCP server's tool as the platform offers it. ``name`` is the platform's (unique, what a model calls and the
    configuration names); ``remote_name`` is the server's when it differs: a ``.`` or ``/`` in it, or a name another
    server's tool already has (a sync then names it ``<server>__<name>``: :func:`agents.services.tool_name_for`)."""

    name = models.SlugField(max_length=100, unique=True)
    remote_name = models.CharField(
        max_length=128,
        blank=True,
        verbose_name="name on the server",
        help_text="The tool's name on its MCP server, when it is not the name above (blank: the same).",
    )
    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="tools")
    description = models.TextField(blank=True)
    synced_description = models.TextField(
        blank=True,
        editable=False,
        help_text="The description the server gave at the last sync: while the description still equals it, "
        "nobody edited it, and a sync may replace it.",
    )
    args_schema = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_tool_args_schema],
        help_text='JSON Schema of the arguments, e.g. {"type": "object", "properties": {"msisdn": {"type": "string"}}}',
    )
    enabled = models.BooleanField(default=True)
    needs_permission = models.BooleanField(
        default=False,
        help_text="Run only after the user agreed in the conversation.",
    )
    read_only = models.BooleanField(
        null=True,
        default=None,
        editable=False,
        verbose_name="only reads",
        help_text="What the server said at the last sync (its readOnlyHint): yes, the tool only reads; no, it may "
        "change something (send a message, place an order), which MCP assumes when a server does not say; unknown, "
        "never synced. An answer after a successful call of a tool that may change something is never replaced by "
        "the review.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "MCP tool"
        constraints = [
            models.UniqueConstraint(
                fields=["server", "remote_name"], condition=~Q(remote_name=""), name="mcp_tool_remote_name_per_server"
            )
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def called_as(self) -> str:
        """The name its server knows it by."""
        return self.remote_name or self.name
