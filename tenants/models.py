"""Tenants, their API keys, and the rights a staff user holds over a tenant: who is calling, and whose data a
request may see."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator
from django.db import models

from common.config_version import VersionedQuerySet
from tenants.rates import rate_validate


class TenantRight(models.TextChoices):
    """What a logged-in user may do for a tenant through the API, the WebSocket and the chat page.

    Each is a permission on :class:`Tenant` (``tenants.<value>``): held by a user or a group, it covers every
    tenant; a :class:`TenantGrant` gives it for one tenant. Superusers hold them all. An API key needs none:
    it acts for its own tenant, its ``is_debug`` and ``can_preview`` flags say the rest.
    """

    READ = "read_conversations", "read conversations"
    MANAGE = "manage_conversations", "end and clear conversations"
    ACT = "act_for_tenant", "chat as the tenant"
    DEBUG = "debug_tenant", "use the debug routes"
    ANSWER = "answer_as_person", "answer as a person"


RETENTION_DAYS_MAX = 36_500  # a hundred years: past that, "0" (forever) says it


class Tenant(models.Model):
    """An organisation. API keys belong to one; it sees only its own conversations.

    Its message rates replace the settings' for its traffic (tenants/throttles.py): blank keeps the setting's. So
    does its retention window (:meth:`retention_window_days`), which the periodic purge reads.
    """

    slug = models.SlugField(max_length=64, unique=True, help_text="The tenant_id in conversation keys.")
    name = models.CharField(max_length=200, blank=True)
    is_active = models.BooleanField(default=True)
    message_rate_per_key = models.CharField(
        max_length=32,
        blank=True,
        validators=[rate_validate],
        help_text=(
            "Messages one API key of this tenant may send, e.g. 6000/minute, or off. One key usually carries all "
            "the tenant's customers. Blank: the API_MESSAGE_RATE_PER_KEY setting."
        ),
    )
    message_rate_per_session = models.CharField(
        max_length=32,
        blank=True,
        validators=[rate_validate],
        help_text=(
            "Messages one end user's conversation may send (its session; a message without a session counts "
            "against its user id), e.g. 60/minute, or off. Blank: the API_MESSAGE_RATE_PER_SESSION setting."
        ),
    )
    retention_days = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(RETENTION_DAYS_MAX)],
        help_text=(
            "Days a conversation is kept after its last message: older ones are purged with every row they left. "
            "0: kept forever. Blank: the RETENTION_DAYS setting."
        ),
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = VersionedQuerySet.as_manager()  # a bulk update (is_active) reaches every process's checks

    class Meta:
        db_table = "routing_tenant"  # the table kept its name when the model moved here from routing
        ordering = ["slug"]
        permissions = [
            (TenantRight.READ.value, "Can read the conversations of every tenant"),
            (TenantRight.MANAGE.value, "Can end and clear the conversations of every tenant"),
            (TenantRight.ACT.value, "Can chat as every tenant (API, WebSocket, chat page, multi-agent preview)"),
            (TenantRight.DEBUG.value, "Can use the debug routes (route debug, MCP tools) for every tenant"),
            (TenantRight.ANSWER.value, "Can take escalated conversations and answer as a person, for every tenant"),
        ]

    def __str__(self) -> str:
        return self.slug

    def retention_window_days(self) -> int | None:
        """Days its conversations are kept after their last message (its own, else the setting's); None: forever."""
        days = settings.RETENTION_DAYS if self.retention_days is None else self.retention_days
        return days or None


class ApiKey(models.Model):
    """A hashed bearer key. Only the prefix is kept readable; the key is shown once."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=200, blank=True)
    prefix = models.CharField(max_length=16, db_index=True, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    is_debug = models.BooleanField(default=False, help_text="May call /api/debug/*.")
    can_preview = models.BooleanField(default=False, help_text="May call POST /api/chat/multi-agent/message.")
    can_answer = models.BooleanField(
        default=False,
        help_text="May answer escalated conversations as a person (an external contact-center tool: the escalations "
        "API).",
    )
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        db_table = "routing_apikey"  # the table kept its name when the model moved here from routing
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.tenant})"


class TenantGrant(models.Model):
    """Rights of one user or one group over one tenant (the tenant-by-tenant form of the ``Tenant`` permissions)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="grants")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="tenant_grants"
    )
    group = models.ForeignKey(
        "auth.Group", null=True, blank=True, on_delete=models.CASCADE, related_name="tenant_grants"
    )
    read_conversations = models.BooleanField(default=False, help_text="Read this tenant's conversations.")
    manage_conversations = models.BooleanField(default=False, help_text="End and clear this tenant's conversations.")
    act_for_tenant = models.BooleanField(
        default=False, help_text="Chat as this tenant: API, WebSocket, chat page, multi-agent preview."
    )
    debug_tenant = models.BooleanField(
        default=False, help_text="Debug routes: the routing decision for this tenant, MCP tools list and call."
    )
    answer_as_person = models.BooleanField(
        default=False,
        help_text="The desk: take this tenant's escalated conversations, answer them as a person, hand them back.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    # A grant changed in bulk (a shell's update) reaches the desk sockets' checks at once, as a saved one does.
    objects = VersionedQuerySet.as_manager()

    class Meta:
        ordering = ["tenant", "id"]
        verbose_name = "tenant grant"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(user__isnull=False, group__isnull=True)
                | models.Q(user__isnull=True, group__isnull=False),
                name="tenantgrant_user_xor_group",
                violation_error_message="A grant is for a user or for a group (exactly one).",
            ),
            models.UniqueConstraint(
                fields=["tenant", "user"], name="tenantgrant_one_per_user", condition=models.Q(user__isnull=False)
            ),
            models.UniqueConstraint(
                fields=["tenant", "group"], name="tenantgrant_one_per_group", condition=models.Q(group__isnull=False)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user or self.group} on {self.tenant}"


class RetentionPurge(models.Model):
    """One run of a tenant's retention purge (``conversations/customer_data/retention.py``): the conversations whose
    last message was before ``cutoff``, deleted batch by batch with every row they left.

    Written when the purge starts, before any row goes, and updated in each batch's transaction with what it deleted:
    ``counts`` (rows per model label) always match what is gone; ``finished_at`` is blank while it runs, or when it
    stopped before its end (the next run finishes the work). The cutoffs recorded also tell the analytics which days'
    totals are final (their rows may be gone)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="retention_purges")
    window_days = models.PositiveIntegerField()
    cutoff = models.DateTimeField(help_text="Conversations whose last message was before this were purged.")
    counts = models.JSONField(default=dict, blank=True, help_text="Rows deleted per model.")
    batches = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    seconds = models.FloatField(null=True, blank=True, help_text="How long it ran, pauses between batches included.")

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["cutoff"], name="retention_purge_cutoff")]

    def __str__(self) -> str:
        return f"{self.tenant} before {self.cutoff:%Y-%m-%d}"
