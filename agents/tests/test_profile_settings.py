"""The profile settings' declarations (agents/profile_settings.py) held to what they declare: each names a field of the
profile with its default, choices and null; every field a document holds is declared; every attribute of the
compiled profile is a setting or built from the document's other parts; the admin's page shows each in its section;
and the compile passes each plain setting on unchanged."""

from __future__ import annotations

import dataclasses

import pytest
from django.db import models

from agents.admin.profiles import PROFILE_SECTIONS, PROFILE_SHOWN, AgentProfileAdmin
from agents.models import MODEL_ENDPOINT_FIELDS, AgentProfile
from agents.profile_settings import (
    AS_DEFAULT,
    AS_IS,
    MODEL_DEFAULT,
    PROFILE_SETTINGS,
    SETTINGS_BY_NAME,
    yaml_path,
)
from routing.documents import PROFILE_DEFAULTS, PROFILE_FIELDS, profile_compile, profile_documents
from routing.specs import ProfileSpec
from tests.factories import AgentProfileFactory, SpecialistFactory

# The profile's fields that are no setting of its document, and why.
NOT_SETTINGS = {
    "id": "the row",
    "created_at": "the row's history",
    "updated_at": "the row's history",
    "fallback_specialist": "a relation: the document names it",
    "coordinator": "a relation: the document names it",
    "goal_domains": "a relation: the document names them",
    "examples_calibration": "the last calibration's figures: the admin shows them, no version holds them",
    "release_needs_approval": "governance of the releases, not behaviour",
}
# The compiled profile's attributes that no setting is passed or built into, and what they are built from.
SPEC_NOT_SETTINGS = {
    "pk": "the profile's row",
    "version": "the released version compiled",
    "fallback_agent": "the fallback specialist, or the first enabled one",
    "coordinator": "the coordinator, when an enabled specialist",
    "specialists": "the document's specialists",
    "intents": "the document's intents and the remote backends",
    "goals": "the goal domains' goals and capabilities",
    "tool_rights": "the document's tools",
    "backends": "the profile's remote backends (not versioned)",
    "knowledge_documents": "the knowledge documents the document holds (a version's: those it was published with)",
    "knowledge_synonyms": "the sources' synonyms the document holds (a version's: those it was published with)",
}


def model_field(name: str) -> models.Field:
    field = AgentProfile._meta.get_field(name)
    assert isinstance(field, models.Field) and field.concrete and not field.is_relation, name
    return field


@pytest.mark.parametrize("setting", PROFILE_SETTINGS, ids=lambda setting: setting.name)
def test_each_declaration_names_a_field_of_the_profile_with_its_default_choices_and_null(setting):
    field = model_field(setting.name)
    if setting.default != MODEL_DEFAULT:
        assert setting.default == field.get_default()
    assert setting.choices == tuple(value for value, _ in field.choices or ())
    assert setting.nullable == field.null


def test_every_field_a_document_holds_is_declared_once_and_nothing_else_is():
    fields = {field.name for field in AgentProfile._meta.get_fields() if getattr(field, "concrete", False)}
    fields |= {field.name for field in AgentProfile._meta.many_to_many}
    names = [setting.name for setting in PROFILE_SETTINGS]
    assert len(names) == len(set(names))
    assert sorted(fields - set(NOT_SETTINGS)) == sorted(names)
    assert tuple(names) == PROFILE_FIELDS


def test_the_keys_documents_gained_are_numbered_from_one_in_the_order_they_came():
    numbers = sorted(setting.added for setting in PROFILE_SETTINGS if setting.added)
    assert numbers == list(range(1, len(numbers) + 1))
    assert list(PROFILE_DEFAULTS) == [
        setting.name for setting in sorted(PROFILE_SETTINGS, key=lambda setting: setting.added) if setting.added
    ]
    # A value for old versions of its own is only for a setting they lacked, and one served differently from today's.
    assert all(
        setting.added and setting.served_before != setting.default
        for setting in PROFILE_SETTINGS
        if setting.served_before != AS_DEFAULT
    )
    assert PROFILE_DEFAULTS["escalation"] == {"enabled": False}


def test_the_operators_settings_are_the_model_endpoint_fields():
    assert MODEL_ENDPOINT_FIELDS == ("llm_model", "llm_base_url", "llm_api_key_env")
    assert all(SETTINGS_BY_NAME[name].operator_only for name in MODEL_ENDPOINT_FIELDS)


def test_each_yaml_key_is_one_key_or_one_within_a_mapping_and_names_one_setting():
    for block in ("agents", "routing"):
        paths = [yaml_path(setting, block) for setting in PROFILE_SETTINGS if yaml_path(setting, block)]
        assert all(1 <= len(path) <= 2 for path in paths), block
        assert len(paths) == len(set(paths)), block
        groups = {path[0] for path in paths if len(path) == 2}
        assert not groups & {path[0] for path in paths if len(path) == 1}, block


def test_every_attribute_of_the_compiled_profile_is_a_setting_or_built_from_the_documents_other_parts():
    attributes = {field.name for field in dataclasses.fields(ProfileSpec)}
    passed = {setting.name for setting in PROFILE_SETTINGS if setting.compiled == AS_IS}
    built = {setting.compiled for setting in PROFILE_SETTINGS if setting.compiled not in (AS_IS, "")}
    assert sorted(passed - attributes) == []
    assert sorted(built - attributes) == []
    assert sorted(attributes - passed - built - set(SPEC_NOT_SETTINGS)) == []
    assert not set(SPEC_NOT_SETTINGS) & (passed | built)


def test_a_plain_settings_default_on_the_compiled_profile_is_its_declared_one():
    for field in dataclasses.fields(ProfileSpec):
        setting = SETTINGS_BY_NAME.get(field.name)
        if setting is not None and setting.compiled == AS_IS and field.default is not dataclasses.MISSING:
            assert field.default == setting.default, field.name


def test_the_profile_page_shows_every_setting_of_a_section_in_it():
    sections = [section for section, _ in PROFILE_SECTIONS]
    assert sorted({setting.section for setting in PROFILE_SETTINGS if setting.section} - set(sections)) == []
    shown = {
        title: options["fields"] for title, options in AgentProfileAdmin.fieldsets or () if isinstance(options, dict)
    }
    for setting in PROFILE_SETTINGS:
        if setting.section is not None:
            title = None if setting.section == sections[0] else setting.section
            assert set(PROFILE_SHOWN.get(setting.name, [setting.name])) <= set(shown[title]), setting.name
    assert SETTINGS_BY_NAME["examples_reliability"].section is None  # calibration writes it; the page shows none


@pytest.mark.django_db
def test_the_compile_passes_each_plain_setting_to_the_compiled_profile_unchanged():
    profile = AgentProfileFactory(agent_id="plain_settings")
    SpecialistFactory(profile=profile, name="support_agent")
    changed = {
        "name": "Plain settings",
        "domain": "retail",
        "description": "A profile whose settings are none of their defaults.",
        "language": "es",
        "policy": "Be brief.",
        "synthesis_prompt": "Merge them.",
        "routing_mode": "hybrid",
        "llm_router_enabled": True,
        "llm_router_threshold": 0.7,
        "handoffs_enabled": False,
        "hybrid_followup_max_chars": 12,
        "supervisor_planner": "model",
        "review_single_turns": True,
        "summarise_conversations": False,
        "share_customer_memory": False,
        "extract_customer_facts": True,
        "llm_model": "small-model",
        "llm_temperature": 0.3,
        "llm_base_url": "https://llm.example.com/v1",
        "llm_api_key_env": "RETAIL_API_KEY",
        "goal_threshold": 0.5,
        "multi_topic": "in_turn",
        "stack_depth": 5,
        "frame_expiry_turns": 9,
        "frame_expiry_minutes": 45,
        "resume_style": "silent",
        "a2a_anonymous_bucket": "context",
        "translations": {"en": {"name": "Retail orders"}},
    }
    passed = {setting.name for setting in PROFILE_SETTINGS if setting.compiled == AS_IS}
    assert sorted(passed - {"agent_id", *changed}) == []
    for name, value in changed.items():
        assert value != model_field(name).get_default(), name
        setattr(profile, name, value)
    profile.save()

    spec = profile_compile(profile_documents(["plain_settings"])["plain_settings"], pk=profile.pk)

    assert {name: getattr(spec, name) for name in changed} == changed
    assert spec.agent_id == "plain_settings"


@pytest.mark.django_db
def test_a_version_published_before_the_running_summarys_switch_is_served_keeping_the_summary():
    profile = AgentProfileFactory(agent_id="summarised", summarise_conversations=False)
    SpecialistFactory(profile=profile, name="support_agent")
    document = profile_documents(["summarised"])["summarised"]
    assert document["profile"]["summarise_conversations"] is False
    del document["profile"]["summarise_conversations"]  # as published before the switch existed

    assert profile_compile(document, pk=profile.pk).summarise_conversations is True
