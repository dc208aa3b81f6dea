"""The agent profile: a template such as ``telecom_contas`` that isolates configuration and conversations, its
choices and validators.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from agents.escalation import default_escalation, validate_escalation_settings
from agents.knowledge_settings import validate_knowledge_settings
from agents.models.words import (
    default_already_told_words,
    default_cancel_words,
    default_closing_words,
    default_confirmation_words,
    default_correction_words,
    default_denial_words,
    default_repeat_words,
    default_skip_words,
)
from agents.schemas import (
    validate_endpoint_url,
    validate_guardrail_settings,
    validate_judge_settings,
    validate_model_key_variable,
    validate_word_list,
)
from common.language import LANGUAGES
from common.translations import translations_problems

PROFILE_TRANSLATED = ("name", "description")  # the texts of a profile that have a value per language


def validate_language(value: str) -> None:
    """A language of the platform's (:data:`common.language.LANGUAGES`): checked, not a field's choices, so a language
    added there needs no migration."""
    if value not in LANGUAGES:
        raise ValidationError(f"Unknown language {value!r}: use one of {', '.join(LANGUAGES)}.")


def validate_profile_translations(value: object) -> None:
    if problems := translations_problems(value, PROFILE_TRANSLATED, {"name": 200}):
        raise ValidationError([message for _language, message in problems])


slug_validator_message = "Use lowercase letters, digits and underscores, starting with a letter."


class SupervisorPlanner(models.TextChoices):
    KEYWORDS = "keywords", "Keywords (every intent the message hits)"
    MODEL = "model", "Model (asks the model which specialists the message needs; keywords when it cannot)"


class MultiTopic(models.TextChoices):
    TOGETHER = "together", "Answer them together (each specialist its own)"
    IN_TURN = "in_turn", "Answer the first, then offer the others"
    OFF = "off", "Answer only the first"


class AnonymousBucket(models.TextChoices):
    """How an A2A caller that names no end user (no ``metadata.user_id``) is bucketed by the rollout flag."""

    NONE = "none", "Not bucketed: the single-agent path"
    CONTEXT = "context", "By the A2A conversation (contextId)"
    API_KEY = "api_key", "By the API key: every conversation of a key together"
    FIXED = "fixed", "One bucket for every such caller"


class ResumeStyle(models.TextChoices):
    EXPLICIT = "explicit", "Say where we were and ask again"
    SILENT = "silent", "Keep the flow waiting without saying so"


# A key reference: the name of an environment variable (or of a secret the deployment mounts into one).
ENV_NAME = r"^[A-Z_][A-Z0-9_]{0,99}$"

# Where a profile's answers go and with which key: the operator's, not a business user's (a business user who could
# point them at a host of theirs would receive the key, the prompts and the conversations). Changing them — in the
# admin, by import, by publishing a version that changes them — needs this permission beyond change_agentprofile.
# MODEL_ENDPOINT_FIELDS (agents.profile_settings) names them: the settings declared operator_only.
MODEL_ENDPOINT_CODENAME = "change_model_endpoint"
MODEL_ENDPOINT_PERMISSION = f"agents.{MODEL_ENDPOINT_CODENAME}"


class ExamplesVectoriser(models.TextChoices):
    OFFLINE = "offline", "Offline (character n-gram TF-IDF, no model)"
    EMBEDDINGS = "embeddings", "Embeddings endpoint (ROUTER_EMBEDDINGS_*)"


class RoutingMode(models.TextChoices):
    ROUTER = "router", "Router (one specialist per turn)"
    SUPERVISOR = "supervisor", "Supervisor (plan of one or more specialists)"
    HYBRID = "hybrid", "Hybrid (active specialist keeps short follow-ups)"
    GOAL = "goal", "Goal (goals and capabilities from the domains' MCP servers)"


# routing.goals.planner.DEFAULT_CONFIDENCE_THRESHOLD (goal mode's 0.94), written out: agents sit below routing.
DEFAULT_GOAL_THRESHOLD = 0.94


def default_release_needs_approval() -> bool:
    """A new profile needs a second person when another profile does: where releases are reviewed, making a profile
    is no way round the review. It is then served nothing until its first publish, which a second person approves
    (releases.approvals), and only someone who may approve releases switches the rule off."""
    return AgentProfile.objects.filter(release_needs_approval=True).exists()


class AgentProfile(models.Model):
    """A template such as ``telecom_contas``: isolates configuration and conversations."""

    agent_id = models.SlugField(
        max_length=64,
        unique=True,
        help_text="Identifier clients send as agent_id, e.g. telecom_contas.",
    )
    name = models.CharField(max_length=200)
    domain = models.CharField(max_length=64, blank=True)
    description = models.TextField(blank=True)
    language = models.CharField(
        max_length=8,
        default="pt",
        validators=[validate_language],
        help_text="The language the profile's texts are written in (pt, es, en): a specialist's display name or an "
        "intent's subject line without a translation into the customer's language is said in this one.",
    )
    translations = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_profile_translations],
        help_text="The profile's name and description in other languages, by language: what customers of those "
        "languages read where the profile introduces itself (an agent card, a goal's answer).",
    )
    policy = models.TextField(
        blank=True,
        help_text="Profile-wide instructions every specialist of this profile receives.",
    )
    routing_mode = models.CharField(max_length=16, choices=RoutingMode.choices, default=RoutingMode.ROUTER)
    fallback_specialist = models.ForeignKey(
        "agents.Specialist",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="Answers when no state policy, keyword or classifier decides.",
    )
    llm_router_enabled = models.BooleanField(
        default=False,
        help_text="Ask the LLM classifier when no keyword matches.",
    )
    llm_router_threshold = models.FloatField(
        default=0.6,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Below this confidence the classifier does not decide.",
    )
    handoffs_enabled = models.BooleanField(
        default=True,
        help_text="Specialists may hand the conversation to their handoff targets (request_handoff).",
    )
    coordinator = models.ForeignKey(
        "agents.Specialist",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text=(
            "Delegation (sub-conversations): this specialist receives every message outside a sub-conversation "
            "and may delegate to the others with request_specialist_sub_conversation. Router and hybrid modes."
        ),
    )
    # Loop safety: checked before every agent-to-agent handoff.
    max_handoffs_per_turn = models.PositiveSmallIntegerField(
        default=3,
        validators=[MinValueValidator(1), MaxValueValidator(20)],
        help_text="At most this many handoffs within one user message.",
    )
    max_steps_per_agent = models.PositiveSmallIntegerField(
        default=10,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="At most this many model steps per specialist per user message (its own step limit may be lower).",
    )
    block_ping_pong = models.BooleanField(
        default=True,
        help_text="Stop A → B → A within one user message.",
    )
    loop_window = models.PositiveSmallIntegerField(
        default=5,
        validators=[MinValueValidator(2), MaxValueValidator(50)],
        help_text="How many of the conversation's last handoffs the repeated-path check looks at.",
    )
    loop_max_repeats = models.PositiveSmallIntegerField(
        default=3,
        validators=[MinValueValidator(2), MaxValueValidator(20)],
        help_text="Stop a from → to path that would appear this many times within the window.",
    )
    confirmation_words = models.JSONField(
        default=default_confirmation_words,
        blank=True,
        validators=[validate_word_list],
        help_text="Replies that grant a tool needing permission (matched on word boundaries, accents ignored).",
    )
    denial_words = models.JSONField(
        default=default_denial_words,
        blank=True,
        validators=[validate_word_list],
        help_text="Replies that refuse it; they win over confirmation words.",
    )
    closing_words = models.JSONField(
        default=default_closing_words,
        blank=True,
        validators=[validate_word_list],
        help_text="Replies with which the user closes a delegated sub-conversation (offline model: status completed).",
    )
    cancel_words = models.JSONField(
        default=default_cancel_words,
        blank=True,
        validators=[validate_word_list],
        help_text="Phrases that drop the flow in progress (“deixa pra lá”, “never mind”), where they lead the message.",
    )
    correction_words = models.JSONField(
        default=default_correction_words,
        blank=True,
        validators=[validate_word_list],
        help_text="Phrases that correct a value given before (“digitei errado”, “I meant”): the last step runs again "
        "with the new value.",
    )
    repeat_words = models.JSONField(
        default=default_repeat_words,
        blank=True,
        validators=[validate_word_list],
        help_text="Phrases that ask to hear the last answer again (“pode repetir?”).",
    )
    skip_words = models.JSONField(
        default=default_skip_words,
        blank=True,
        validators=[validate_word_list],
        help_text="Phrases that pass the question the flow asked (“pula essa”, “skip”).",
    )
    already_told_words = models.JSONField(
        default=default_already_told_words,
        blank=True,
        validators=[validate_word_list],
        help_text="Phrases that say the answer was given already (“já falei”): the flow reads the conversation again.",
    )
    multi_topic = models.CharField(
        "several requests in one message",
        max_length=16,
        choices=MultiTopic.choices,
        default=MultiTopic.TOGETHER,
        help_text="Router and hybrid modes: when one message holds requests for different specialists, answer them "
        "together, or the first now and the others next (offered to the customer), or only the first.",
    )
    stack_depth = models.PositiveSmallIntegerField(
        "open flows kept",
        default=3,
        validators=[MinValueValidator(1), MaxValueValidator(10)],
        help_text="1..10: how many flows a conversation keeps open under side questions; past it the oldest is "
        "dropped.",
    )
    frame_expiry_turns = models.PositiveSmallIntegerField(
        "flows expire after (messages)",
        default=6,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="1..100: a flow still waiting this many customer messages after it asked is dropped.",
    )
    frame_expiry_minutes = models.PositiveIntegerField(
        "flows expire after (minutes)",
        default=30,
        validators=[MinValueValidator(1), MaxValueValidator(10080)],
        help_text="1..10080: a flow still waiting this long after it asked is dropped.",
    )
    resume_style = models.CharField(
        "after a side question",
        max_length=16,
        choices=ResumeStyle.choices,
        default=ResumeStyle.EXPLICIT,
        help_text="Say where the conversation was (“Voltando ao pagamento: …”) after answering a side question, or "
        "only keep the flow waiting.",
    )
    a2a_anonymous_bucket = models.CharField(
        "A2A callers without a user id",
        max_length=16,
        choices=AnonymousBucket.choices,
        default=AnonymousBucket.NONE,
        help_text="A2A clients often name no user. The multi-agent rollout places each customer by their user id; a "
        "caller without one goes to the single-agent path unless you bucket it here: by its conversation, by its API "
        "key, or all such callers in one bucket.",
    )
    synthesis_prompt = models.TextField(
        blank=True,
        default=(
            "Você é o supervisor de uma equipe de especialistas de atendimento. Junte as respostas parciais "
            "abaixo numa única resposta ao cliente, na língua dele, sem repetir, sem inventar dados e sem "
            "mencionar especialistas. Se uma parte ficou sem resposta, diga com franqueza o que não foi possível "
            "verificar agora."
        ),
        help_text="Supervisor mode with a model configured: how the specialists' partial answers are merged.",
    )
    hybrid_followup_max_chars = models.PositiveIntegerField(
        default=40,
        help_text="Hybrid mode: messages up to this length that hit no intent stay with the active specialist.",
    )
    # The examples tier (routing.examples): between keywords and the LLM classifier.
    examples_enabled = models.BooleanField(
        default=True,
        help_text="When no keyword matches, route by similarity to the intents' examples (before the LLM classifier).",
    )
    examples_vectoriser = models.CharField(
        max_length=16,
        choices=ExamplesVectoriser.choices,
        default=ExamplesVectoriser.OFFLINE,
        help_text="How examples and messages are compared. Embeddings need ROUTER_EMBEDDINGS_BASE_URL; without "
        "it the offline vectoriser is used.",
    )
    examples_threshold = models.FloatField(
        default=0.9,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="The likeliest intent's score (offline: its probability given the message and the examples; with "
        "embeddings: its similarity) must reach this for it to win. Chosen by calibration from the saved routing "
        "tests and the examples.",
    )
    examples_margin = models.FloatField(
        default=0.8,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="…and beat the runner-up intent's by this much; closer calls go on to the classifier or the "
        "fallback. Chosen by calibration.",
    )
    out_of_scope_examples = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_word_list],
        help_text="Messages that belong to no intent of this profile: the examples tier learns “none of these” from "
        "them, on top of the built-in small-talk and off-topic corpus.",
    )
    examples_state_threshold = models.FloatField(
        default=0.99,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="An examples decision for an intent that sets a conversation state sets it only at or above this "
        "score (keyword, state and model decisions always do).",
    )
    examples_keyword_check = models.FloatField(
        default=1.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="A keyword does not count when the examples tier reads the whole message as none of these with at "
        "least this score (a keyword in another sense: “a entrega do TCC”); 1 = keywords always count. Calibration "
        "proposes the lowest score at which none of the profile's own messages with a keyword would be set aside.",
    )
    examples_reliability = models.JSONField(
        default=list,
        blank=True,
        editable=False,
        help_text="How often the examples tier was right at each score when it was last calibrated (its reliability "
        "table): the route preview reads a decision's confidence from it. Written by calibration.",
    )
    examples_calibration = models.JSONField(
        default=dict,
        blank=True,
        editable=False,
        help_text="The last calibration of the examples tier: the figures that chose the threshold and margin, when "
        "and by whom.",
    )
    goal_threshold = models.FloatField(
        default=DEFAULT_GOAL_THRESHOLD,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Goal mode: below this confidence a turn asks the user instead of acting (a goal's own threshold "
        "overrides it). The domain general — small talk and what no goal covers — is exempt.",
    )
    goal_domains = models.ManyToManyField(
        "agents.McpServer",
        blank=True,
        related_name="goal_profiles",
        help_text="Goal mode: the domains — MCP servers publishing a manifest — whose goals this profile serves; "
        "none selected = every synced domain. What no goal covers goes to the specialists as usual.",
    )
    supervisor_planner = models.CharField(
        max_length=16,
        choices=SupervisorPlanner.choices,
        default=SupervisorPlanner.KEYWORDS,
        help_text="Supervisor mode: how the plan of specialists is made. With the model, a message the model cannot "
        "plan (no endpoint, an error, an answer naming no specialist of the profile) gets the keyword plan.",
    )
    review_single_turns = models.BooleanField(
        default=False,
        help_text="Run the review step on every turn, single-specialist ones included: after the answer it reads the "
        "conversation's history and may send the request on to the specialist whose part is still open.",
    )
    summarise_conversations = models.BooleanField(
        default=True,
        help_text="Keep a running summary of long conversations for the specialists: what was said before the recent "
        "messages they read, brought up to date every ten messages. Off: they read the recent messages only (what "
        "the customer asked to be remembered is still given).",
    )
    share_customer_memory = models.BooleanField(
        default=True,
        help_text="Whether the profile's specialists share what the platform remembers of a customer across their "
        "conversations (what the customer asked it to remember is always shared). Off: each specialist reads only "
        "what it saved itself.",
    )
    extract_customer_facts = models.BooleanField(
        default=False,
        help_text="Whether the profile's model writes down lasting facts about the customer from the messages that "
        "leave a conversation's window (in the running summary's call where the profile keeps one; kept with source "
        "extracted, shared with the customer's other conversations). Offline: the preferences the customer stated.",
    )
    llm_base_url = models.CharField(
        max_length=500,
        blank=True,
        validators=[validate_endpoint_url],
        help_text="An OpenAI-compatible endpoint for this profile's answers, e.g. https://llm.example.com/v1 "
        "(blank: OPENAI_BASE_URL).",
    )
    llm_api_key_env = models.CharField(
        max_length=100,
        blank=True,
        validators=[
            RegexValidator(ENV_NAME, "The name of an environment variable, e.g. BILLING_LLM_API_KEY."),
            validate_model_key_variable,
        ],
        help_text="The environment variable that holds this endpoint's key (the key itself is never stored or "
        "shown; blank: OPENAI_API_KEY). One the operator allows (LLM_API_KEY_ENV_ALLOWED, by default a name ending "
        "in _API_KEY), never one of the platform's own secrets.",
    )
    llm_model = models.CharField(max_length=200, blank=True, help_text="Overrides LLM_MODEL for this profile.")
    llm_temperature = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.0), MaxValueValidator(2.0)],
    )
    guardrails = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_guardrail_settings],
        help_text='e.g. {"blocked_terms": ["..."], "max_input_chars": 4000, "store_original_input": false}',
    )
    judges = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_judge_settings],
        help_text='e.g. {"min_score": 0.5, "llm_judge": false}',
    )
    knowledge = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_knowledge_settings],
        help_text='How its specialists use its knowledge sources, e.g. {"retrieval": true, "tags": ["billing"], '
        '"min_score": 0.5}: search them before answering (on unless false), only documents with these tags, and '
        "below this relevance (0 to 1) say they do not know.",
    )
    escalation = models.JSONField(
        "people in the loop",
        default=default_escalation,
        blank=True,
        validators=[validate_escalation_settings],
        help_text="When conversations go to a person, to which team and desk, and after how long without a "
        "customer message a conversation is closed.",
    )
    enabled = models.BooleanField(default=True)
    # Governance, not behaviour: not part of the profile's published document (routing.documents).
    release_needs_approval = models.BooleanField(
        "Publishing needs a second person",
        default=default_release_needs_approval,
        help_text="A publish or the start of a staged rollout becomes a request that another person with the right "
        "to approve releases approves; customers are served only a version, never the draft. Only they (or an "
        "administrator) change this setting; a new profile needs a second person when another profile does.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["agent_id"]
        verbose_name = "agent profile"
        permissions = [(MODEL_ENDPOINT_CODENAME, "Can change a profile's model endpoint, model and key variable")]

    def __str__(self) -> str:
        return self.agent_id

    def clean(self) -> None:
        errors = {}
        if self.pk and self.fallback_specialist is not None and self.fallback_specialist.profile_id != self.pk:
            errors["fallback_specialist"] = "The fallback specialist must belong to this profile."
        # Compared only when both are in range (clean() runs after a field's own error too).
        if (
            isinstance(self.loop_window, int)
            and isinstance(self.loop_max_repeats, int)
            and 2 <= self.loop_window < self.loop_max_repeats
        ):
            errors["loop_max_repeats"] = (
                f"Must not exceed the window ({self.loop_window}): a path cannot repeat more often than the "
                "handoffs the check looks at."
            )
        if self.pk and self.coordinator is not None and self.coordinator.profile_id != self.pk:
            errors["coordinator"] = "The coordinator must belong to this profile."
        if errors:
            raise ValidationError(errors)
