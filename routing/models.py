"""Routing content (intents, keywords, state policies, goals and capabilities) and rollout flags: what business
users edit about routing."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from agents.public import EscalationSettings, validate_team_name
from common.history.registry import user_id_pseudonym
from common.language import LANGUAGES
from common.text import normalize
from common.translations import translations_problems
from routing.goals.manifest import ManifestError, goal_check
from routing.goals.planner import GOAL_TRANSLATED

INTENT_TRANSLATED = ("description",)  # the texts of an intent that have a value per language


def validate_intent_translations(value: object) -> None:
    if problems := translations_problems(value, INTENT_TRANSLATED):
        raise ValidationError([message for _language, message in problems])


def validate_goal_translations(value: object) -> None:
    if problems := translations_problems(value, GOAL_TRANSLATED):
        raise ValidationError([message for _language, message in problems])


class Intent(models.Model):
    """A routable intention of one profile; its keywords are rows of :class:`Keyword`."""

    profile = models.ForeignKey("agents.AgentProfile", on_delete=models.CASCADE, related_name="intents")
    name = models.SlugField(max_length=100, help_text="e.g. billing_invoice_explanation")
    domain = models.CharField(max_length=64, blank=True)
    specialist = models.ForeignKey("agents.Specialist", on_delete=models.PROTECT, related_name="intents")
    description = models.TextField(blank=True, help_text="Its subject line, as a specialist names the request.")
    translations = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_intent_translations],
        help_text='The subject line in other languages than the profile\'s, e.g. {"en": {"description": "questions '
        'about plans"}}.',
    )
    priority = models.IntegerField(default=100, help_text="Lower number wins when several intents match.")
    enabled = models.BooleanField(default=True)
    examples = models.JSONField(default=list, blank=True, help_text="Example messages (a JSON list of strings).")
    mcp_tools = models.ManyToManyField(
        "agents.McpTool",
        blank=True,
        related_name="intents",
        help_text="MCP tools authorised when this intent wins.",
    )
    next_state = models.CharField(
        max_length=100,
        blank=True,
        help_text="Conversation state to set after this intent answers, e.g. WAITING_PAYMENT_CONFIRMATION.",
    )
    escalate_to = models.CharField(
        "hand to a person of team",
        max_length=40,
        blank=True,
        validators=[validate_team_name],
        help_text="When this intent wins, a person of this team answers instead of the assistants (one of the "
        "profile's teams, e.g. retention); blank: the assistants answer.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["profile__agent_id", "priority", "name"]
        constraints = [
            models.UniqueConstraint(fields=["profile", "name"], name="intent_unique_name_per_profile"),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        super().clean()
        if self.escalate_to and self.profile_id is not None:
            teams = EscalationSettings.from_json(self.profile.escalation).teams
            if self.escalate_to not in teams:
                raise ValidationError(
                    {"escalate_to": f"{self.escalate_to!r} is not one of the profile's teams ({', '.join(teams)})."}
                )


ERROR_EXCLUSION_NOT_TEXT = "Each exclusion is a word or phrase (text)."
ERROR_EXCLUSION_EMPTY = "Exclusion {phrase!r} needs at least one letter or digit."
ERROR_EXCLUSION_REPEATED = "Exclusion {phrase!r} is listed twice (as {other!r})."
ERROR_EXCLUSION_COMMA = (
    "Exclusion {phrase!r} holds a comma, which the admin reads as between two exclusions: write it without (matching "
    "reads punctuation as a space)."
)
ERROR_EXCLUSION_IN_KEYWORD = (
    "Exclusion {phrase!r} is part of the keyword {keyword!r} itself: the keyword would never count (delete the "
    "keyword instead)."
)


def keyword_exclusion_problems(keyword: str, phrases: object) -> list[tuple[int | None, str]]:
    """What is wrong with ``phrases`` as the exclusions of ``keyword``: ``(index of the phrase or None for the whole
    list, message)`` pairs, empty when they are fine. Each is text with a letter or digit and no comma, none repeated
    (once normalised), and none a part of the keyword itself (it would cancel the keyword everywhere). The one rule of
    the admin's forms (:meth:`Keyword.clean`) and the YAML import."""
    if not isinstance(phrases, list):
        return [(None, ERROR_EXCLUSION_NOT_TEXT)]
    problems: list[tuple[int | None, str]] = []
    seen: dict[str, str] = {}
    padded_keyword = f" {normalize(keyword)} " if normalize(keyword) else ""
    for index, phrase in enumerate(phrases):
        if not isinstance(phrase, str):
            problems.append((index, ERROR_EXCLUSION_NOT_TEXT))
            continue
        normalized = normalize(phrase)
        if not normalized:
            problems.append((index, ERROR_EXCLUSION_EMPTY.format(phrase=phrase)))
        elif "," in phrase:
            problems.append((index, ERROR_EXCLUSION_COMMA.format(phrase=phrase)))
        elif normalized in seen:
            problems.append((index, ERROR_EXCLUSION_REPEATED.format(phrase=phrase, other=seen[normalized])))
        elif padded_keyword and f" {normalized} " in padded_keyword:
            problems.append((index, ERROR_EXCLUSION_IN_KEYWORD.format(phrase=phrase, keyword=keyword)))
        else:
            seen[normalized] = phrase
    return problems


ERROR_KEYWORD_LANGUAGES = "Languages must be a list of language codes, each one of: {known}."
ERROR_KEYWORD_LANGUAGE_UNKNOWN = "Unknown language {language!r}: use one of {known}."


def keyword_language_problems(languages: object) -> list[tuple[int | None, str]]:
    """What is wrong with ``languages`` as the languages a keyword is limited to: ``(index or None for the whole list,
    message)`` pairs, empty when they are fine — a list of the platform's language codes
    (:data:`common.language.LANGUAGES`); repeats are no error. The one rule of the admin's forms and the YAML
    import."""
    known = ", ".join(LANGUAGES)
    if not isinstance(languages, list):
        return [(None, ERROR_KEYWORD_LANGUAGES.format(known=known))]
    return [
        (index, ERROR_KEYWORD_LANGUAGE_UNKNOWN.format(language=language, known=known))
        for index, language in enumerate(languages)
        if language not in LANGUAGES
    ]


def keyword_languages_ordered(languages: list[str]) -> list[str]:
    """``languages`` once each, in :data:`common.language.LANGUAGES`' order: how they are stored and shown."""
    return [language for language in LANGUAGES if language in languages]


ERROR_EXCLUSION_LANGUAGES = "The exclusions' languages must map each limited exclusion to a list of language codes."
ERROR_EXCLUSION_LANGUAGES_UNKNOWN_PHRASE = "{phrase!r} is not one of the keyword's exclusions ({phrases})."


def exclusion_language_problems(phrases: object, limits: object) -> list[tuple[str | None, str]]:
    """What is wrong with ``limits`` as the languages the exclusions ``phrases`` of a keyword are limited to
    (``{phrase: [language, ...]}``, a phrase as it is among ``phrases``; one not named counts in every language):
    ``(phrase or None for the whole mapping, message)`` pairs, empty when they are fine. Each language is checked by
    :func:`keyword_language_problems`. The one rule of the admin's forms and the YAML import."""
    if not isinstance(limits, dict):
        return [(None, ERROR_EXCLUSION_LANGUAGES)]
    known = [phrase for phrase in phrases if isinstance(phrase, str)] if isinstance(phrases, list) else []
    problems: list[tuple[str | None, str]] = []
    for phrase, languages in limits.items():
        if phrase not in known:
            listed = ", ".join(repr(text) for text in known) or "it has none"
            problems.append((phrase, ERROR_EXCLUSION_LANGUAGES_UNKNOWN_PHRASE.format(phrase=phrase, phrases=listed)))
            continue
        problems += [(phrase, message) for _index, message in keyword_language_problems(languages)]
    return problems


class Keyword(models.Model):
    """A word or phrase of an intent, matched accent- and case-insensitively on word boundaries, the phrases in
    which it does not count (``exclusions``, each one perhaps only in some languages: ``exclusion_languages``) and the
    languages it counts in (``languages``; their meaning: :mod:`routing.router`)."""

    intent = models.ForeignKey(Intent, on_delete=models.CASCADE, related_name="keywords")
    text = models.CharField(max_length=200)
    normalized = models.CharField(max_length=200, editable=False, db_index=True)
    exclusions = models.JSONField(
        default=list,
        blank=True,
        help_text="Phrases in which the keyword does not count: one that contains it cancels it inside the phrase "
        '("conta" not in "me conta"); any other cancels it in a message that holds the phrase ("conta" not '
        'with "banco").',
    )
    languages = models.JSONField(
        default=list,
        blank=True,
        help_text='The languages the keyword counts in ("pt", "es", "en"): a message that reads as another language '
        "does not count it; empty: every language. A message whose language cannot be told counts it.",
    )
    exclusion_languages = models.JSONField(
        default=dict,
        blank=True,
        help_text='The languages an exclusion cancels the keyword in ({"me conta": ["pt"]}): in a message that reads '
        "as another language the phrase cancels nothing; an exclusion not named here cancels in every language.",
    )

    class Meta:
        ordering = ["intent", "text"]
        constraints = [
            models.UniqueConstraint(fields=["intent", "normalized"], name="keyword_unique_per_intent"),
        ]

    def __str__(self) -> str:
        return self.text

    def save(self, *args, **kwargs) -> None:
        # Derived column, not business logic: the normalised form the matcher and
        # the uniqueness rule compare.
        self.normalized = normalize(self.text)
        super().save(*args, **kwargs)

    def clean(self) -> None:
        errors = {}
        if problems := keyword_exclusion_problems(self.text or "", self.exclusions):
            errors["exclusions"] = [message for _index, message in problems]
        if problems := keyword_language_problems(self.languages):
            errors["languages"] = [message for _index, message in problems]
        if limit_problems := exclusion_language_problems(self.exclusions, self.exclusion_languages):
            errors.setdefault("exclusions", []).extend(message for _phrase, message in limit_problems)
        if errors:
            raise ValidationError(errors)


class StatePolicy(models.Model):
    """While a conversation is in ``state``, short replies stay with this specialist and intent."""

    profile = models.ForeignKey("agents.AgentProfile", on_delete=models.CASCADE, related_name="state_policies")
    state = models.CharField(max_length=100, help_text="e.g. WAITING_PAYMENT_CONFIRMATION")
    specialist = models.ForeignKey("agents.Specialist", on_delete=models.PROTECT, related_name="state_policies")
    intent = models.ForeignKey(
        Intent,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="state_policies",
        help_text="Intent reported (and whose tools are authorised) when the policy decides.",
    )
    description = models.TextField(blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["profile__agent_id", "state"]
        verbose_name = "state policy"
        verbose_name_plural = "state policies"
        constraints = [
            models.UniqueConstraint(fields=["profile", "state"], name="state_policy_unique_per_profile"),
        ]

    def __str__(self) -> str:
        return f"{self.state} → {self.specialist.name}"


# -- goals and capabilities ----------------------------------------------------------
# Read from the domains' manifests by routing/goals/sync.py, then edited by business users: a re-sync takes a
# manifest's change of a field only while the field still holds what the last sync wrote (``synced``).


def _string_list_errors(name: str, value: object) -> dict[str, str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return {name: f"{name}: must be a list of strings."}
    return {}


class SyncedFromManifest(models.Model):
    """What goals and capabilities share: written by a manifest sync, then edited by business users; ``synced``
    holds what the last sync wrote to each of ``SYNCED_FIELDS``, so a re-sync can tell an edit from a stale value."""

    SYNCED_FIELDS: tuple[str, ...] = ()

    enabled = models.BooleanField(default=True)
    synced = models.JSONField(
        default=dict, blank=True, editable=False, help_text="The manifest's values at the last sync, per field."
    )
    synced_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True

    def edited_fields(self) -> list[str]:
        """The synced fields whose value differs from what the last sync wrote (edited since)."""
        return [name for name in self.SYNCED_FIELDS if name in self.synced and getattr(self, name) != self.synced[name]]


class Goal(SyncedFromManifest):
    """A business goal of a domain (``finance.TOP_MOVERS``): what the model recognises, with the entities it
    extracts; its ``entities_schema`` (``capability_map``) or ``capabilities`` say which capabilities serve it."""

    # The fields a sync writes and a business user may edit; their last synced values are in ``synced``.
    SYNCED_FIELDS = ("description", "translations", "examples", "entities_schema", "capabilities")

    server = models.ForeignKey(
        "agents.McpServer",
        on_delete=models.CASCADE,
        related_name="goals",
        help_text="The MCP server whose manifest declares the goal.",
    )
    domain = models.CharField(max_length=64, help_text="The manifest's domain, e.g. finance.")
    name = models.CharField(max_length=100, help_text="e.g. TOP_MOVERS")
    description = models.TextField(
        blank=True, help_text="What the goal is; the model reads it, and the confirmation names the goal by it."
    )
    translations = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_goal_translations],
        help_text='The description in other languages than the profile\'s, e.g. {"en": {"description": "the price '
        'of one or more stocks"}}.',
    )
    examples = models.JSONField(default=list, blank=True, help_text="Example messages (a JSON list of strings).")
    entities_schema = models.JSONField(
        default=dict,
        blank=True,
        help_text='The entities the model extracts, e.g. {"direction": {"type": "enum", "values": ["GAINERS", '
        '"LOSERS"], "capability_map": {"GAINERS": "get_top_gainers", "LOSERS": "get_top_losers"}}}.',
    )
    capabilities = models.JSONField(
        default=list,
        blank=True,
        help_text='The capability of a goal that has no enum to choose by, e.g. ["get_stock_price"].',
    )
    confidence_threshold = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Below this confidence a turn asks instead of acting; empty: the profile's goal threshold.",
    )

    class Meta:
        ordering = ["domain", "name"]
        constraints = [models.UniqueConstraint(fields=["domain", "name"], name="goal_unique_name_per_domain")]

    def __str__(self) -> str:
        return f"{self.domain}.{self.name}"

    def clean(self) -> None:
        errors = _string_list_errors("examples", self.examples)
        if not isinstance(self.entities_schema, dict):
            errors["entities_schema"] = "entities_schema: must be an object of entities."
        if not isinstance(self.capabilities, list) or not all(isinstance(c, str) for c in self.capabilities):
            errors["capabilities"] = "capabilities: must be a list of capability names."
        if "entities_schema" not in errors and "capabilities" not in errors and self.domain:
            names = set(Capability.objects.filter(domain=self.domain).values_list("name", flat=True))
            try:
                goal_check(
                    self.name or "goal",
                    entities_schema=self.entities_schema,
                    capabilities=self.capabilities,
                    capability_names=names,
                )
            except ManifestError as exc:
                message = str(exc)
                field = "capabilities" if ".capabilities" in message else "entities_schema"
                errors[field] = message
        if errors:
            raise ValidationError(errors)


class Capability(SyncedFromManifest):
    """What a domain can do (``get_top_gainers``), served by one MCP tool; its ``metadata`` drives the planner
    (decomposition, composition, flow, roles), its keywords and examples are the manifest's ``intent_hints``."""

    SYNCED_FIELDS = ("description", "keywords", "examples", "metadata")

    server = models.ForeignKey(
        "agents.McpServer",
        on_delete=models.CASCADE,
        related_name="capabilities",
        help_text="The MCP server whose manifest declares the capability.",
    )
    domain = models.CharField(max_length=64, help_text="The manifest's domain, e.g. finance.")
    name = models.SlugField(max_length=100, unique=True, help_text="e.g. get_top_gainers")
    tool = models.ForeignKey(
        "agents.McpTool",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="capabilities",
        help_text="The MCP tool that serves it (the manifest's tool, on the same server). Without an enabled tool "
        "the capability cannot run.",
    )
    description = models.TextField(blank=True)
    keywords = models.JSONField(
        default=list, blank=True, help_text="Words that hint at the capability (intent_hints.keywords)."
    )
    examples = models.JSONField(
        default=list, blank=True, help_text="Example messages (intent_hints.examples, a JSON list of strings)."
    )
    metadata = models.JSONField(
        default=dict,
        blank=True,
        help_text="The rest of the manifest's metadata: decomposition, composition, flow, roles.",
    )

    class Meta:
        ordering = ["domain", "name"]
        verbose_name_plural = "capabilities"

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors = {**_string_list_errors("keywords", self.keywords), **_string_list_errors("examples", self.examples)}
        if not isinstance(self.metadata, dict):
            errors["metadata"] = "metadata: must be an object."
        tool = self.tool if self.tool_id is not None else None
        if tool is not None and self.server_id is not None and tool.server_id != self.server_id:
            errors["tool"] = f"The tool must be one of the server {self.server.name}'s tools."
        if errors:
            raise ValidationError(errors)


# -- rollout flags -----------------------------------------------------------------
# Written only through the services (routing/services.py), which keep the history; read on the message
# path from the compiled snapshot (routing/snapshot.py), never from these tables.


class Stickiness(models.TextChoices):
    USER_ID = "user_id", "User id"
    SESSION_ID = "session_id", "Session id"


class RolloutFlag(models.Model):
    """A percentage rollout: who gets a feature (e.g. ``multi_agent``: the multi-agent graph)."""

    key = models.SlugField(max_length=64, unique=True, help_text="e.g. multi_agent")
    description = models.TextField(blank=True)
    kill_switch = models.BooleanField(
        "kill switch (everyone off)",
        default=False,
        help_text="On: the flag is off for everyone, overrides included. The instant rollback.",
    )
    percentage = models.PositiveSmallIntegerField(
        default=0,
        validators=[MinValueValidator(0), MaxValueValidator(100)],
        help_text="Share of users (0–100) that get the flag; the same user always lands on the same side.",
    )
    stickiness = models.CharField(
        max_length=16,
        choices=Stickiness.choices,
        default=Stickiness.USER_ID,
        help_text="What keeps a person on one side of the percentage: their user id or their session id.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["key"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(percentage__gte=0, percentage__lte=100), name="rollout_flag_percentage_0_100"
            ),
        ]

    def __str__(self) -> str:
        return self.key


class RolloutUserOverride(models.Model):
    """One user always on (or always off) for a flag, whatever the percentage; the kill switch still wins."""

    flag = models.ForeignKey(RolloutFlag, on_delete=models.CASCADE, related_name="user_overrides")
    user_id = models.CharField(max_length=200, help_text="The user_id the chat API receives.")
    enabled = models.BooleanField(default=True, help_text="Ticked: always on; unticked: always off.")
    note = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["flag", "user_id"]
        verbose_name = "user override"
        constraints = [
            models.UniqueConstraint(fields=["flag", "user_id"], name="rollout_user_override_unique"),
        ]

    def __str__(self) -> str:
        # As it may be shown and recorded (the field history's name of the entry): the customer as a pseudonym.
        return f"{user_id_pseudonym(self.user_id)}: {'on' if self.enabled else 'off'}"


class RolloutTenantOverride(models.Model):
    """Every user of one tenant on (or off) for a flag; a user override wins over it."""

    flag = models.ForeignKey(RolloutFlag, on_delete=models.CASCADE, related_name="tenant_overrides")
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="rollout_overrides")
    enabled = models.BooleanField(default=True, help_text="Ticked: always on; unticked: always off.")
    note = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["flag", "tenant"]
        verbose_name = "tenant override"
        constraints = [
            models.UniqueConstraint(fields=["flag", "tenant"], name="rollout_tenant_override_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.tenant}: {'on' if self.enabled else 'off'}"


class RolloutFlagChange(models.Model):
    """One change to a flag or one of its overrides: who, when, what, old → new. Written once, never edited.

    ``what`` is a field name (``percentage``, ``kill_switch``, ``stickiness``, ``description``), ``created``,
    ``deleted``, ``user_override:<user_id>`` (the id as :func:`common.history.registry.user_id_pseudonym` shows it) or
    ``tenant_override:<tenant slug>``; an absent value reads ``none``.
    """

    # SET_NULL and a copy of the key: the history of a deleted flag stays readable.
    flag = models.ForeignKey(RolloutFlag, on_delete=models.SET_NULL, null=True, blank=True, related_name="changes")
    flag_key = models.CharField(max_length=64)
    what = models.CharField(max_length=300)
    old_value = models.TextField(blank=True)
    new_value = models.TextField(blank=True)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    actor = models.CharField(max_length=200, help_text='"admin: <username>" or "manage.py set_rollout (<OS user>)".')
    changed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-changed_at", "-id"]
        verbose_name = "rollout flag change"
        indexes = [models.Index(fields=["flag", "-changed_at"], name="rollout_change_flag_recent")]

    def __str__(self) -> str:
        return f"{self.flag_key} {self.what}: {self.old_value} → {self.new_value}"


# -- versions ---------------------------------------------------------------------
# A profile's behaviour is edited as a draft (the rows above and the agents' rows) and published as an immutable,
# numbered document (routing.documents): customers are served the released version, editors try the draft.


class PublishedFrom(models.TextChoices):
    """Where a version was published: what the admin says of one published by nobody it knows."""

    ADMIN = "admin", "the admin"
    COMMAND = "command", "the command line"
    IMPORT = "import", "an import"
    DEMO = "demo", "the demo set-up"


class RoutingVersion(models.Model):
    """One published state of a profile's behaviour: its whole document, numbered, never changed afterwards — but
    for ``released_at``, set once, the first time every customer is served it."""

    profile = models.ForeignKey("agents.AgentProfile", on_delete=models.CASCADE, related_name="routing_versions")
    number = models.PositiveIntegerField()
    document = models.JSONField(help_text="Everything that decides the profile's behaviour, as published.")
    note = models.CharField(max_length=300, blank=True, help_text="What changed and why.")
    reverted_from = models.PositiveIntegerField(
        null=True, blank=True, help_text="The earlier version this one publishes again (a revert)."
    )
    forced_reason = models.TextField(
        blank=True, help_text="Why it was published although saved routing tests failed (who may: a permission)."
    )
    test_summary = models.JSONField(
        default=dict,
        blank=True,
        help_text="The saved routing tests run against it before it was published: counts and the first failures.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    published_from = models.CharField(
        max_length=16,
        choices=PublishedFrom.choices,
        blank=True,
        help_text="Where it was published: the admin, the command line, an import or the demo set-up (blank: not "
        "recorded).",
    )
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="Who approved publishing it, when its profile needs a second person.",
    )
    released_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When every customer was first served it: published, reverted to, or its rollout plan completed "
        "(blank: never — a candidate whose plan did not complete). A revert without a second person goes back only "
        "to such a version.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["profile", "-number"]
        constraints = [models.UniqueConstraint(fields=["profile", "number"], name="version_unique_number")]
        permissions = [("publish_failing_version", "Can publish a version whose routing tests fail")]

    def __str__(self) -> str:
        return f"{self.profile} v{self.number}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None and not kwargs.get("force_insert"):
            raise ValidationError("A published version is immutable: publish a new one.")
        super().save(*args, **kwargs)


class ProfileRelease(models.Model):
    """Which version of a profile customers are served (one row per profile once it has been published)."""

    profile = models.OneToOneField("agents.AgentProfile", on_delete=models.CASCADE, related_name="release")
    version = models.ForeignKey(RoutingVersion, on_delete=models.PROTECT, related_name="+")
    published_at = models.DateTimeField(default=timezone.now)
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    def __str__(self) -> str:
        return f"{self.profile}: v{self.version.number}"


class LiveRollout(models.Model):
    """A version rolling out to a share of a profile's new conversations: what the snapshot serves of a running or
    paused rollout plan. The release lifecycle writes one row per such plan whenever the plan is written, and
    removes it when the plan stops; routing reads this table and no release table.

    The row carries the plan's candidate and settings as the plan holds them and the fingerprint of what a second
    person approved (``started_as``): the snapshot serves the candidate only while the two agree
    (:func:`routing.rollout_plans.plan_fingerprint`), whatever wrote the plan."""

    plan_id = models.PositiveBigIntegerField(primary_key=True, help_text="The rollout plan's id.")
    profile = models.ForeignKey("agents.AgentProfile", on_delete=models.CASCADE, related_name="+")
    candidate = models.ForeignKey(RoutingVersion, on_delete=models.PROTECT, related_name="+")
    control_number = models.PositiveIntegerField(
        null=True, blank=True, help_text="The version live when the plan started (the control cohort's)."
    )
    history = models.JSONField(default=list, help_text="[started at (ISO), percentage] of each stage run, in order.")
    settings = models.JSONField(default=dict, help_text="The plan's settings as it holds them (its stages, guards …).")
    started_as = models.CharField(max_length=64, blank=True)

    def __str__(self) -> str:
        return f"{self.profile}: v{self.candidate.number} (plan {self.plan_id})"
