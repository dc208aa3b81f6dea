"""Messages of the YAML importer, as constants the tests import.

Every problem is reported as ``<file>:<line>: <path>: <message>``; these are
the ``<message>`` parts. The keyword rule reuses
:data:`routing.services.ERROR_KEYWORD_TAKEN` so the admin and the importer say
the same thing.
"""

from __future__ import annotations

from agents.public import ERROR_ENDPOINT_MASKED

ERROR_READ = "cannot read the file: {problem}"
ERROR_YAML_SYNTAX = "YAML syntax error: {problem}"
ERROR_EMPTY_FILE = "the file is empty"
ERROR_NOT_A_MAPPING = "the file must be a mapping of sections ({expected})"
ERROR_NOTHING_TO_IMPORT = "no section to import; expected one of: {expected}"
ERROR_UNKNOWN_TOP_KEY = "unknown top-level key {key!r}; expected one of: {expected}"
ERROR_UNKNOWN_KEY = "unknown key {key!r}; expected one of: {expected}"
ERROR_DUPLICATE_KEY = "duplicate key {key!r} (first on line {line})"
ERROR_COMPLEX_KEY = "keys must be plain strings"
ERROR_TOO_DEEP = "nested too deeply"
ERROR_ALIASES = (
    "its aliases repeat more than {values:,} values or {chars:,} characters: write the repeated part out, or "
    "repeat it less"
)
ERROR_TOO_LARGE = "the file is larger than {megabytes} MB"
ERROR_TYPE = "must be {expected}, not {actual}"
ERROR_REQUIRED = "{key!r} is required"
ERROR_EMPTY = "must not be empty"
ERROR_BAD_CHOICE = "{value!r} is not one of: {choices}"
ERROR_DOMAIN_ALONE = "{key!r} belongs with a domain's goals/capabilities, but the file has none of them"
ERROR_DOMAIN_REQUIRED = "goals and capabilities need {key!r}: the file names its domain and MCP server at the top"
ERROR_AGENT_ID_ALONE = "'agent_id' names the profile of router/state_policies/intents, but the file has none of them"

ERROR_NO_PROFILE = (
    "routing settings need a profile: add 'agent_id: <profile>' to the file, name the file in a profile's "
    "routing_config_path (agents.yaml, in the same import) or pass --profile <agent_id>"
)
ERROR_PROFILE_MISMATCH = "the file is for profile {file_profile!r} but --profile {option!r} was given"
ERROR_PROFILE_NAMED = (
    "the file is the routing of {profiles} (their routing_config_path in {where}) but --profile {option!r} was given"
)
ERROR_ROUTING_PATH_OTHER_PROFILE = "{file} is the routing of profile {file_profile!r} (its agent_id), not of this one"
ERROR_ROUTING_PATH_AMBIGUOUS = "{path!r} may name any of {files}: give the files of this import distinct names"

ERROR_DUPLICATE = "duplicate {what} {name!r} (first at {where})"
ERROR_CONFLICT = "{value!r} conflicts with {other_path} = {other!r} at {where}"

ERROR_UNKNOWN_PROFILE = "unknown profile {name!r}"
ERROR_UNKNOWN_SPECIALIST = "unknown specialist {name!r} of profile {profile}"
ERROR_UNKNOWN_INTENT = "unknown intent {name!r} of profile {profile}"
ERROR_UNKNOWN_TOOL = "unknown MCP tool {name!r}"
ERROR_UNKNOWN_SERVER = "unknown MCP server {name!r}"
ERROR_DOMAIN_SERVER = "the domain {domain!r} belongs to the MCP server {other!r}"
ERROR_CAPABILITY_DOMAIN = (
    "capability {name!r} is stored in the domain {domain!r} (server {server!r}); capability names are unique"
)
ERROR_TOOL_SERVER = "MCP tool {name!r} belongs to the server {server!r}, not to this domain's server {expected!r}"
ERROR_SELF_HANDOFF = "a specialist cannot hand off to itself"
ERROR_SHORTHAND_TYPE = "unknown argument type {value!r}; use one of: {choices}, or a full JSON Schema"
ERROR_WORD_BOOLEAN = "YAML reads this word as true or false: quote it, e.g. 'yes', 'no', 'on', 'off'"
ERROR_RELIABILITY_ROW = "a reliability row needs 0 ≤ low < high ≤ 1 and 0 ≤ right ≤ routed"
ERROR_KEYWORD_EMPTY = "a keyword needs at least one letter or digit"
ERROR_KEYWORD_REPEATED = "keyword {keyword!r} is listed twice in this intent (first at {where})"
ERROR_EXCLUSION_UNKNOWN_KEYWORD = (
    "{keyword!r} is not a keyword of this intent: exclusions belong to one of its keywords ({keywords})"
)
ERROR_EXCLUSION_LANGUAGES_UNKNOWN_PHRASE = (
    "{phrase!r} is not an exclusion of the keyword {keyword!r}: languages belong to one of its exclusions ({phrases})"
)
ERROR_LANGUAGES_UNKNOWN_KEYWORD = (
    "{keyword!r} is not a keyword of this intent: languages belong to one of its keywords ({keywords})"
)

WARNING_IGNORED_KEY = "ignored: this platform keeps that configuration in the database, import its content instead"
WARNING_ROUTING_PATH_ABSENT = (
    "no routing file of this import is named {name!r}: the profile's routing is left as it is (import that file with "
    "this one to apply it)"
)
WARNING_DEFAULT_AGENT = "checked but not stored: clients always send agent_id"
WARNING_TOOL_NOT_ALLOWED = (
    "intent authorises tool {tool!r}, which its specialist {specialist!r} may not use; "
    "add it to the specialist's tools or the call will be refused"
)
WARNING_COORDINATOR_UNUSED = (
    "the profile is in {mode} mode, where no coordinator takes part; it is stored for router and hybrid modes"
)
ERROR_ENV_SECRET = "environment variable {name} is one of the platform's own secrets and is never put into an address"  # noqa: S105 — a message, not a secret
ERROR_ENV_UNSET = "environment variable {name} is not set and has no default (write ${{{name}:-default}})"

# Rights (releases.configio.rights): what the user may not change, and the permissions it needs.
ERROR_FORBIDDEN = "{user} may not {verb} this: it needs the {permission_word} {permissions}"
# An endpoint the export masked (credentials before the host, query values) that is not the stored one's mask.
ERROR_MASKED = ERROR_ENDPOINT_MASKED
