"""Every profile setting, declared once: a field of a profile (:class:`agents.models.AgentProfile`) that a version's
document holds and the turn reads from the compiled profile (:class:`routing.specs.ProfileSpec`).

From :data:`PROFILE_SETTINGS` follow the document's fields and the values versions published before a setting existed
are served with (``routing.documents``: ``PROFILE_FIELDS``, ``PROFILE_DEFAULTS``), the compile's passing of each plain
setting to the spec (``profile_compile``), the YAML keys of an ``agents.yaml`` entry and of a ``routing.yaml``'s
``router:`` block with their reading and writing (``releases.configio``), the fields of the admin's sections
(``agents.admin.profiles``), the fields only operators change (:data:`agents.models.MODEL_ENDPOINT_FIELDS`), and the
table of docs/configuration.md (held to them by ``tests/test_docs.py``). The model field itself stays in
agents/models/profiles.py, where migrations read it; ``agents/tests/test_profile_settings.py`` holds each declaration
to it and to the spec. Recipe: docs/recipes/add-a-profile-setting.md.

Pure: plain data, no app above agents.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

# How a setting's value is read from YAML and written back:
# - boolean, integer, number, text: one value of that type (``nullable``: ``null`` too);
# - name: text that may not be empty; choice: one of ``choices``;
# - endpoint: an address; exports mask the credentials in it (common.endpoints.endpoint_mask);
# - words: a list of non-empty words or phrases; settings: a JSON mapping the model validates;
# - escalation: people in the loop (agents.escalation), written only when not the defaults;
# - reliability: the examples tier's reliability table, as calibration writes it;
# - translations: texts by language, then field (common.translations), written only when there are some.
Kind = Literal[
    "boolean",
    "integer",
    "number",
    "text",
    "name",
    "choice",
    "endpoint",
    "words",
    "settings",
    "escalation",
    "reliability",
    "translations",
]
# Kinds whose default fits in a table cell (docs/configuration.md shows it).
SCALAR_KINDS = ("boolean", "integer", "number", "text", "name", "choice", "endpoint")

# ``compiled``: passed unchanged to the ProfileSpec attribute of the same name.
AS_IS = "as is"
# ``default``: the model field's, too long to repeat here (a word list, a prompt, people in the loop).
MODEL_DEFAULT = "(the model's)"
# ``served_before``: the setting's ``default``.
AS_DEFAULT = "(its default)"


@dataclass(frozen=True)
class ProfileSetting:
    """One profile setting. ``name`` is the AgentProfile field, the document's key and, when ``compiled`` is
    :data:`AS_IS`, the ProfileSpec attribute."""

    name: str
    kind: Kind
    # A new profile's value: the model field's default.
    default: Any
    # The admin page's section that shows it (None: not on the page — calibration writes it).
    section: str | None
    # One line for docs/configuration.md's table.
    description: str
    # Its key in an agents.yaml entry and under a routing.yaml's ``router:`` ("a.b": key b of mapping a; "": none).
    # A setting with both is read from either (one import must not say two things) and exported in routing.yaml.
    agents_yaml: str = ""
    routing_yaml: str = ""
    choices: tuple[str, ...] = ()
    nullable: bool = False
    # Only an operator changes it (agents.models.MODEL_ENDPOINT_PERMISSION): in the admin, by import, by publishing.
    operator_only: bool = False
    # 0: every published document holds it. n: the n-th key documents gained after versions had been published without
    # it; such a version is served with ``default``, or with ``served_before`` where that differs (routing.documents.
    # PROFILE_DEFAULTS fills the keys in, in this order, so an old version compiles and diffs as it was served). A new
    # setting takes the next number.
    added: int = 0
    served_before: Any = AS_DEFAULT
    # What routing.documents.profile_compile makes of it: AS_IS, or the ProfileSpec attribute an explicit step there
    # builds from it ("router": the CompiledRouter; "": none, the spec does not hold it).
    compiled: str = AS_IS


PROFILE = "Profile"  # the page's first section, shown without a title
ROUTING = "Routing"
EXAMPLES = "Examples tier"
GOAL = "Goal mode"
SUPERVISOR = "Supervisor"
MODEL = "Model"
ANSWERS = "Answers"
HANDOFFS = "Handoffs and delegation"
LOOP_SAFETY = "Loop safety"
FLOWS = "Conversation flows"
WORDS = "Conversation words"
GUARDRAILS = "Guardrails and judges"
PEOPLE = "People in the loop"
KNOWLEDGE = "Knowledge"

# In the order the YAML files write them (an export's bytes follow it) and the admin's sections show them.
PROFILE_SETTINGS: tuple[ProfileSetting, ...] = (
    # The identity the files and the clients name (read and written as such, not as a setting of the files).
    ProfileSetting(
        "agent_id", "name", "", PROFILE, "The profile's identifier: what clients send, and its files' agent_id."
    ),
    ProfileSetting("name", "name", "", PROFILE, "The profile's name in the admin.", agents_yaml="name"),
    ProfileSetting("description", "text", "", PROFILE, "What the profile is for.", agents_yaml="description"),
    ProfileSetting(
        "enabled",
        "boolean",
        True,
        PROFILE,
        "Whether the profile is served at all.",
        agents_yaml="enabled",
        compiled="",
    ),
    ProfileSetting("domain", "text", "", PROFILE, "The profile's business domain.", agents_yaml="metadata.domain"),
    ProfileSetting(
        "language",
        "text",
        "pt",
        PROFILE,
        "The language its texts are written in (pt, es, en): what a text without a translation is said in.",
        agents_yaml="language",
        added=21,
    ),
    ProfileSetting(
        "translations",
        "translations",
        {},
        PROFILE,
        "The profile's name and description in other languages: what customers of those languages read.",
        agents_yaml="translations",
        added=22,
    ),
    ProfileSetting(
        "policy", "text", "", ANSWERS, "Instructions every specialist of the profile receives.", agents_yaml="policy"
    ),
    ProfileSetting(
        "synthesis_prompt",
        "text",
        MODEL_DEFAULT,
        SUPERVISOR,
        "Supervisor mode with a model: how the specialists' partial answers are merged.",
        agents_yaml="synthesis_prompt",
    ),
    ProfileSetting(
        "routing_mode",
        "choice",
        "router",
        ROUTING,
        "How a message finds its specialist (docs/routing.md).",
        agents_yaml="routing_mode",
        routing_yaml="mode",
        choices=("router", "supervisor", "hybrid", "goal"),
    ),
    ProfileSetting(
        "llm_router_enabled",
        "boolean",
        False,
        ROUTING,
        "Ask the LLM classifier when no keyword matches.",
        agents_yaml="llm_router.enabled",
        routing_yaml="llm_enabled",
    ),
    ProfileSetting(
        "llm_router_threshold",
        "number",
        0.6,
        ROUTING,
        "0..1: below this confidence the classifier does not decide.",
        agents_yaml="llm_router.threshold",
        routing_yaml="threshold",
    ),
    ProfileSetting(
        "handoffs_enabled",
        "boolean",
        True,
        HANDOFFS,
        "Specialists may hand the conversation to their handoff targets.",
        agents_yaml="handoffs_enabled",
        routing_yaml="allow_handoff",
    ),
    ProfileSetting(
        "hybrid_followup_max_chars",
        "integer",
        40,
        ROUTING,
        "Hybrid mode: messages up to this length that hit no intent stay with the active specialist.",
        agents_yaml="hybrid_followup_max_chars",
    ),
    ProfileSetting(
        "multi_topic",
        "choice",
        "together",
        FLOWS,
        "Router and hybrid modes: a message with requests for different specialists (together, in_turn, off).",
        agents_yaml="conversation.multi_topic",
        choices=("together", "in_turn", "off"),
        added=10,
        served_before="off",
    ),
    ProfileSetting(
        "stack_depth",
        "integer",
        3,
        FLOWS,
        "1..10 flows kept open under side questions.",
        agents_yaml="conversation.stack_depth",
        added=11,
    ),
    ProfileSetting(
        "frame_expiry_turns",
        "integer",
        6,
        FLOWS,
        "1..100: a waiting flow is dropped after this many customer messages.",
        agents_yaml="conversation.frame_expiry_turns",
        added=12,
    ),
    ProfileSetting(
        "frame_expiry_minutes",
        "integer",
        30,
        FLOWS,
        "1..10080: a waiting flow is dropped after this many minutes.",
        agents_yaml="conversation.frame_expiry_minutes",
        added=13,
    ),
    ProfileSetting(
        "resume_style",
        "choice",
        "explicit",
        FLOWS,
        "After a side question: say where the conversation was and ask again (explicit), or not (silent).",
        agents_yaml="conversation.resume_style",
        choices=("explicit", "silent"),
        added=14,
    ),
    ProfileSetting(
        "supervisor_planner",
        "choice",
        "keywords",
        SUPERVISOR,
        "Supervisor mode: how the plan of specialists is made.",
        agents_yaml="supervisor_planner",
        choices=("keywords", "model"),
        added=3,
    ),
    ProfileSetting(
        "review_single_turns",
        "boolean",
        False,
        SUPERVISOR,
        "Review single-specialist turns too, and send an open part of the request on.",
        agents_yaml="review_single_turns",
        added=4,
    ),
    ProfileSetting(
        "summarise_conversations",
        "boolean",
        True,
        ANSWERS,
        "Keep a running summary of long conversations for the specialists (off: they read the recent messages only).",
        agents_yaml="summarise_conversations",
        added=26,
    ),
    ProfileSetting(
        "share_customer_memory",
        "boolean",
        True,
        ANSWERS,
        "Its specialists share what the platform remembers of a customer; off: each reads what it saved itself.",
        agents_yaml="share_customer_memory",
        added=23,
    ),
    ProfileSetting(
        "extract_customer_facts",
        "boolean",
        False,
        ANSWERS,
        "Keep lasting facts about the customer read from the messages that leave a conversation's window, with the "
        "running summary or without it (offline: the preferences they stated).",
        agents_yaml="extract_customer_facts",
        added=25,
    ),
    ProfileSetting(
        "llm_model",
        "text",
        "",
        MODEL,
        'The model of the profile\'s answers ("": LLM_MODEL).',
        agents_yaml="llm.model",
        operator_only=True,
    ),
    ProfileSetting(
        "llm_temperature",
        "number",
        None,
        MODEL,
        "0..2; null: the model's default.",
        agents_yaml="llm.temperature",
        nullable=True,
    ),
    ProfileSetting(
        "llm_base_url",
        "endpoint",
        "",
        MODEL,
        'An OpenAI-compatible endpoint for the profile\'s answers ("": OPENAI_BASE_URL).',
        agents_yaml="llm.base_url",
        operator_only=True,
        added=1,
    ),
    ProfileSetting(
        "llm_api_key_env",
        "text",
        "",
        MODEL,
        'The environment variable holding that endpoint\'s key ("": OPENAI_API_KEY).',
        agents_yaml="llm.api_key_env",
        operator_only=True,
        added=2,
    ),
    ProfileSetting(
        "guardrails",
        "settings",
        {},
        GUARDRAILS,
        "Input and output guardrails (agents/schemas.py).",
        agents_yaml="guardrails",
        compiled="guardrails",
    ),
    ProfileSetting(
        "judges",
        "settings",
        {},
        GUARDRAILS,
        "The judges of an answer (agents/schemas.py).",
        agents_yaml="judges",
        compiled="judges",
    ),
    ProfileSetting(
        "confirmation_words",
        "words",
        MODEL_DEFAULT,
        WORDS,
        "Replies that grant a tool needing permission.",
        agents_yaml="confirmation_words",
        compiled="confirmation_words",
    ),
    ProfileSetting(
        "denial_words",
        "words",
        MODEL_DEFAULT,
        WORDS,
        "Replies that refuse it (they win over confirmation words).",
        agents_yaml="denial_words",
        compiled="denial_words",
    ),
    ProfileSetting(
        "closing_words",
        "words",
        MODEL_DEFAULT,
        WORDS,
        "Replies that close a delegated sub-conversation.",
        agents_yaml="closing_words",
        compiled="closing_words",
    ),
    ProfileSetting(
        "cancel_words",
        "words",
        MODEL_DEFAULT,
        WORDS,
        "Phrases that drop the flow in progress.",
        agents_yaml="cancel_words",
        added=15,
        served_before=[],  # versions published before repair was read were served without it
        compiled="repair_words",
    ),
    ProfileSetting(
        "correction_words",
        "words",
        MODEL_DEFAULT,
        WORDS,
        "Phrases that correct a value given before: the last step runs again.",
        agents_yaml="correction_words",
        added=16,
        served_before=[],  # versions published before repair was read were served without it
        compiled="repair_words",
    ),
    ProfileSetting(
        "repeat_words",
        "words",
        MODEL_DEFAULT,
        WORDS,
        "Phrases that ask to hear the last answer again.",
        agents_yaml="repeat_words",
        added=17,
        served_before=[],  # versions published before repair was read were served without it
        compiled="repair_words",
    ),
    ProfileSetting(
        "skip_words",
        "words",
        MODEL_DEFAULT,
        WORDS,
        "Phrases that pass the question a flow asked.",
        agents_yaml="skip_words",
        added=18,
        served_before=[],  # versions published before repair was read were served without it
        compiled="repair_words",
    ),
    ProfileSetting(
        "already_told_words",
        "words",
        MODEL_DEFAULT,
        WORDS,
        "Phrases that say the answer was given already.",
        agents_yaml="already_told_words",
        added=19,
        served_before=[],  # versions published before repair was read were served without it
        compiled="repair_words",
    ),
    ProfileSetting(
        "a2a_anonymous_bucket",
        "choice",
        "none",
        ROUTING,
        "A2A callers without metadata.user_id: the rollout flag's bucket — none (the single-agent path), their "
        "contextId, their API key, or one fixed bucket.",
        agents_yaml="a2a.anonymous_bucket",
        choices=("none", "context", "api_key", "fixed"),
        added=20,
    ),
    ProfileSetting(
        "escalation",
        "escalation",
        MODEL_DEFAULT,
        PEOPLE,
        "When conversations go to a person, and when an idle one is closed (docs/desk.md).",
        agents_yaml="escalation",
        added=9,
        # Versions published before people were in the loop handed no conversation to a person.
        served_before={"enabled": False},
        compiled="escalation",
    ),
    ProfileSetting(
        "knowledge",
        "settings",
        {},
        KNOWLEDGE,
        "Retrieval from its knowledge sources before its specialists answer, the tags it keeps to, the relevance bar "
        "below which they say they do not know, and the vector search beside the words' (agents/knowledge_settings.py, "
        "docs/knowledge.md).",
        agents_yaml="knowledge",
        added=24,
        compiled="knowledge",
    ),
    ProfileSetting(
        "goal_threshold",
        "number",
        0.94,
        GOAL,
        "Goal mode, 0..1: below this confidence a turn asks instead of acting.",
        routing_yaml="goal_threshold",
    ),
    # The examples tier: compiled into the router. Versions published before it existed lack the first four and keep
    # routing without it (routing.documents.examples_index).
    ProfileSetting(
        "examples_enabled",
        "boolean",
        True,
        EXAMPLES,
        "Route by similarity to the intents' examples when no keyword matches.",
        routing_yaml="examples.enabled",
        compiled="router",
    ),
    ProfileSetting(
        "examples_vectoriser",
        "choice",
        "offline",
        EXAMPLES,
        "How examples and messages are compared.",
        routing_yaml="examples.vectoriser",
        choices=("offline", "embeddings"),
        compiled="router",
    ),
    ProfileSetting(
        "examples_threshold",
        "number",
        0.9,
        EXAMPLES,
        "0..1: the likeliest intent's score must reach this…",
        routing_yaml="examples.threshold",
        compiled="router",
    ),
    ProfileSetting(
        "examples_margin",
        "number",
        0.8,
        EXAMPLES,
        "0..1: …and beat the runner-up's by this much.",
        routing_yaml="examples.margin",
        compiled="router",
    ),
    ProfileSetting(
        "examples_state_threshold",
        "number",
        0.99,
        EXAMPLES,
        "0..1: an examples decision sets its intent's next state only at or above this score.",
        routing_yaml="examples.state_threshold",
        added=6,
        compiled="router",
    ),
    ProfileSetting(
        "examples_keyword_check",
        "number",
        1.0,
        EXAMPLES,
        "0..1: a keyword does not count when the whole message reads as none of these with this score.",
        routing_yaml="examples.keyword_check",
        added=8,
        compiled="router",
    ),
    ProfileSetting(
        "out_of_scope_examples",
        "words",
        [],
        EXAMPLES,
        "Messages that belong to no intent of the profile.",
        routing_yaml="examples.out_of_scope",
        added=5,
        compiled="router",
    ),
    ProfileSetting(
        "examples_reliability",
        "reliability",
        [],
        None,
        "Written by calibration: of the decisions at each score, how many were right.",
        routing_yaml="examples.reliability",
        added=7,
        compiled="router",
    ),
    ProfileSetting(
        "max_handoffs_per_turn",
        "integer",
        3,
        LOOP_SAFETY,
        "1..20 handoffs within one user message.",
        routing_yaml="loop_safety.max_handoffs_per_turn",
        compiled="loop_safety",
    ),
    ProfileSetting(
        "max_steps_per_agent",
        "integer",
        10,
        LOOP_SAFETY,
        "1..100 model steps per specialist per user message.",
        routing_yaml="loop_safety.max_steps_per_agent",
        compiled="loop_safety",
    ),
    ProfileSetting(
        "block_ping_pong",
        "boolean",
        True,
        LOOP_SAFETY,
        "Stop A → B → A within one user message.",
        routing_yaml="loop_safety.block_ping_pong",
        compiled="loop_safety",
    ),
    ProfileSetting(
        "loop_window",
        "integer",
        5,
        LOOP_SAFETY,
        "2..50: how many of the last handoffs the repeated-path check looks at.",
        routing_yaml="loop_safety.window",
        compiled="loop_safety",
    ),
    ProfileSetting(
        "loop_max_repeats",
        "integer",
        3,
        LOOP_SAFETY,
        "2..20: stop a from → to path that would appear this often in the window.",
        routing_yaml="loop_safety.max_repeats",
        compiled="loop_safety",
    ),
)

SETTINGS_BY_NAME = {setting.name: setting for setting in PROFILE_SETTINGS}


def served_before(setting: ProfileSetting) -> Any:
    """What a version published before ``setting`` existed is served with (for a setting ``added``)."""
    return setting.default if setting.served_before == AS_DEFAULT else setting.served_before


Block = Literal["agents", "routing"]  # an agents.yaml entry, a routing.yaml's router: block


def yaml_path(setting: ProfileSetting, block: Block) -> tuple[str, ...]:
    """``setting``'s key in ``block`` as a path (``("llm", "model")``); ``()`` when the block has none."""
    key = setting.agents_yaml if block == "agents" else setting.routing_yaml
    return tuple(key.split(".")) if key else ()


def yaml_settings(block: Block) -> tuple[tuple[tuple[str, ...], ProfileSetting], ...]:
    """The settings ``block`` holds, with their paths, in order."""
    return tuple((path, setting) for setting in PROFILE_SETTINGS if (path := yaml_path(setting, block)))


def yaml_exported(block: Block) -> tuple[tuple[tuple[str, ...], ProfileSetting], ...]:
    """The settings an export writes in ``block``: a setting both blocks hold is written in the routing file only."""
    return tuple(
        (path, setting) for path, setting in yaml_settings(block) if block == "routing" or not setting.routing_yaml
    )


def yaml_keys(block: Block, group: str = "") -> tuple[str, ...]:
    """The keys of ``block`` (or of its mapping ``group``) that settings use, each once, in order."""
    keys: dict[str, None] = {}
    for path, _ in yaml_settings(block):
        if not group:
            keys[path[0]] = None
        elif len(path) > 1 and path[0] == group:
            keys[path[1]] = None
    return tuple(keys)


MODEL_ENDPOINT_FIELDS = tuple(setting.name for setting in PROFILE_SETTINGS if setting.operator_only)
