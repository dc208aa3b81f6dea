"""Routing content (intents, keywords, state policies, goals and capabilities) and rollout flags: what business
users edit about routing."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from agents.escalation import EscalationSettings, validate_team_name
from common.fields import OrderedJSONField
from common.history.registry import user_id_pseudonym
from common.language import LANGUAGES
from common.outbound import validate_outbound_url
from common.text import normalize
from common.translations import translations_problems
from routing.conversation_tests.cases import EXPECT_KEYS as CONVERSATION_TEST_EXPECT_KEYS
from routing.conversation_tests.cases import MAX_TURNS as CONVERSATION_TEST_MAX_TURNS
from routing.conversation_tests.cases import NAME_MAX_CHARS as CONVERSATION_TEST_NAME_MAX
from routing.conversation_tests.cases import conversation_test_problems, problem_text
from routing.expectations import (
    ROUTING_TEST_KEYS,
    ROUTING_TEST_MAX_TURNS,
    routing_test_expect_errors,
    routing_test_input_limit,
    routing_test_turns_problems,
    turns_where,
)
from routing.goals.planner import GOAL_TRANSLATED, ManifestError, goal_check
from routing.rollout_plans import DEFAULT_GUARDS, plan_errors
from routing.rollout_words import stage_words

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


# -- saved routing tests --------------------------------------------------------------
# A profile's expected decisions for given messages; they run on the draft or any version (releases.routing_tests)
# and gate publishing (releases.versions.version_publish). What they may expect: routing.expectations.


class RoutingTestCase(models.Model):
    """A saved routing test: for ``message`` (in ``state``, with ``active_specialist`` answering), the profile
    must decide what ``expect`` names — any of intent, agent, method, next_state, goal, status, and what the
    conversation shows: events, repair, state_after, topics. With ``turns`` it is a short conversation: those
    messages come first, in order, each checked against its own ``expect`` when it has one."""

    profile = models.ForeignKey("agents.AgentProfile", on_delete=models.CASCADE, related_name="routing_tests")
    name = models.CharField(max_length=200, help_text="e.g. fatura alta")
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
        # routing.forms.RoutingTestCaseForm) leaves it out and names its own errors — Django's documented way.
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


def default_rollout_stages() -> list[int]:
    return [5, 25, 50, 100]


def default_rollout_guards() -> list[dict[str, object]]:
    return [dict(guard) for guard in DEFAULT_GUARDS]


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

    class Meta:
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
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["plan", "-created_at"], name="rollout_decision_plan_recent")]

    def __str__(self) -> str:
        return f"{self.plan}: {self.get_action_display().lower()} at {stage_words(self.stage, self.plan.stages)}"


# -- the two-person rule ------------------------------------------------------------------------------------------
# A profile may ask for a second person (AgentProfile.release_needs_approval): an editor's publish or rollout start
# becomes a request that someone with routing.approve_release approves or declines (releases.approvals).


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
        ordering = ["-requested_at", "-id"]
        verbose_name = "release request"
        indexes = [models.Index(fields=["status", "profile"], name="release_request_status")]
        permissions = [("approve_release", "Can approve publishes and rollout starts")]

    def __str__(self) -> str:
        return f"{self.profile}: {self.get_kind_display().lower()} ({self.get_status_display().lower()})"
