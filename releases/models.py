"""The release lifecycle's tables: saved routing tests and conversation tests with their runs, rollout plans and
their decisions, and the requests waiting for a second person. The versions themselves, and which one each profile
is served (``RoutingVersion``, ``ProfileRelease``), are what routing serves: they stay in :mod:`routing.models`.

The tables kept the names they had when these models lived in routing (``routing_…``; migrations
``routing/0046`` and ``releases/0001``): no row moved."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from common.fields import OrderedJSONField
from common.language import LANGUAGES
from common.outbound import validate_outbound_url
from routing.models import LiveRollout, RoutingVersion
from routing.public import (
    CONVERSATION_TEST_EXPECT_KEYS,
    CONVERSATION_TEST_MAX_TURNS,
    CONVERSATION_TEST_NAME_MAX,
    PLAN_SETTINGS,
    ROUTING_TEST_KEYS,
    ROUTING_TEST_MAX_TURNS,
    ROUTING_TEST_NAME_MAX,
    conversation_test_problems,
    default_rollout_guards,
    default_rollout_stages,
    plan_errors,
    problem_text,
    routing_test_expect_errors,
    routing_test_input_limit,
    routing_test_turns_problems,
    stage_words,
    turns_where,
)

# -- saved routing tests --------------------------------------------------------------
# A profile's expected decisions for given messages; they run on the draft or any version (releases.routing_tests)
# and gate publishing (releases.versions.version_publish). What they may expect: routing.expectations.


class RoutingTestCase(models.Model):
    """A saved routing test: for ``message`` (in ``state``, with ``active_specialist`` answering), the profile
    must decide what ``expect`` names — any of intent, agent, method, next_state, goal, status, and what the
    conversation shows: events, repair, state_after, topics. With ``turns`` it is a short conversation: those
    messages come first, in order, each checked against its own ``expect`` when it has one."""

    profile = models.ForeignKey("agents.AgentProfile", on_delete=models.CASCADE, related_name="routing_tests")
    name = models.CharField(max_length=ROUTING_TEST_NAME_MAX, help_text="e.g. fatura alta")
    message = models.TextField(help_text="The user's message (in a conversation, its last one).")
    state = models.CharField(
        max_length=100, blank=True, help_text="The conversation's state, e.g. WAITING_PAYMENT_CONFIRMATION."
    )
    active_specialist = models.CharField(
        max_length=100, blank=True, help_text="The specialist answering the conversation, e.g. billing_agent."
    )
    expect = models.JSONField(
        default=dict,
        help_text='What the decision must be, e.g. {"intent": "billing_invoice_explanation", "agent": '
        '"billing_agent", "method": "keyword"}; keys: ' + ", ".join(ROUTING_TEST_KEYS) + ".",
    )
    turns = models.JSONField(
        default=list,
        blank=True,
        help_text="The customer's messages before this one, oldest first (at most "
        f'{ROUTING_TEST_MAX_TURNS}): a list of {{"message": …, "expect": {{…}}}}, expect optional; empty for '
        "a single message.",
    )
    enabled = models.BooleanField(default=True, help_text="Disabled tests neither run nor gate publishing.")
    # A test made from a stored customer message ("Add as routing test case"): which message, and what was decided for
    # it, so that the decisions editors corrected are counted (docs/analytics.md, "Routing accuracy"). A number, not a
    # foreign key: the conversation store is a layer above.
    source_message_id = models.PositiveBigIntegerField(null=True, blank=True, db_index=True)
    source_intent = models.CharField(max_length=100, blank=True, help_text="The decided intent the test started from.")
    source_agent = models.CharField(max_length=64, blank=True, help_text="The decided agent the test started from.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "routing_routingtestcase"  # its name from when routing owned it
        ordering = ["profile__agent_id", "name"]
        verbose_name = "routing test"
        constraints = [
            models.UniqueConstraint(fields=["profile", "name"], name="routing_test_unique_name_per_profile"),
        ]
        # Writing the threshold and margin calibration chose to a profile's draft (releases.calibration).
        permissions = [("calibrate_routingtestcase", "Can save a profile's examples-tier calibration to its draft")]

    def __str__(self) -> str:
        return self.name

    def clean_fields(self, exclude: Any = None) -> None:
        # Checked with the fields, not in clean(): a form that edits ``expect`` through fields of its own (the admin's,
        # releases.forms.RoutingTestCaseForm) leaves it out and names its own errors — Django's documented way.
        errors: dict[str, Any] = {}
        try:
            super().clean_fields(exclude=exclude)
        except ValidationError as exc:
            errors = exc.update_error_dict(errors)
        if not exclude or "expect" not in exclude:
            problems = routing_test_expect_errors(self.expect)
            if problems:
                errors["expect"] = [f"expect: {problem}" for problem in problems]
        if not exclude or "turns" not in exclude:
            limit = routing_test_input_limit(self.profile if self.profile_id else None)
            found = routing_test_turns_problems(self.turns, max_chars=limit)
            if found:
                errors["turns"] = [f"{turns_where(where)}: {problem}" for where, problem in found]
        if errors:
            raise ValidationError(errors)


class ConversationTest(models.Model):
    """A saved conversation test: turns played in order against a version of the profile, each with what its answer
    must show — routing, the answer, tools, flow, a judge's score (:mod:`routing.conversation_tests.cases` is the
    contract; :mod:`releases.evals` plays them). ``required``: a failure blocks publishing and rollout stages."""

    profile = models.ForeignKey("agents.AgentProfile", on_delete=models.CASCADE, related_name="conversation_tests")
    name = models.CharField(max_length=CONVERSATION_TEST_NAME_MAX, help_text="e.g. a high invoice is explained")
    required = models.BooleanField(default=True, help_text="A failure blocks publishing and rollout stages.")
    enabled = models.BooleanField(default=True, help_text="Disabled tests neither run nor gate.")
    language = models.CharField(
        max_length=8,
        blank=True,
        choices=[(code, code) for code in LANGUAGES],
        help_text="The conversation's language: every answer must be in it unless a turn expects another.",
    )
    user_id = models.CharField(max_length=200, blank=True, help_text="The customer's id, as a face gives it.")
    channel = models.CharField(max_length=64, blank=True, help_text="e.g. whatsapp; empty: the API's.")
    context = models.JSONField(default=dict, blank=True, help_text='What a face sends, e.g. {"msisdn": "5511…"}.')
    tool_answers = OrderedJSONField(
        default=dict,
        blank=True,
        help_text='Recorded answers used in place of calling the tools, e.g. {"consultar_fatura": {"total": 120}}.',
    )
    turns = OrderedJSONField(
        default=list,
        help_text='The turns, in order (at most {max}): a list of {{"user": "…", "expect": {{…}}}}, with an optional '
        '"channel", "context" and "tool_answers" each; expect keys: {keys}.'.format(
            max=CONVERSATION_TEST_MAX_TURNS, keys=", ".join(CONVERSATION_TEST_EXPECT_KEYS)
        ),
    )
    # A test made from a stored customer message ("add as conversation test"): which one. A number, not a foreign
    # key: the conversation store is a layer above.
    source_message_id = models.PositiveBigIntegerField(null=True, blank=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "routing_conversationtest"  # its name from when routing owned it
        ordering = ["profile__agent_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["profile", "name"], name="conversation_test_unique_name_per_profile"),
        ]

    def __str__(self) -> str:
        return self.name

    def data(self) -> dict[str, Any]:
        """The test in the YAML item's shape (:mod:`routing.conversation_tests.cases`)."""
        return {
            "name": self.name,
            "required": self.required,
            "enabled": self.enabled,
            "language": self.language,
            "user": self.user_id,
            "channel": self.channel,
            "context": self.context,
            "tool_answers": self.tool_answers,
            "turns": self.turns,
        }

    def clean_fields(self, exclude: Any = None) -> None:
        # The contract's checks, each problem on the field it is about (a turn's, on ``turns``): the admin's form and
        # a YAML file refuse the same things.
        errors: dict[str, Any] = {}
        try:
            super().clean_fields(exclude=exclude)
        except ValidationError as exc:
            errors = exc.update_error_dict(errors)
        django = set(errors)
        limit = routing_test_input_limit(self.profile if self.profile_id else None)
        for where, problem in conversation_test_problems(self.data(), max_chars=limit):
            name = {"user": "user_id"}.get(str(where[0]), str(where[0])) if where else NON_FIELD_ERRORS
            if name in django or (exclude and name in exclude):
                continue
            errors.setdefault(name, []).append(problem_text(where if name == "turns" else where[1:], problem))
        if errors:
            raise ValidationError(errors)


class ConversationTestRunStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    FINISHED = "finished", "Finished"
    ERROR = "error", "Could not run"


class ConversationTestRunSource(models.TextChoices):
    ADMIN = "admin", "The admin"
    API = "api", "The API"
    COMMAND = "command", "manage.py run_conversation_tests"


class ConversationTestRun(models.Model):
    """A run of a profile's conversation tests against one of its versions (:mod:`releases.evals.runs` writes it):
    what was asked, who or what started it, its progress and counts, the model usage of its turns and judges (the
    run's, never a tenant's), and what of the profile the suite covered. Each test's result is a
    :class:`ConversationTestResult`."""

    profile = models.ForeignKey("agents.AgentProfile", on_delete=models.CASCADE, related_name="conversation_test_runs")
    version = models.CharField(max_length=16, help_text="As asked: draft, live or a version number.")
    version_number = models.PositiveIntegerField(
        null=True, blank=True, help_text="The published version played (blank: the draft)."
    )
    compared_with = models.CharField(max_length=16, blank=True, help_text="The version played beside it, if any.")
    names = models.JSONField(default=list, blank=True, help_text="The tests asked for (empty: every enabled test).")
    source = models.CharField(max_length=16, choices=ConversationTestRunSource.choices)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The tenant whose debug key or staff session asked (the API): who may read the run back. Blank: the operators'.
    tenant = models.ForeignKey("tenants.Tenant", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(
        max_length=16, choices=ConversationTestRunStatus.choices, default=ConversationTestRunStatus.QUEUED
    )
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0, help_text="Tests played so far.")
    passed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    required_failed = models.PositiveIntegerField(default=0)
    changed = models.PositiveIntegerField(default=0, help_text="Tests whose result or answers differ (a comparison).")
    usage = models.JSONField(default=dict, blank=True, help_text="The model calls of its turns and judges.")
    coverage = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "routing_conversationtestrun"  # its name from when routing owned it
        ordering = ["-created_at", "-pk"]
        verbose_name = "conversation test run"

    def __str__(self) -> str:
        return f"{self.profile.agent_id} {self.version} #{self.pk}"


class ConversationTestResult(models.Model):
    """One test's result in a run: whether it passed, and everything it showed (``result``: each turn's answer,
    decision, tools and failed checks; with a comparison, ``compared``: both sides and the answers that changed)."""

    run = models.ForeignKey(ConversationTestRun, on_delete=models.CASCADE, related_name="results")
    name = models.CharField(max_length=CONVERSATION_TEST_NAME_MAX)
    required = models.BooleanField(default=True)
    passed = models.BooleanField(default=False)
    outcome = models.CharField(max_length=16, blank=True, help_text="Against the compared version, if any.")
    # The saved test's, when it was made from a stored customer message: its erasure reaches this result too.
    source_message_id = models.PositiveBigIntegerField(null=True, blank=True, db_index=True)
    result = models.JSONField(default=dict)

    class Meta:
        db_table = "routing_conversationtestresult"  # its name from when routing owned it
        ordering = ["passed", "pk"]  # failures first

    def __str__(self) -> str:
        return self.name


# -- progressive delivery --------------------------------------------------------------
# A rollout plan moves a published routing version of a profile (or the multi_agent flag) to its users in stages,
# watched by guard metrics against the control cohort; releases.rollout.guard decides, every minute, to
# advance, hold or roll back, and records each decision with the figures that drove it (routing.rollout_plans).


class RolloutPlanTarget(models.TextChoices):
    VERSION = "version", "A routing version of the profile"
    MULTI_AGENT = "multi_agent", "The multi-agent mode (its rollout flag)"


class RolloutPlanStatus(models.TextChoices):
    READY = "ready", "Ready (not started)"
    RUNNING = "running", "Running"
    PAUSED = "paused", "Paused (holding its stage)"
    ROLLED_BACK = "rolled_back", "Rolled back"
    COMPLETED = "completed", "Completed"
    ABORTED = "aborted", "Aborted"


ROLLOUT_PLAN_ACTIVE = (RolloutPlanStatus.RUNNING, RolloutPlanStatus.PAUSED)


class RolloutPlanQuerySet(models.QuerySet):
    """A plan written in bulk (a shell's or a script's ``update``, ``bulk_update``, ``bulk_create``) rewrites what
    routing serves of it too, as a save does (its receiver, ``ReleasesConfig.ready``): routing reads no plan."""

    def update(self, **kwargs: Any) -> int:
        pks = list(self.values_list("pk", flat=True))
        count = super().update(**kwargs)
        for plan in RolloutPlan.objects.filter(pk__in=pks).select_related("control"):
            plan.serve()
        return count

    def bulk_create(self, objs: Any, *args: Any, **kwargs: Any) -> Any:
        created = super().bulk_create(objs, *args, **kwargs)
        for plan in created:
            if isinstance(plan, RolloutPlan) and plan.pk is not None:
                plan.serve()
        return created


class RolloutPlan(models.Model):
    """Roll a routing version of a profile (against the version live when the plan starts) or the multi_agent
    flag out in stages: each stage's share of new conversations, held at least ``hold_minutes`` and until each
    cohort has ``min_conversations``, guarded by metrics relative to the control cohort."""

    name = models.CharField(max_length=200)
    target = models.CharField(max_length=16, choices=RolloutPlanTarget.choices, default=RolloutPlanTarget.VERSION)
    profile = models.ForeignKey(
        "agents.AgentProfile",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="rollout_plans",
        help_text="The profile whose version is rolled out; for the multi-agent mode, the profile whose traffic is "
        "watched (empty: every profile).",
    )
    candidate = models.ForeignKey(
        RoutingVersion,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text="The version rolled out: one made from the profile's draft and not live yet (“Roll out in "
        "stages” on the profile's publish page makes it, or tick “make the candidate from the draft” here).",
    )
    control = models.ForeignKey(
        RoutingVersion,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text="The version live when the plan started: the control cohort's.",
    )
    stages = models.JSONField(
        default=default_rollout_stages,
        help_text="The share of new conversations the candidate gets at each stage, in percent, rising and ending at "
        "100: e.g. 10, 50, 100.",
    )
    hold_minutes = models.PositiveIntegerField(default=60, help_text="The least time a stage runs before advancing.")
    min_conversations = models.PositiveIntegerField(
        default=200, help_text="The least conversations each cohort needs in a stage before anything moves."
    )
    guards = models.JSONField(
        default=default_rollout_guards,
        help_text="What rolls the plan back: per metric, how much worse than the control the candidate may be "
        "(relative limit, e.g. 25 % worse) and a level it may never pass (absolute limit); a metric with neither "
        "is not guarded.",
    )
    max_errors = models.PositiveIntegerField(
        default=20, help_text="Failed specialist parts and tool errors the candidate may have in a stage, absolute."
    )
    alpha = models.FloatField(
        default=0.01,
        validators=[MinValueValidator(0.0001), MaxValueValidator(0.2)],
        help_text="Significance a rate or score difference needs before it rolls back (one-sided tests).",
    )
    webhook_url = models.URLField(
        blank=True,
        validators=[validate_outbound_url],  # never an internal address (common/outbound.py)
        help_text="Optional: each decision that moves the plan is posted here.",
    )
    status = models.CharField(max_length=16, choices=RolloutPlanStatus.choices, default=RolloutPlanStatus.READY)
    stage = models.PositiveSmallIntegerField(
        default=0, help_text="The running stage (the first is stored as 0 and shown as stage 1)."
    )
    stage_started_at = models.DateTimeField(null=True, blank=True)
    history = models.JSONField(
        default=list,
        blank=True,
        help_text="[started at (ISO), percentage] of each stage run, in order: which share of new conversations "
        "each moment gave the candidate (a conversation keeps the cohort its start gave it).",
    )
    started_at = models.DateTimeField(null=True, blank=True)
    started_as = models.CharField(
        max_length=64,
        blank=True,
        help_text="A fingerprint of its candidate and settings when it started (what a second person approved): it "
        "advances and completes only while they are the same.",
    )
    finished_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = RolloutPlanQuerySet.as_manager()

    class Meta:
        db_table = "routing_rolloutplan"  # its name from when routing owned it
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status"], name="rollout_plan_status")]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors = plan_errors(
            target=self.target,
            stages=self.stages,
            guards=self.guards,
            profile=self.profile,
            candidate=self.candidate,
        )
        if errors:
            raise ValidationError(errors)

    def serve(self) -> None:
        """Write what routing serves of this plan (:class:`routing.models.LiveRollout`): its candidate, as the plan
        holds it, while the plan runs or is paused; nothing once it stopped. The row is rewritten only when it
        changed: a save that changes nothing routing serves (a guard's hold) rebuilds no process's snapshot."""
        served = LiveRollout.objects.filter(plan_id=self.pk)
        if not (
            self.status in ROLLOUT_PLAN_ACTIVE
            and self.target == RolloutPlanTarget.VERSION
            and self.candidate_id
            and self.profile_id
        ):
            served.delete()
            return
        row = {
            "profile_id": self.profile_id,
            "candidate_id": self.candidate_id,
            "control_number": self.control.number if self.control is not None else None,
            "history": self.history,
            "settings": {name: getattr(self, name) for name in PLAN_SETTINGS},
            "started_as": self.started_as,
        }
        if served.values(*row).first() != row:
            LiveRollout.objects.update_or_create(plan_id=self.pk, defaults=row)

    @property
    def percentage(self) -> int:
        """The share of new conversations the candidate gets now: its stage's while running or paused, 100 once the
        plan completed (the candidate is served to everyone), else 0."""
        if self.status == RolloutPlanStatus.COMPLETED:
            return 100
        if self.status not in ROLLOUT_PLAN_ACTIVE or not self.stages:
            return 0
        return int(self.stages[min(self.stage, len(self.stages) - 1)])


class RolloutDecisionAction(models.TextChoices):
    START = "start", "Started"
    HOLD = "hold", "Held"
    ADVANCE = "advance", "Advanced"
    ROLLBACK = "rollback", "Rolled back"
    COMPLETE = "complete", "Completed"
    PAUSE = "pause", "Paused"
    RESUME = "resume", "Resumed"
    ABORT = "abort", "Aborted"


class RolloutDecision(models.Model):
    """One evaluation or command of a plan, with the figures that drove it. Written once, never edited."""

    plan = models.ForeignKey(RolloutPlan, on_delete=models.CASCADE, related_name="decisions")
    action = models.CharField(max_length=16, choices=RolloutDecisionAction.choices)
    stage = models.PositiveSmallIntegerField()
    percentage = models.PositiveSmallIntegerField()
    reason = models.TextField()
    figures = models.JSONField(default=dict, blank=True, help_text="Per cohort: samples and every guard metric.")
    actor = models.CharField(
        max_length=200, help_text="Who decided: the guard, a person in the admin, or someone at the command line."
    )
    webhook = models.CharField(max_length=200, blank=True, help_text="How the webhook answered (blank: not sent).")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "routing_rolloutdecision"  # its name from when routing owned it
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["plan", "-created_at"], name="rollout_decision_plan_recent")]

    def __str__(self) -> str:
        return f"{self.plan}: {self.get_action_display().lower()} at {stage_words(self.stage, self.plan.stages)}"


# -- the two-person rule ------------------------------------------------------------------------------------------
# A profile may ask for a second person (AgentProfile.release_needs_approval): an editor's publish or rollout start
# becomes a request that someone with releases.approve_release approves or declines (releases.approvals).


class ReleaseKind(models.TextChoices):
    PUBLISH = "publish", "Publish to everyone"
    ROLLOUT = "rollout", "Roll out in stages"


class ReleaseStatus(models.TextChoices):
    PENDING = "pending", "Waiting for approval"
    APPROVED = "approved", "Approved"
    DECLINED = "declined", "Declined"
    STALE = "stale", "Out of date (the draft or the live version changed)"
    WITHDRAWN = "withdrawn", "Withdrawn"


class ReleaseRequest(models.Model):
    """A publish or a rollout start waiting for a second person. A publish request holds the fingerprint of the
    draft its requester reviewed (:func:`common.fingerprint.document_fingerprint`) and the live version then; a
    rollout request, its ready plan (whose candidate was made from the draft). Written by releases.approvals only."""

    profile = models.ForeignKey("agents.AgentProfile", on_delete=models.CASCADE, related_name="release_requests")
    kind = models.CharField(max_length=16, choices=ReleaseKind.choices)
    status = models.CharField(max_length=16, choices=ReleaseStatus.choices, default=ReleaseStatus.PENDING)
    based_on = models.PositiveIntegerField(
        null=True, blank=True, help_text="The live version when it was requested (none: never published)."
    )
    document_hash = models.CharField(
        max_length=64,
        blank=True,
        help_text="A fingerprint of what the requester reviewed: the draft (a publish), or the plan's candidate and "
        "settings (a rollout).",
    )
    plan = models.ForeignKey(
        RolloutPlan,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="release_requests",
        help_text="The rollout plan to start (a staged rollout).",
    )
    version = models.ForeignKey(
        RoutingVersion,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The candidate rolled out, or the version the approved publish made.",
    )
    note = models.CharField(max_length=300, blank=True, help_text="What changed and why, by the requester.")
    forced_reason = models.TextField(
        blank=True, help_text="Why to publish although routing tests fail (the requester's, with the permission)."
    )
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    requested_at = models.DateTimeField(default=timezone.now)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.TextField(blank=True, help_text="The approver's note; a decline says why.")

    class Meta:
        db_table = "routing_releaserequest"  # its name from when routing owned it
        ordering = ["-requested_at", "-id"]
        verbose_name = "release request"
        indexes = [models.Index(fields=["status", "profile"], name="release_request_status")]
        permissions = [("approve_release", "Can approve publishes and rollout starts")]

    def __str__(self) -> str:
        return f"{self.profile}: {self.get_kind_display().lower()} ({self.get_status_display().lower()})"
