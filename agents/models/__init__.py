"""Agent profiles, their specialists and prompt versions, MCP servers and tools, remote backends, external desks and
the model calls' usage and prices: one module per family, every name re-exported here, so that ``agents.models`` stays
the app's models module (its migrations and importers name ``agents.models``)."""

from agents.models.backends import BackendKind, RemoteBackend
from agents.models.desks import ExternalDesk
from agents.models.mcp import McpServer, McpTool, McpTransport
from agents.models.profiles import (
    DEFAULT_GOAL_THRESHOLD,
    ENV_NAME,
    MODEL_ENDPOINT_CODENAME,
    MODEL_ENDPOINT_PERMISSION,
    PROFILE_TRANSLATED,
    AgentProfile,
    AnonymousBucket,
    ExamplesVectoriser,
    MultiTopic,
    ResumeStyle,
    RoutingMode,
    SupervisorPlanner,
    default_release_needs_approval,
    slug_validator_message,
    validate_language,
    validate_profile_translations,
)
from agents.models.specialists import (
    SPECIALIST_TRANSLATED,
    Specialist,
    SpecialistPrompt,
    validate_specialist_translations,
)
from agents.models.usage import ModelCallUsage, ModelPrice, UsagePurpose
from agents.models.words import (
    DEFAULT_ALREADY_TOLD_WORDS,
    DEFAULT_CANCEL_WORDS,
    DEFAULT_CLOSING_WORDS,
    DEFAULT_CONFIRMATION_WORDS,
    DEFAULT_CORRECTION_WORDS,
    DEFAULT_DENIAL_WORDS,
    DEFAULT_REPEAT_WORDS,
    DEFAULT_SKIP_WORDS,
    REPAIR_WORD_FIELDS,
    default_already_told_words,
    default_cancel_words,
    default_closing_words,
    default_confirmation_words,
    default_correction_words,
    default_denial_words,
    default_repeat_words,
    default_skip_words,
)
from agents.profile_settings import (
    MODEL_ENDPOINT_FIELDS as MODEL_ENDPOINT_FIELDS,  # re-exported: its users read it here
)

__all__ = [
    "DEFAULT_ALREADY_TOLD_WORDS",
    "DEFAULT_CANCEL_WORDS",
    "DEFAULT_CLOSING_WORDS",
    "DEFAULT_CONFIRMATION_WORDS",
    "DEFAULT_CORRECTION_WORDS",
    "DEFAULT_DENIAL_WORDS",
    "DEFAULT_GOAL_THRESHOLD",
    "DEFAULT_REPEAT_WORDS",
    "DEFAULT_SKIP_WORDS",
    "ENV_NAME",
    "MODEL_ENDPOINT_CODENAME",
    "MODEL_ENDPOINT_FIELDS",
    "MODEL_ENDPOINT_PERMISSION",
    "PROFILE_TRANSLATED",
    "REPAIR_WORD_FIELDS",
    "SPECIALIST_TRANSLATED",
    "AgentProfile",
    "AnonymousBucket",
    "BackendKind",
    "ExamplesVectoriser",
    "ExternalDesk",
    "McpServer",
    "McpTool",
    "McpTransport",
    "ModelCallUsage",
    "ModelPrice",
    "MultiTopic",
    "RemoteBackend",
    "ResumeStyle",
    "RoutingMode",
    "Specialist",
    "SpecialistPrompt",
    "SupervisorPlanner",
    "UsagePurpose",
    "default_already_told_words",
    "default_cancel_words",
    "default_closing_words",
    "default_confirmation_words",
    "default_correction_words",
    "default_denial_words",
    "default_release_needs_approval",
    "default_repeat_words",
    "default_skip_words",
    "slug_validator_message",
    "validate_language",
    "validate_profile_translations",
    "validate_specialist_translations",
]
