"""The intent adapter of goal mode (docs/goals.md): a message → its goal and human-friendly entities (``IntentOutput``).

Two readers, chosen like the classifier's (:func:`routing.classifier.intent_classifier`):

* over an OpenAI-compatible endpoint (``ROUTER_LLM_*`` when routing has one of its own, else the answering one):
  structured output (one function call, :class:`GoalIntent`) after a prompt that shows the enabled goals — domain,
  name, description, examples and ``entities_schema`` — and the conversation's goal when there is one;
* offline, with no endpoint: deterministic, from the manifests — the goal's capabilities' ``intent_hints``
  (keywords, examples) and its enum entities' ``aliases`` pick the goal. When they pick none, the goals' examples
  tier (``GoalCatalogue.examples``, compiled with the profile when its examples tier is on) reads a paraphrase as
  the goal whose examples it resembles, if its posterior clears the profile's ``examples_threshold`` and
  ``examples_margin`` (the intents' tier's rule) against the other goals and "none of these"; the posterior is the
  confidence. A message that gives entities of
  the conversation's goal stays a follow-up of it unless that tier names another goal. ``aliases``, boolean
  ``keywords`` and string/list ``pattern`` read the entities (docs/goals.md, "The intent adapter").

Every output says how it was read (``IntentOutput.reading``: ``method`` ``hints``, ``follow_up``, ``examples``,
``model`` or ``none``, with the examples' evidence — score, runner-up, nearest examples — whenever they were
consulted), which the turn records.

Whatever a reader returns is checked, never trusted: a goal outside the catalogue is ``general``; an entity outside
the goal's schema, an enum value outside ``values`` and a string the user did not write are dropped; a required
entity still missing caps the confidence below the gate. Neither reader raises: a model error gives a
zero-confidence output that the gate turns into a question. A model's reading of a goal that the manifests' hints
name too, and alone, is a clear question: its confidence is raised to the offline reader's (``corroborated``),
so the gate does not ask back because the model doubted.

The memory rule (:func:`entities_merge`), what is missing (:func:`missing_required`) and the question that asks for
it in the customer's language (:func:`clarification_question`, by the entities' ``label``) are read from the same
schema. Nothing here names a goal, an entity or a
domain: a new domain's manifest is read with no change to this file.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, Field

from agents.public import (
    KIND_GOAL,
    OpenAICompatibleModel,
    llm_configured,
    offline_pause,
    router_llm_separate,
    usage_record,
)
from common.patterns import pattern_compiled, pattern_problem
from common.text import fold, normalize, phrase_found
from routing.examples import ExamplesMatch
from routing.goals.planner import (
    GENERAL_DOMAIN,
    GoalCatalogue,
    GoalSpec,
    IntentOutput,
    goal_capabilities,
    goal_examples,
    goal_label,
)
from routing.goals.words import DEFAULT_LANGUAGE, in_language, said, words
from routing.router import examples_amatch
from routing.specs import ProfileSpec

logger = logging.getLogger(__name__)

CONFIDENT = 0.97  # offline: a goal found by its hints, with every required entity
FOLLOW_UP = 0.95  # offline: no goal found, but the message completes the conversation's goal
INCOMPLETE = 0.6  # a goal found with a required entity missing (either reader): below the gate, which asks
GENERAL_CONFIDENCE = 1.0  # nothing found: general, exempt from the gate, answered by the profile's specialists

# Function words that say nothing about a goal (Portuguese, English, Spanish); words of two letters never count.
_STOPWORD_TEXT = (
    "uma umas uns dos das nos nas por para com que meu minha meus minhas seu sua seus suas voce ele ela "
    "the and for you your with from that this what are del los las con una unos unas"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
VALUE_GROUP = "value"  # the named group of an entity's pattern that holds its value
_TRIM = " \t\r\n.,;:!?¿¡\"'()[]"
_NAME_WORD = re.compile(r"[^\W\d_]+")


def _blank(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, list | tuple | dict | set):
        return not value
    return False


# -- the schema's own rules: memory, what is missing, the question ------------------------------------------------


def _collected(goal: GoalSpec, schema: Mapping[str, Any]) -> str:
    """The entity of ``goal`` whose values the list entity ``schema`` takes when several are named; "" for none."""
    collected = schema.get("collects") if schema.get("type") == "list" else None
    return collected if isinstance(collected, str) and collected in goal.entities_schema else ""


def _collectors(goal: GoalSpec, name: str) -> list[str]:
    """The list entities that take ``name``'s values when the message names several (``collects``)."""
    return [other for other, schema in goal.entities_schema.items() if _collected(goal, schema) == name]


def _alternatives(goal: GoalSpec, name: str) -> set[str]:
    """Entities that stand for ``name`` (a list collecting it, or the entity it collects): one replaces the other."""
    collected = _collected(goal, goal.entities_schema.get(name) or {})
    return set(_collectors(goal, name)) | ({collected} if collected else set())


def entities_merge(goal: GoalSpec, previous: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """A follow-up's entities: ``new`` wins; what it leaves out comes from ``previous``.

    Only the goal's entities are kept. An entity marked ``"carry": false`` is never taken from ``previous`` (a
    list of symbols, a request to notify), nor is one whose alternative (``collects``) the new message gives.
    """
    schema = goal.entities_schema
    merged = {name: value for name, value in new.items() if name in schema and not _blank(value)}
    for name, value in previous.items():
        if name not in schema or name in merged or _blank(value) or schema[name].get("carry", True) is False:
            continue
        if _alternatives(goal, name) & merged.keys():
            continue
        merged[name] = value
    return {name: merged[name] for name in schema if name in merged}


def missing_required(goal: GoalSpec, entities: Mapping[str, Any]) -> list[str]:
    """The goal's required entities that ``entities`` leaves absent or empty, in the schema's order.

    A required enum is never missing (the resolver takes its ``default``, else its first value); a required entity
    is present when a list entity that ``collects`` it holds values.
    """
    missing = []
    for name, schema in goal.entities_schema.items():
        if not schema.get("required"):
            continue
        if schema.get("type") == "enum" and (schema.get("default") is not None or schema.get("values")):
            continue
        if not _blank(entities.get(name)):
            continue
        if any(not _blank(entities.get(collector)) for collector in _collectors(goal, name)):
            continue
        missing.append(name)
    return missing


_GLOSSED = re.compile(r"^\s*(?P<label>[^():]+?)\s*\((?P<gloss>[^()]+)\)")
# What each language's question leaves out of a label ("Which stock?"), and the articles that make it plural.
_ARTICLES = {"en": re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)}
_PLURAL_ARTICLES = {
    "pt": re.compile(r"^(?:os|as)\s", re.IGNORECASE),
    "es": re.compile(r"^(?:los|las)\s", re.IGNORECASE),
}


def _label(goal: GoalSpec, name: str, language: str) -> str:
    """What the entity is called in ``language``: its ``label`` (a string, or one per language), else its
    description ``"<label> (<English label>): …"`` (the label, or in English the gloss; in English a description
    without a gloss gives way to the entity's name), else its name."""
    schema = goal.entities_schema.get(name) or {}
    labels = schema.get("label")
    if isinstance(labels, Mapping) and isinstance(labels.get(language), str) and labels[language].strip():
        label = labels[language]
    elif isinstance(labels, str) and labels.strip():
        label = labels
    else:
        description = str(schema.get("description") or "")
        glossed = _GLOSSED.match(description)
        plain = name.removesuffix("_text").replace("_", " ")
        if glossed:
            label = glossed["gloss"] if language == "en" else glossed["label"]
        else:  # a description is the domain's own language; in English, the entity's name says more
            label = plain if language == "en" else re.split(r"[:.;]", description, maxsplit=1)[0]
        label = label.strip() or in_language(labels, language) or plain
    label = label.strip()
    if language in _ARTICLES:
        label = _ARTICLES[language].sub("", label)
    first = label.split()[0] if label.split() else label
    if label and not first.isupper():
        label = label[0].lower() + label[1:]
    return label


def _joined(items: Sequence[str], conjunction: str) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {conjunction} {items[-1]}"


def clarification_question(goal: GoalSpec, missing: Sequence[str], language: str = DEFAULT_LANGUAGE) -> str:
    """One short question asking for ``missing`` in ``language`` (pt, en, es), named by the entities' labels
    (:func:`_label`).

    ``"o ativo (the stock): …"`` → ``"Qual o ativo?"``, in English ``"Which stock?"``; several → ``"Qual a cidade e
    o dia?"``; a plural label → ``"Quais os ativos?"``, ``"¿Cuáles son los activos?"``. With nothing named, the
    question asks to rephrase.
    """
    if not missing:
        return said("rephrase", language)
    joined = _joined([_label(goal, name, language) for name in missing], words(language)["and"])
    plural = _PLURAL_ARTICLES.get(language)
    which = "which_many" if len(missing) == 1 and plural is not None and plural.match(joined) else "which"
    return said(which, language, labels=joined)


# -- the offline reader ------------------------------------------------------------------------------------------


def _compiled(pattern: str) -> Any | None:
    compiled = pattern_compiled(pattern)
    if compiled is None:  # stored before patterns were checked at save: the system check routing.W003 names it
        logger.warning("Entity pattern %r: %s; the entity is not read offline.", pattern, pattern_problem(pattern))
    return compiled


def pattern_values(schema: Mapping[str, Any], text: str) -> list[str]:
    """The distinct values ``schema``'s ``pattern`` finds in ``text``, as written: in each match, the first of its
    value groups that took part (``value``, or ``value_<any>``: RE2 lets a name appear once, so alternatives name
    theirs apart), none when none did (an alternative that skips a phrase), the whole match in a pattern without
    value groups. Matched by RE2 (:mod:`common.patterns`)."""
    compiled = _compiled(str(schema["pattern"])) if schema.get("pattern") else None
    if compiled is None:
        return []
    groups = [name for name in compiled.groupindex if name == VALUE_GROUP or name.startswith(f"{VALUE_GROUP}_")]
    found: dict[str, str] = {}
    for match in compiled.finditer(text):
        if groups:
            value = next((match.group(name) for name in groups if match.group(name) is not None), None) or ""
        else:
            value = match.group(0) or ""
        value = value.strip(_TRIM)
        if value:
            found.setdefault(fold(value), value)
    return list(found.values())


def _found(phrase: str, haystack: str) -> bool:
    needle = normalize(phrase)
    return bool(needle) and f" {needle} " in haystack


def _alias_named(schema: Mapping[str, Any], haystack: str) -> tuple[str, str] | None:
    """The value of an enum entity that ``haystack`` (normalised, between spaces) names, with the alias it names it
    by: the longest alias found."""
    best: tuple[str, str] | None = None
    for value in schema.get("values") or ():
        for alias in (schema.get("aliases") or {}).get(value) or ():
            if _found(alias, haystack) and (best is None or len(normalize(alias)) > len(normalize(best[1]))):
                best = (value, alias)
    return best


def entities_said(goal: GoalSpec, entities: Mapping[str, Any], text: str) -> list[str]:
    """``entities`` as the customer who wrote ``text`` reads them back: an enum by the alias ``text`` names its
    value by (left out when ``text`` does not name it: its value is the platform's code, in no customer's language),
    strings and lists as written; a boolean is left out (the goal's name says what it asks)."""
    haystack = f" {normalize(text)} "
    shown: list[str] = []
    for name, value in entities.items():
        if value in (None, "", [], False, True):
            continue
        schema = goal.entities_schema.get(name) or {}
        if schema.get("type") == "enum":
            named = _alias_named(schema, haystack)
            if named is not None and named[0] == value:
                shown.append(named[1])
        elif isinstance(value, list):
            shown.extend(str(item) for item in value)
        else:
            shown.append(str(value))
    return shown


@lru_cache(maxsize=256)
def _example_names(examples: tuple[str, ...], patterns: tuple[str, ...]) -> tuple[tuple[str, str, bool], ...]:
    """The names ``patterns`` read in ``examples`` (as the business wrote them: "Itaú", "Magazine Luiza"), each with
    its folded spelling and whether the examples also write it in lower case as an ordinary word ("vale", a verb in
    "¿cuánto vale Petrobras?"); longest first."""
    names: dict[str, str] = {}
    for pattern in patterns:
        for example in examples:
            for value in pattern_values({"pattern": pattern}, example):
                if value[:1].isupper():
                    names.setdefault(fold(value), value)
    lowered = {word for example in examples for word in _NAME_WORD.findall(example) if word[:1].islower()}
    ordinary = {fold(word) for word in lowered}
    return tuple(
        (folded, name, folded in ordinary) for folded, name in sorted(names.items(), key=lambda item: -len(item[0]))
    )


def _names_spelled(goal: GoalSpec, catalogue: GoalCatalogue, text: str) -> str:
    """``text`` with the names the goal's examples give (:func:`_example_names`) spelled as there wherever the
    customer wrote them in lower case or without accents ("da itau" → "da Itaú"), so that a ``pattern`` that reads
    names by their capital reads them too.

    A name that is also an ordinary word of the examples ("vale") is spelled as the name only where the patterns
    then read it as one and lose no other name ("cotação da vale"), and never when it opens the message ("vale,
    gracias"): "quanto vale a equinor?" keeps the verb."""
    patterns = [
        {"pattern": schema["pattern"]}
        for schema in goal.entities_schema.values()
        if schema.get("pattern") and schema.get("type", "string") in ("string", "list")
    ]
    if not patterns:
        return text
    names = _example_names(goal_examples(goal, catalogue), tuple(str(pattern["pattern"]) for pattern in patterns))
    folded, spans = _folded_spans(text)
    spelled: list[str] = list(text)
    taken = [False] * len(text)
    ordinary: list[tuple[int, int, str]] = []
    for needle, name, is_word in names:
        for match in re.finditer(rf"(?<!\w){re.escape(needle)}(?!\w)", folded):
            start, end = spans[match.start()], spans[match.end() - 1] + 1
            if any(taken[start:end]) or text[start].isupper():
                continue
            taken[start:end] = [True] * (end - start)
            if not is_word:
                spelled[start:end] = [name, *[""] * (end - start - 1)]
            elif text[:start].strip(_TRIM):
                ordinary.append((start, end, name))

    def read(characters: list[str]) -> set[str]:
        return {fold(value) for pattern in patterns for value in pattern_values(pattern, "".join(characters))}

    for start, end, name in ordinary:
        candidate = [*spelled[:start], name, *[""] * (end - start - 1), *spelled[end:]]
        before, after = read(spelled), read(candidate)
        if fold(name) in after and before <= after:
            spelled = candidate
    return "".join(spelled)


def _folded_spans(text: str) -> tuple[str, list[int]]:
    """``text`` folded (:func:`common.text.fold`) character by character, with the position in ``text`` of each
    folded character (a character may fold to two, or to none)."""
    folded: list[str] = []
    spans: list[int] = []
    for position, character in enumerate(text):
        piece = fold(character)
        folded.append(piece)
        spans.extend([position] * len(piece))
    return "".join(folded), spans


def _entities_read(goal: GoalSpec, text: str, catalogue: GoalCatalogue | None = None) -> dict[str, Any]:
    """The goal's entities as ``text`` states them: enums by ``aliases`` (the longest alias found wins), booleans by
    ``keywords``, strings (first match) and lists (every match) by ``pattern``, several matches of a collected
    entity into the list that ``collects`` it. An enum the message does not name is left to the resolver. With the
    ``catalogue``, a name the goal's examples give is read whatever its case and accents (:func:`_names_spelled`):
    only here, where the goal is already the message's or the conversation's."""
    haystack = f" {normalize(text)} "
    if catalogue is not None:
        text = _names_spelled(goal, catalogue, text)
    entities: dict[str, Any] = {}
    for name, schema in goal.entities_schema.items():
        kind = schema.get("type", "string")
        if kind == "enum":
            named = _alias_named(schema, haystack)
            if named is not None:
                entities[name] = named[0]
        elif kind == "boolean":
            if phrase_found(text, schema.get("keywords") or ()):
                entities[name] = True
        elif kind == "list":
            matches = pattern_values(schema, text)
            if matches:
                entities[name] = matches
        else:
            matches = pattern_values(schema, text)
            if matches:
                entities[name] = matches[0]
    for name, schema in goal.entities_schema.items():
        collected = _collected(goal, schema)
        if collected:
            matches = pattern_values(goal.entities_schema[collected], text)
            if len(matches) > 1:
                entities[name] = matches
                entities.pop(collected, None)
    return entities


def _telling(text: str) -> list[str]:
    """``text``'s normalised words that may say something about a goal, in order: no function word, none of two
    letters."""
    return [word for word in normalize(text).split() if len(word) > 2 and word not in _STOPWORDS]


def _words(text: str) -> set[str]:
    return set(_telling(text))


def _example_words(goal: GoalSpec, example: str) -> set[str]:
    """An example's words less the entity values in it ("qual o preço da Nordea?" → qual, preco)."""
    values = [
        value
        for schema in goal.entities_schema.values()
        if schema.get("type", "string") in ("string", "list")
        for value in pattern_values(schema, example)
    ]
    return _words(example) - _words(" ".join(values))


def _goal_score(goal: GoalSpec, catalogue: GoalCatalogue, text: str) -> int:
    """How much of the goal's hints ``text`` holds: 2 a keyword or alias, 3 an example whose words it all has."""
    haystack = f" {normalize(text)} "
    phrases: set[str] = set()
    for name in goal_capabilities(goal):
        capability = catalogue.capabilities.get(name)
        if capability is None or not capability.enabled:
            continue
        hints = capability.metadata.get("intent_hints") or {}
        phrases.update(normalize(keyword) for keyword in hints.get("keywords") or ())
    for schema in goal.entities_schema.values():
        if schema.get("type") == "enum":
            for aliases in (schema.get("aliases") or {}).values():
                phrases.update(normalize(alias) for alias in aliases)
    score = 2 * sum(1 for phrase in phrases if phrase and f" {phrase} " in haystack)
    words = _words(text)
    for example in goal_examples(goal, catalogue):
        needed = _example_words(goal, example)
        if needed and needed <= words:
            score += 3
    return score


def _hinted(catalogue: GoalCatalogue, text: str) -> GoalSpec | None:
    """The one enabled goal ``text`` holds the most hints of (:func:`_goal_score`), or ``None`` when it holds none
    or two goals tie."""
    scored = sorted(
        ((_goal_score(goal, catalogue, text), goal) for goal in catalogue.enabled_goals()),
        key=lambda item: -item[0],
    )
    if not scored or scored[0][0] <= 0 or (len(scored) > 1 and scored[1][0] == scored[0][0]):
        return None
    return scored[0][1]


def _held(goal: GoalSpec, entities: Mapping[str, Any], previous: IntentOutput | None) -> Mapping[str, Any]:
    """What the turn will hold: ``entities``, merged with the conversation's when it is the same goal."""
    if previous is not None and (previous.primary_domain, previous.goal) == (goal.domain, goal.name):
        return entities_merge(goal, previous.entities, entities)
    return entities


def _general(text: str, confidence: float = GENERAL_CONFIDENCE, **reading: Any) -> IntentOutput:
    return IntentOutput(GENERAL_DOMAIN, "", {}, confidence, text, reading)


def _by_examples(profile: ProfileSpec, match: ExamplesMatch | None) -> GoalSpec | None:
    """The goal the goals' examples tier names, when it clears the profile's examples threshold and margin."""
    router = profile.router
    if match is None or not match.decides(router.examples_threshold, router.examples_margin):
        return None
    return profile.goals.labelled(match.best[0])


async def offline_intent_read(profile: ProfileSpec, text: str, *, previous: IntentOutput | None = None) -> IntentOutput:
    """The offline reader (see the module docstring): the hints, else a follow-up of the conversation's goal unless
    the goals' examples name another goal, else the goal the examples name; ties: the conversation's goal, then
    domain and name."""
    await offline_pause()
    catalogue = profile.goals
    current = (previous.primary_domain, previous.goal) if previous is not None else None
    scored = [(_goal_score(goal, catalogue, text), goal) for goal in catalogue.enabled_goals()]
    found = [(score, goal) for score, goal in scored if score > 0]
    if found:
        _, goal = min(
            found, key=lambda item: (-item[0], (item[1].domain, item[1].name) != current, item[1].domain, item[1].name)
        )
        entities = _entities_read(goal, text, catalogue)
        complete = not missing_required(goal, _held(goal, entities, previous))
        return IntentOutput(
            goal.domain, goal.name, entities, CONFIDENT if complete else INCOMPLETE, text, {"method": "hints"}
        )
    index = catalogue.examples
    # The goals compete with "none of these" (routing.background), as the intents do: a message that shares a function
    # word or two with a goal's handful of examples ("o que você sabe fazer?" and "qual o preço da Nordea?") reads as
    # small talk or off-topic, not as the goal.
    match = await examples_amatch(index, text)
    evidence: dict[str, Any] = {}
    if match is not None:
        evidence["examples"] = match.as_metadata(profile.router.examples_threshold, profile.router.examples_margin)
    named = _by_examples(profile, match)
    pending = catalogue.goal(previous.primary_domain, previous.goal) if previous is not None else None
    if pending is not None and pending.enabled and (named is None or goal_label(named) == goal_label(pending)):
        entities = _entities_read(pending, text, catalogue)
        if entities:
            complete = not missing_required(pending, _held(pending, entities, previous))
            confidence = FOLLOW_UP if complete else INCOMPLETE
            reading = {"method": "follow_up", **evidence}
            return IntentOutput(pending.domain, pending.name, entities, confidence, text, reading)
    if match is not None and named is not None:
        entities = _entities_read(named, text, catalogue)
        confidence = match.best[1]
        if missing_required(named, _held(named, entities, previous)):
            confidence = min(confidence, INCOMPLETE)
        return IntentOutput(named.domain, named.name, entities, confidence, text, {"method": "examples", **evidence})
    return _general(text, method="none", **evidence)


# -- the model reader --------------------------------------------------------------------------------------------


class GoalIntent(BaseModel):
    """The goal a message asks for and its entities (structured output of the intent adapter)."""

    domain: str = Field(description="The goal's domain, or 'general' when no goal fits.")
    goal: str = Field(description="The goal's name from the catalogue, or an empty string when no goal fits.")
    entities: dict[str, Any] = Field(
        default_factory=dict, description="The goal's entities that the message states, by their schema names."
    )
    confidence: float = Field(description="How sure you are of the goal, from 0 to 1.")


INTENT_PROMPT = (
    "You read what a customer asks a goal-based assistant. Choose the one goal of the catalogue the message asks "
    "for and extract that goal's entities.\n"
    "- Only the entities the goal lists. A string or list entity holds the words exactly as the user wrote them "
    "(a name, a market, a period), never a code, ticker or id you inferred; an enum holds one of its values; a "
    "boolean is true only when the message asks for it.\n"
    "- Leave out what the message does not say: never fill a default.\n"
    '- Greetings, small talk and whatever no goal covers: domain "general", goal "", no entities.\n'
    "{conversation}"
    "Catalogue:\n{catalogue}"
)
CONVERSATION_PROMPT = (
    "- The conversation's current goal is {domain} {goal}, with entities {entities}. A message that only names "
    'new entities for it (like "e da Vale?" or a bare name answering a question) continues that goal: answer '
    "that goal with the entities the new message states.\n"
)


def _entity_line(goal: GoalSpec, name: str, schema: Mapping[str, Any]) -> str:
    kind = schema.get("type", "string")
    facts = [f"enum, one of {' | '.join(map(str, schema.get('values') or ()))}" if kind == "enum" else kind]
    if kind == "list":
        facts[0] = "list of strings"
        if _collected(goal, schema):
            facts.append(f"instead of {_collected(goal, schema)} when the message names several")
    if schema.get("required"):
        facts.append("required")
    if schema.get("default") is not None:
        facts.append(f"default {schema['default']}")
    description = f": {schema['description']}" if schema.get("description") else ""
    return f"    - {name} ({'; '.join(facts)}){description}"


def catalogue_prompt(goals: Iterable[GoalSpec], catalogue: GoalCatalogue) -> str:
    """The goals as the model sees them: domain, name, description, examples and each entity's schema."""
    lines = []
    for goal in goals:
        described = f": {goal.description}" if goal.description else ""
        lines.append(f"- domain {goal.domain}, goal {goal.name}{described}")
        examples = goal_examples(goal, catalogue)
        if examples:
            lines.append("  examples: " + "; ".join(json.dumps(e, ensure_ascii=False) for e in examples))
        if goal.entities_schema:
            lines.append("  entities:")
            lines.extend(_entity_line(goal, name, schema) for name, schema in goal.entities_schema.items())
    return "\n".join(lines)


def _catalogued(catalogue: GoalCatalogue, domain: str, name: str) -> GoalSpec | None:
    """The enabled goal the model named: by domain and name, else by a name only one enabled goal has."""
    goal = catalogue.goal(domain, name)
    if goal is not None and goal.enabled:
        return goal
    named = [goal for goal in catalogue.enabled_goals() if goal.name == name]
    return named[0] if len(named) == 1 else None


def _strings(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    return [str(item).strip() for item in items if isinstance(item, str | int | float) and not isinstance(item, bool)]


def _entities_checked(
    goal: GoalSpec, raw: Mapping[str, Any], text: str, previous: IntentOutput | None
) -> dict[str, Any]:
    """The model's entities that the schema allows and the user said (or the conversation holds)."""
    said = [f" {normalize(text)} "]
    if previous is not None:
        said += [f" {normalize(s)} " for value in previous.entities.values() for s in _strings(value)]
    entities: dict[str, Any] = {}
    dropped = []
    for name, value in raw.items():
        schema = goal.entities_schema.get(name)
        kind = (schema or {}).get("type", "string")
        kept: Any = None
        if schema is None or _blank(value):
            pass
        elif kind == "enum":
            wanted = fold(str(value).strip()) if isinstance(value, str) else None
            kept = next((allowed for allowed in schema.get("values") or () if fold(str(allowed)) == wanted), None)
        elif kind == "boolean":
            if isinstance(value, bool):
                kept = value
            elif isinstance(value, str) and value.strip().casefold() in ("true", "false"):
                kept = value.strip().casefold() == "true"
        else:
            written = [s for s in _strings(value) if s and any(_found(s, haystack) for haystack in said)]
            distinct: dict[str, str] = {}
            for spelling in written:
                distinct.setdefault(fold(spelling), spelling)
            written = list(distinct.values())
            if kind == "list":
                kept = written or None
            elif written and not isinstance(value, list):
                kept = written[0]
        if kept is None:
            dropped.append(name)
        else:
            entities[name] = kept
    if dropped:
        logger.info("Intent adapter dropped entities %s of %s.%s: %r", dropped, goal.domain, goal.name, dict(raw))
    for name, schema in goal.entities_schema.items():  # a list of one is its collected entity, and vice versa
        collected = _collected(goal, schema)
        many = entities.get(name)
        if not collected or not isinstance(many, list):
            continue
        if len(many) == 1 and _blank(entities.get(collected)):
            entities[collected] = many[0]
            del entities[name]
        elif len(many) > 1:
            entities.pop(collected, None)
    return entities


async def model_intent_read(profile: ProfileSpec, text: str, *, previous: IntentOutput | None = None) -> IntentOutput:
    """The reader over the profile's routing endpoint (see the module docstring)."""
    catalogue = profile.goals
    goals = catalogue.enabled_goals()
    conversation = ""
    current = catalogue.goal(previous.primary_domain, previous.goal) if previous is not None else None
    if previous is not None and current is not None and current.enabled:
        conversation = CONVERSATION_PROMPT.format(
            domain=current.domain,
            goal=current.name,
            entities=json.dumps(dict(previous.entities), ensure_ascii=False),
        )
    system = INTENT_PROMPT.format(conversation=conversation, catalogue=catalogue_prompt(goals, catalogue))
    model = OpenAICompatibleModel(profile, for_routing=True)
    runnable = model.client().with_structured_output(GoalIntent, method="function_calling", include_raw=True)
    try:
        reply = await runnable.ainvoke([("system", system), ("human", text)])
        usage_record(KIND_GOAL, model.model_name, reply["raw"])
        if reply["parsing_error"] is not None:  # a reply that is no GoalIntent fails as the call would
            raise reply["parsing_error"]
    except Exception as exc:  # noqa: BLE001 — any client failure means "not understood": the gate asks
        logger.warning("Goal intent model failed: %s", exc)
        return IntentOutput("", "", {}, 0.0, text, {"method": "model"})
    reading = reply["parsed"]
    if not isinstance(reading, GoalIntent):
        logger.warning("Goal intent model answered no %s call.", GoalIntent.__name__)
        return IntentOutput("", "", {}, 0.0, text, {"method": "model"})
    confidence = min(max(float(reading.confidence), 0.0), 1.0)
    goal = _catalogued(catalogue, reading.domain.strip(), reading.goal.strip())
    if goal is None:
        if reading.goal.strip():
            logger.info("Goal intent model named %s.%s, not in the catalogue.", reading.domain, reading.goal)
        return _general(text, confidence, method="model")
    entities = _entities_checked(goal, reading.entities, text, previous)
    how: dict[str, Any] = {"method": "model"}
    hinted = _hinted(catalogue, text)
    if hinted is not None and goal_label(hinted) == goal_label(goal) and confidence < CONFIDENT:
        # The manifest's own hints name the same goal, alone: a clear question, which the gate need not ask back.
        confidence, how["corroborated"] = CONFIDENT, "hints"
    if missing_required(goal, _held(goal, entities, previous)):
        confidence = min(confidence, INCOMPLETE)
    return IntentOutput(goal.domain, goal.name, entities, confidence, text, how)


async def intent_read(profile: ProfileSpec, text: str, *, previous: IntentOutput | None = None) -> IntentOutput:
    """``text``'s goal and entities for ``profile``: over the routing endpoint when one is configured (a routing
    endpoint of its own wins over the answering one), else offline. Never raises.

    ``previous`` is the conversation's pending or last goal with its entities: a follow-up that only names
    entities keeps that goal. The output holds what this message states; :func:`entities_merge` adds the rest.
    """
    if not profile.goals.enabled_goals():
        return _general(text, method="none")
    if router_llm_separate() or llm_configured(profile):
        return await model_intent_read(profile, text, previous=previous)
    return await offline_intent_read(profile, text, previous=previous)
