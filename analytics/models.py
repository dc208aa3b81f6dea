"""The analytics' own tables: daily totals of closed days (and of the live day's closed hours), and the permission that
opens the analytics to a user.

The analytics read conversations, messages, route decisions, tool calls, handoffs, outcomes and ratings. Summing those
rows over 90 days of a busy platform takes seconds, so every UTC day that has closed is summed once into the ``Daily*``
tables below (:mod:`analytics.rollups` says what each holds and how; :mod:`analytics.services` builds them).
A :class:`RollupDay` row marks a day whose totals are complete; the selectors read those days from the totals
and every other day (today, a day not built yet, a day whose totals went stale) from the rows themselves, so
the figures are the same either way. The live day's closed hours are summed into the same tables at hour grain
(``hour`` set), one :class:`RollupHour` mark per hour and table, so that a read of today takes only the current hour
(and any hour not summed) from the rows.
"""

from __future__ import annotations

from django.db import models


class AnalyticsAccess(models.Model):
    """Holder of the ``analytics.view_analytics`` permission; no table behind it (never queried).

    A user with the permission (superusers have every permission) reads the analytics of every tenant, or of one
    with ``tenant=``; an API key reads its own tenant's only.
    """

    class Meta:
        managed = False
        default_permissions = ()
        permissions = [("view_analytics", "Can view the analytics of every tenant")]
        verbose_name = "analytics access"
        verbose_name_plural = "analytics access"

    def __str__(self) -> str:
        return "analytics access"


class RollupDay(models.Model):
    """One UTC day of the daily totals. ``sealed``: its totals are complete and the selectors read them.

    A change to a closed day's rows (a cleared session, a conversation of that day changing cohort or having
    its first move of a kind) unseals it; it is built again on the next read or ``rollup_analytics`` run.
    """

    day = models.DateField(primary_key=True)
    sealed = models.BooleanField(default=False)
    built_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["day"]

    def __str__(self) -> str:
        return f"{self.day} ({'sealed' if self.sealed else 'open'})"


class RollupHour(models.Model):
    """One closed UTC hour of the live day in one daily table (``fact``: :attr:`analytics.rollups.Fact.name`).
    ``sealed``: that table's rows of the hour (``hour`` set) are complete and the selectors read them.

    A mark per table, not per hour: a conversation counted in a closed hour that changes cohort or kinds of move in
    the minutes after unseals only the conversations' hour, not the messages' (their rows do not change). The marks
    of a day go when the day itself is summed (:func:`analytics.services.rollup_build`).
    """

    hour = models.DateTimeField()
    fact = models.CharField(max_length=32)
    sealed = models.BooleanField(default=False)
    built_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["hour", "fact"]
        constraints = [models.UniqueConstraint(fields=["hour", "fact"], name="rollup_hour_fact_unique")]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H}:00 {self.fact} ({'sealed' if self.sealed else 'open'})"


class DailyTotal(models.Model):
    """Columns every daily table shares: the day (and the hour, for a live day's closed hour), the tenant and profile,
    and how many rows were summed."""

    day = models.DateField()
    # None: the row sums the whole (sealed) day; 0-23: that UTC hour of a day not closed yet (RollupHour).
    hour = models.PositiveSmallIntegerField(null=True, blank=True)
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    profile = models.ForeignKey("agents.AgentProfile", on_delete=models.CASCADE, related_name="+")
    n = models.PositiveBigIntegerField()

    # Every daily table's manager, declared here so that code handling any of them (analytics.rollups.Fact) sees it.
    objects = models.Manager()

    class Meta:
        abstract = True

    def describe(self, *dimensions: object) -> str:
        when = str(self.day) if self.hour is None else f"{self.day} {self.hour:02d}:00"
        scope = [when, f"tenant {self.tenant_id}", f"profile {self.profile_id}"]
        return " · ".join([*scope, *map(str, dimensions), f"n={self.n}"])


def _indexes(name: str) -> list[models.Index]:
    return [
        models.Index(fields=["day", "tenant", "profile"], name=f"{name}_day"),
        models.Index(fields=["tenant", "day", "profile"], name=f"{name}_tenant_day"),
    ]


# The conversation's language (conversations.Conversation.language): blank while none has been told.
LANGUAGE_HELP = "The conversation's language (pt, en, es); blank: none told yet."


class DailyMessages(DailyTotal):
    """Messages per day, tenant, profile, cohort, routing version, role, agent and their conversation's language,
    with the answers' latency and judge sums."""

    cohort = models.CharField(max_length=16, blank=True)
    routing_version = models.PositiveIntegerField(null=True, blank=True)
    role = models.CharField(max_length=16)
    agent = models.CharField(max_length=64, blank=True)
    language = models.CharField(max_length=8, blank=True, help_text=LANGUAGE_HELP)
    latency_sum = models.FloatField(default=0.0)
    latency_n = models.PositiveBigIntegerField(default=0)
    judge_sum = models.FloatField(default=0.0)
    judge_n = models.PositiveBigIntegerField(default=0)

    class Meta:
        indexes = _indexes("daily_messages")
        verbose_name_plural = "daily messages"

    def __str__(self) -> str:
        return self.describe(self.cohort, self.role, self.agent)


class DailyLatencies(DailyTotal):
    """Answers per latency bucket (a log scale, see :data:`analytics.rollups.LATENCY_BUCKET_RATIO`)."""

    cohort = models.CharField(max_length=16, blank=True)
    routing_version = models.PositiveIntegerField(null=True, blank=True)
    bucket = models.SmallIntegerField()

    class Meta:
        indexes = _indexes("daily_latencies")
        verbose_name_plural = "daily latencies"

    def __str__(self) -> str:
        return self.describe(self.cohort, f"bucket {self.bucket}")


class DailyRouteMethods(DailyTotal):
    """Route decisions per method, the cohort and routing version of the user message they routed, and their
    conversation's language."""

    method = models.CharField(max_length=32)
    cohort = models.CharField(max_length=16, blank=True)
    routing_version = models.PositiveIntegerField(null=True, blank=True)
    language = models.CharField(max_length=8, blank=True, help_text=LANGUAGE_HELP)

    class Meta:
        indexes = _indexes("daily_route_methods")
        verbose_name_plural = "daily route methods"

    def __str__(self) -> str:
        return self.describe(self.method)


class DailyToolCalls(DailyTotal):
    """MCP tool calls per tool, server and status and the answer's cohort and routing version, with their latency
    sum."""

    tool = models.CharField(max_length=200)
    server = models.CharField(max_length=100)
    status = models.CharField(max_length=32)
    latency_sum = models.FloatField(default=0.0)
    cohort = models.CharField(max_length=16, blank=True)
    routing_version = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        indexes = _indexes("daily_tool_calls")
        verbose_name_plural = "daily tool calls"

    def __str__(self) -> str:
        return self.describe(self.tool, self.server, self.status)


class DailyHandoffs(DailyTotal):
    """``agent_handoffs`` rows per cohort, routing version, path, kind, status and outcome."""

    cohort = models.CharField(max_length=16, blank=True)
    routing_version = models.PositiveIntegerField(null=True, blank=True)
    from_agent = models.CharField(max_length=64)
    to_agent = models.CharField(max_length=64)
    kind = models.CharField(max_length=32)
    status = models.CharField(max_length=16)
    outcome = models.CharField(max_length=32, blank=True)

    class Meta:
        indexes = _indexes("daily_handoffs")
        verbose_name_plural = "daily handoffs"

    def __str__(self) -> str:
        return self.describe(f"{self.from_agent} → {self.to_agent}", self.kind, self.status, self.outcome)


class DailyConversations(DailyTotal):
    """Conversations by the day they were created, per cohort, the routing version of their first user message,
    the kinds of completed move they have had and their language."""

    cohort = models.CharField(max_length=16, blank=True)
    routing_version = models.PositiveIntegerField(null=True, blank=True)
    handoff_kinds = models.PositiveSmallIntegerField()
    language = models.CharField(max_length=8, blank=True, help_text=LANGUAGE_HELP)

    class Meta:
        indexes = _indexes("daily_conversations")
        verbose_name_plural = "daily conversations"

    def __str__(self) -> str:
        return self.describe(self.cohort, f"kinds {self.handoff_kinds}")


class DailyOutcomes(DailyTotal):
    """Conversations' outcomes by the day they were decided, per cohort, routing version, outcome, intent, goal and
    agent (as :class:`conversations.models.ConversationOutcome` holds them), with their rated answers summed."""

    cohort = models.CharField(max_length=16, blank=True)
    routing_version = models.PositiveIntegerField(null=True, blank=True)
    outcome = models.CharField(max_length=16)
    intent = models.CharField(max_length=100, blank=True)
    goal = models.CharField(max_length=100, blank=True)
    agent = models.CharField(max_length=64, blank=True)
    rated_up = models.PositiveBigIntegerField(default=0)
    rated_down = models.PositiveBigIntegerField(default=0)

    class Meta:
        indexes = _indexes("daily_outcomes")
        verbose_name_plural = "daily outcomes"

    def __str__(self) -> str:
        return self.describe(self.outcome, self.intent or self.goal, self.agent)


class DailyRatings(DailyTotal):
    """Customers' ratings of answers by the day (and hour) the rated answer was given, per cohort, routing version, the
    agent that wrote the answer and the agent its turn's route decision chose (as
    :class:`conversations.models.MessageFeedback` repeats them), ``n`` of them rated, ``up`` and ``down``."""

    cohort = models.CharField(max_length=16, blank=True)
    routing_version = models.PositiveIntegerField(null=True, blank=True)
    agent = models.CharField(max_length=64, blank=True)
    route_agent = models.CharField(max_length=64, blank=True)
    up = models.PositiveBigIntegerField(default=0)
    down = models.PositiveBigIntegerField(default=0)

    class Meta:
        indexes = _indexes("daily_ratings")
        verbose_name_plural = "daily ratings"

    def __str__(self) -> str:
        return self.describe(self.agent, self.route_agent, f"up {self.up}", f"down {self.down}")
