"""Agent profiles, their specialists and prompt versions, MCP servers and tools."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q

from agents.desks import ERROR_SIGNING_BOTH, ERROR_SIGNING_MISSING, validate_secret, validate_secret_variable
from agents.escalation import TEAM_PATTERN, default_escalation, validate_escalation_settings
from agents.knowledge_settings import validate_knowledge_settings, validate_specialist_knowledge
from agents.mcp_stdio import SCHEME as STDIO_SCHEME
from agents.profile_settings import (
    MODEL_ENDPOINT_FIELDS as MODEL_ENDPOINT_FIELDS,
)  # re-exported: its users read it here
from agents.schemas import (
    validate_endpoint_url,
    validate_guardrail_settings,
    validate_judge_settings,
    validate_mcp_endpoint,
    validate_model_key_variable,
    validate_tool_args_schema,
    validate_word_list,
)
from common.language import LANGUAGES
from common.translations import translations_problems

SPECIALIST_TRANSLATED = ("display_name", "description")  # the texts of a specialist that have a value per language
PROFILE_TRANSLATED = ("name", "description")  # the texts of a profile that have a value per language


def validate_language(value: str) -> None:
    """A language of the platform's (:data:`common.language.LANGUAGES`): checked, not a field's choices, so a language
    added there needs no migration."""
    if value not in LANGUAGES:
        raise ValidationError(f"Unknown language {value!r}: use one of {', '.join(LANGUAGES)}.")


def validate_specialist_translations(value: object) -> None:
    if problems := translations_problems(value, SPECIALIST_TRANSLATED, {"display_name": 200}):
        raise ValidationError([message for _language, message in problems])


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


# The yes and no of the platform's yes/no questions (the permission gate, a state policy's flow, goal mode's "is this
# what you want?"), in Portuguese, English and Spanish, read by routing.replies: a reply word counts where it leads the
# message or ends a short one. The product's keywords, plus what customers write in the three languages.
DEFAULT_CONFIRMATION_WORDS = [
    "sim",
    "pode",
    "claro",
    "autorizo",
    "confirmo",
    "confirmado",
    "confirmada",
    "pronto",
    "feito",
    "já fiz",
    "já está",
    "pode consultar",
    "yes",
    "sure",
    "okay",
    "ok",
    "go ahead",
    "please check",
    "proceed",
    "confirmed",
    "i confirm",
    "done",
    "all done",
    "connect",
    "si",
    "dale",
    "adelante",
    # Portuguese
    "com certeza",
    "certo",
    "tudo bem",
    "tá bom",
    "está bem",
    "beleza",
    "positivo",
    "autorizado",
    "prossiga",
    "não tem problema",
    "sem problema",
    # English
    "yeah",
    "yep",
    "yup",
    "of course",
    "absolutely",
    "alright",
    "all right",
    "please do",
    "go for it",
    "do it",
    "no problem",
    # Spanish
    "vale",
    "de acuerdo",
    "por supuesto",
    "está bien",
    "hazlo",
    "haz",
    "no hay problema",
    "sin problema",
    "listo",
    "ya está",
    "ya lo hice",
]
# Replies that refuse it; a refusal word wins over a confirmation word ("não pode").
DEFAULT_DENIAL_WORDS = [
    "não",
    "nao",
    "no",
    "nope",
    "negativo",
    "prefiro não",
    "don't",
    "do not",
    "cancel",
    # Portuguese
    "nem pensar",
    "de jeito nenhum",
    "ainda não",
    "deixa pra lá",
    "deixa para lá",
    # English
    "nah",
    "not now",
    "never mind",
    "rather not",
    "not yet",
    # Spanish
    "ni hablar",
    "para nada",
    "de ninguna manera",
    "todavía no",
    "aún no",
    "déjalo",
]
# Replies that close a delegated sub-conversation (the offline model ends it with "completed").
DEFAULT_CLOSING_WORDS = [
    "obrigado",
    "obrigada",
    "resolvido",
    "valeu",
    "era só isso",
    "thanks",
    "thank you",
    "resolved",
    "gracias",
    "resuelto",
]


# Conversation repair (routing.repairs): phrases that say something about the conversation rather than a new
# request, in Portuguese, English and Spanish. A cancel, repeat, skip or "already told" phrase counts where it leads the
# message; a correction phrase anywhere in its first words.
REPAIR_WORD_FIELDS = ("cancel_words", "correction_words", "repeat_words", "skip_words", "already_told_words")
DEFAULT_CANCEL_WORDS = [
    # Portuguese
    "deixa pra lá",
    "deixa para lá",
    "deixa quieto",
    "esquece",
    "esqueça",
    "esquece isso",
    "cancela isso",
    "cancela essa",
    "cancelar isso",
    "não quero mais",
    "desisto",
    "mudei de ideia",
    "para com isso",
    "pode esquecer",
    "larga isso",
    "não precisa mais",
    "desisti",
    "não quero mexer nisso",
    # English
    "never mind",
    "nevermind",
    "forget it",
    "forget about it",
    "cancel that",
    "cancel this",
    "scrap that",
    "drop it",
    "i changed my mind",
    "changed my mind",
    "i don't want to anymore",
    "i don't want that anymore",
    "stop that",
    "let's not",
    "scratch that",
    "forget i asked",
    "leave it",
    "drop this",
    "don't bother",
    "no need anymore",
    # Spanish
    "olvídalo",
    "olvidalo",
    "olvida eso",
    "déjalo",
    "déjalo así",
    "cancela eso",
    "cancélalo",
    "ya no quiero",
    "cambié de opinión",
    "no importa",
    "da igual",
    "olvídate",
    "ya no hace falta",
    "lo dejamos",
    "mejor lo dejamos",
    "déjalo estar",
]
DEFAULT_CORRECTION_WORDS = [
    # Portuguese
    "digitei errado",
    "escrevi errado",
    "errei",
    "me enganei",
    "enganei",
    "quis dizer",
    "queria dizer",
    "corrigindo",
    "correção",
    "o certo é",
    "na verdade é",
    "não é esse",
    "número errado",
    "passei errado",
    "foi mal",
    "troquei os números",
    "troquei",
    "confundi",
    "o número certo é",
    "o certo era",
    # English
    "typo",
    "i meant",
    "i mean",
    "i made a mistake",
    "my mistake",
    "correction",
    "i typed it wrong",
    "wrong number",
    "the right one is",
    "actually it's",
    "actually it is",
    "i gave you the wrong",
    "not that one",
    "my bad",
    "mixed them up",
    "mixed up",
    "the right number is",
    "the right one is",
    "i confused",
    "wrong one",
    # Spanish
    "me equivoqué",
    "me confundí",
    "quise decir",
    "quería decir",
    "corrijo",
    "corrección",
    "escribí mal",
    "lo escribí mal",
    "número equivocado",
    "en realidad es",
    "el correcto es",
    "no es ese",
    "confundí",
    "los mezclé",
    "me confundí",
    "puse mal",
    "el número correcto es",
    "el correcto era",
]
DEFAULT_REPEAT_WORDS = [
    "pode repetir",
    "repete",
    "repita",
    "fala de novo",
    "diz de novo",
    "quais eram as opções",
    "como é que é",
    "o que você disse",
    "can you repeat",
    "could you repeat",
    "repeat that",
    "say that again",
    "say it again",
    "repeat the question",
    "what were the options",
    "one more time",
    "come again",
    "what did you say",
    "puedes repetir",
    "puede repetir",
    "repítelo",
    "repite",
    "me lo repites",
    "repites",
    "me repites",
    "otra vez",
    "cuáles eran las opciones",
    "cómo dices",
    "qué dijiste",
]
DEFAULT_SKIP_WORDS = [
    "pula essa",
    "pular",
    "pula isso",
    "pode pular",
    "pular essa",
    "pula essa etapa",
    "pula esse",
    "pula essa parte",
    "pule",
    "vamos pular",
    "passa essa",
    "passa essa pergunta",
    "próxima pergunta",
    "prefiro não responder",
    "prefiro não dizer",
    "próxima",
    "skip",
    "skip it",
    "skip that",
    "next question",
    "pass on that",
    "skip this",
    "skip that step",
    "skip the step",
    "let's skip",
    "move on",
    "let's move on",
    "i'd rather not answer",
    "i'd rather not say",
    "rather not say",
    "sáltala",
    "saltar",
    "salta eso",
    "sáltate eso",
    "sáltate",
    "sáltalo",
    "sáltatelo",
    "saltemos",
    "omítelo",
    "paso de",
    "pasa de eso",
    "siguiente pregunta",
    "paso",
    "prefiero no responder",
    "prefiero no decir",
    "siguiente",
]
DEFAULT_ALREADY_TOLD_WORDS = [
    "já falei",
    "já disse",
    "já te falei",
    "já te disse",
    "já informei",
    "já passei",
    "eu já falei",
    "já te passei",
    "já te dei",
    "já mandei",
    "já passei o número",
    "i already told you",
    "already told you",
    "i already said",
    "i told you already",
    "i just told you",
    "i already gave you",
    "i gave you",
    "i said the",
    "i told you which",
    "i said it earlier",
    "i told you",
    "as i said",
    "like i said",
    "i already mentioned",
    "já mencionei",
    "como eu disse",
    "já tinha falado",
    "já tinha dito",
    "como te dije",
    "ya lo mencioné",
    "ya te lo había dado",
    "ya te dije",
    "ya lo dije",
    "ya te lo dije",
    "ya lo había dicho",
    "ya te había dicho",
    "ya te di",
    "ya te lo di",
    "ya te lo dije antes",
    "ya lo dije antes",
]


def default_confirmation_words() -> list[str]:
    return list(DEFAULT_CONFIRMATION_WORDS)


def default_denial_words() -> list[str]:
    return list(DEFAULT_DENIAL_WORDS)


def default_closing_words() -> list[str]:
    return list(DEFAULT_CLOSING_WORDS)


def default_cancel_words() -> list[str]:
    return list(DEFAULT_CANCEL_WORDS)


def default_correction_words() -> list[str]:
    return list(DEFAULT_CORRECTION_WORDS)


def default_repeat_words() -> list[str]:
    return list(DEFAULT_REPEAT_WORDS)


def default_skip_words() -> list[str]:
    return list(DEFAULT_SKIP_WORDS)


def default_already_told_words() -> list[str]:
    return list(DEFAULT_ALREADY_TOLD_WORDS)


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
    share_customer_memory = models.BooleanField(
        default=True,
        help_text="Whether the profile's specialists share what the platform remembers of a customer across their "
        "conversations (what the customer asked it to remember is always shared). Off: each specialist reads only "
        "what it saved itself.",
    )
    extract_customer_facts = models.BooleanField(
        default=False,
        help_text="Whether the profile's model, when it rewrites a conversation's summary, also writes down lasting "
        "facts about the customer (kept with source extracted, shared with the customer's other conversations). "
        "Offline: the preferences the customer stated.",
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


class Specialist(models.Model):
    """A specialist agent of one profile, e.g. ``billing_agent`` of ``telecom_contas``."""

    profile = models.ForeignKey(AgentProfile, on_delete=models.CASCADE, related_name="specialists")
    name = models.SlugField(max_length=64, help_text="Technical name, e.g. billing_agent.")
    display_name = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    translations = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_specialist_translations],
        help_text='The display name and description in other languages than the profile\'s, e.g. {"en": '
        '{"display_name": "Plans and services"}}.',
    )
    allowed_tools = models.ManyToManyField(
        "agents.McpTool",
        blank=True,
        related_name="specialists",
        help_text="The MCP tools this specialist may ever use.",
    )
    handoff_targets = models.ManyToManyField(
        "self",
        symmetrical=False,
        blank=True,
        related_name="handoff_sources",
        help_text="Specialists this one may hand the conversation to.",
    )
    step_limit = models.PositiveSmallIntegerField(
        default=10,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Maximum model/tool steps per turn.",
    )
    remember_tool = models.BooleanField(
        default=False,
        help_text="Offer its model the built-in remember tool: a fact about the customer it saves is given to the "
        "specialists in the customer's next conversations.",
    )
    knowledge = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_specialist_knowledge],
        help_text='How it uses the profile\'s knowledge: {"retrieval": false} (prompt and tools only), {"with_tools": '
        'true} (it searches even in a run offered tools) or {"tags": ["billing"]} (only documents with these tags).',
    )
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["profile__agent_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["profile", "name"], name="specialist_unique_name_per_profile"),
        ]

    def __str__(self) -> str:
        return f"{self.profile.agent_id}/{self.name}"


class SpecialistPrompt(models.Model):
    """One version of a specialist's system prompt; exactly one version is active."""

    specialist = models.ForeignKey(Specialist, on_delete=models.CASCADE, related_name="prompts")
    version = models.PositiveIntegerField()
    text = models.TextField()
    note = models.CharField(max_length=200, blank=True, help_text="What changed in this version.")
    is_active = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )

    class Meta:
        ordering = ["specialist", "-version"]
        verbose_name = "specialist prompt"
        constraints = [
            models.UniqueConstraint(fields=["specialist", "version"], name="prompt_unique_version"),
            models.UniqueConstraint(
                fields=["specialist"],
                condition=models.Q(is_active=True),
                name="prompt_one_active_per_specialist",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.specialist} v{self.version}"


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


class BackendKind(models.TextChoices):
    GATEWAY = "gateway", "This platform's gateway API"
    A2A = "a2a", "An A2A agent (Agent2Agent protocol)"


class RemoteBackend(models.Model):
    """Another deployment of this platform (or any service speaking its gateway API) that a gateway profile routes
    to like a specialist (the Agent Gateway): its keywords, examples and description enter the profile's
    routing, and the conversation keeps it as ``active_backend`` while it answers."""

    profile = models.ForeignKey(
        AgentProfile,
        on_delete=models.CASCADE,
        related_name="remote_backends",
        help_text="The gateway profile that routes to this backend.",
    )
    name = models.SlugField(
        max_length=64,
        help_text="How routing, handoffs and analytics name it, e.g. billing_backend (not a specialist's name).",
    )
    display_name = models.CharField(max_length=200, blank=True)
    description = models.TextField(
        blank=True,
        help_text="What it answers: the LLM classifier reads it when no keyword decides.",
    )
    kind = models.CharField(
        max_length=16,
        choices=BackendKind.choices,
        default=BackendKind.GATEWAY,
        help_text="How it is called: this platform's gateway API, or the Agent2Agent protocol (any A2A agent).",
    )
    base_url = models.CharField(
        max_length=500,
        validators=[validate_endpoint_url],
        help_text="The deployment's address, e.g. https://billing.example.com (its POST /api/gateway/message is "
        "called); for an A2A agent, its address (its card is read at …/.well-known/agent-card.json) or its card's "
        "URL.",
    )
    api_key = models.CharField(
        max_length=300,
        blank=True,
        help_text="The API key the remote deployment gave us (sent as Authorization: Bearer; never shown again).",
    )
    remote_agent_id = models.SlugField(
        max_length=64,
        blank=True,
        help_text="The profile to call there, e.g. telecom_contas (the gateway API; an A2A agent's address names it).",
    )
    keywords = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_word_list],
        help_text="Words or phrases that send a message to this backend (matched as intents' keywords are).",
    )
    examples = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_word_list],
        help_text="Example messages for the examples tier.",
    )
    priority = models.PositiveSmallIntegerField(
        default=100,
        help_text="Against intents whose keywords the same message hits: lower wins.",
    )
    timeout = models.FloatField(
        default=30.0,
        validators=[MinValueValidator(0.5), MaxValueValidator(300.0)],
        help_text="Seconds before a call is given up (the user gets the fallback).",
    )
    failures_to_open = models.PositiveSmallIntegerField(
        default=3,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Circuit breaker: after this many failed calls in a row it is not called for a while.",
    )
    open_seconds = models.FloatField(
        default=30.0,
        validators=[MinValueValidator(1.0), MaxValueValidator(3600.0)],
        help_text="Circuit breaker: how long it is left alone before one call tries it again.",
    )
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["profile__agent_id", "name"]
        verbose_name = "remote backend"
        constraints = [
            models.UniqueConstraint(fields=["profile", "name"], name="remote_backend_unique_name_per_profile"),
        ]

    def __str__(self) -> str:
        return f"{self.profile.agent_id}/{self.name}"

    def clean(self) -> None:
        if (
            self.profile_id
            and self.name
            and Specialist.objects.filter(profile_id=self.profile_id, name=self.name).exists()
        ):
            raise ValidationError({"name": "A specialist of this profile has this name; a backend needs its own."})
        if self.kind == BackendKind.GATEWAY and not self.remote_agent_id:
            raise ValidationError({"remote_agent_id": "The gateway API needs the profile to call there."})


class ExternalDesk(models.Model):
    """A business's own contact-center tool, where the escalations of the profiles that name it go: each change of
    one is posted to ``url`` as a signed JSON event, and its people answer through the escalations API with a key
    that may answer (docs/external-desk.md). The operator's, as model endpoints and MCP servers are: the address may
    carry credentials (shown masked) and the signing secret is write-only."""

    name = models.CharField(
        max_length=40,
        unique=True,
        validators=[
            RegexValidator(TEAM_PATTERN, "Lowercase letters, digits, - and _, at most 40 characters, e.g. acme_desk.")
        ],
        help_text="What a profile's escalation settings name, e.g. acme_desk.",
    )
    description = models.TextField(blank=True)
    url = models.CharField(
        "webhook URL",
        max_length=500,
        validators=[validate_endpoint_url],
        help_text="Where the escalations' events are posted, e.g. https://desk.example.com/hooks/platform.",
    )
    secret = models.CharField(
        max_length=300,
        blank=True,
        validators=[validate_secret],
        help_text="The signing secret shared with the desk (HMAC-SHA256). Never shown again.",
    )
    secret_env = models.CharField(
        "secret variable",
        max_length=100,
        blank=True,
        validators=[
            RegexValidator(ENV_NAME, "The name of an environment variable, e.g. ACME_DESK_SECRET."),
            validate_secret_variable,
        ],
        help_text="Or the environment variable (or mounted secret) that holds it, read at each post; one the "
        "operator allows (EXTERNAL_DESK_ENV_ALLOWED, by default *_DESK_SECRET).",
    )
    enabled = models.BooleanField(
        default=True, help_text="Off: nothing is posted; the escalations of its profiles wait in their queues."
    )
    timeout = models.FloatField(
        default=5.0,
        validators=[MinValueValidator(0.5), MaxValueValidator(60.0)],
        help_text="Seconds before a post is given up (and retried later).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "external desk"

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.secret and self.secret_env:
            raise ValidationError({"secret_env": ERROR_SIGNING_BOTH})
        if not (self.secret or self.secret_env):
            raise ValidationError({"secret": ERROR_SIGNING_MISSING})


class UsagePurpose(models.TextChoices):
    """The work outside a customer's turn that calls models (a turn's calls are counted on its answer)."""

    PUBLISH_GATE = "publish_gate", "Publish gate"  # the saved routing tests a publish runs
    ROUTING_TESTS = "routing_tests", "Routing tests"  # run in the admin, by manage.py routing_test, for the analytics
    ROUTE_PREVIEW = "route_preview", "Route preview"
    IMPACT_PREVIEW = "impact_preview", "Impact preview"
    DEBUG = "debug", "Debug API"  # /api/debug/route and /api/debug/plan


class ModelCallUsage(models.Model):
    """Tokens of the model calls one piece of work outside a customer's turn made (a publish's routing tests, a route
    preview, a debug call), one row per kind of call and model (:mod:`agents.usage`'s kinds): what the usage figures
    add to the turns' (``conversations.selectors.usage_report``). Rows are only added."""

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    purpose = models.CharField(max_length=32, choices=UsagePurpose.choices)
    profile = models.ForeignKey(
        AgentProfile, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", help_text="Whose work."
    )
    tenant = models.ForeignKey(
        "tenants.Tenant",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="The tenant whose key asked (the debug API); blank for the operators' work.",
    )
    kind = models.CharField(max_length=16)
    model = models.CharField(max_length=200)
    calls = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)

    class Meta:
        verbose_name = "model usage outside turns"
        verbose_name_plural = "model usage outside turns"

    def __str__(self) -> str:
        return f"{self.purpose} {self.kind} {self.model}"


class ModelPrice(models.Model):
    """What a model's tokens cost: the usage figures (``/api/debug/usage``, the analytics) multiply by these."""

    model = models.CharField(
        max_length=200,
        unique=True,
        help_text="The model's name as the endpoint reports it (the profile's model, or LLM_MODEL), e.g. gpt-4o-mini.",
    )
    prompt_per_million = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        validators=[MinValueValidator(0)],
        help_text="Price of 1,000,000 prompt (input) tokens.",
    )
    completion_per_million = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        validators=[MinValueValidator(0)],
        help_text="Price of 1,000,000 completion (output) tokens.",
    )
    currency = models.CharField(max_length=3, default="USD")
    note = models.CharField(max_length=200, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["model"]
        verbose_name = "model price"

    def __str__(self) -> str:
        return self.model
