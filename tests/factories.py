"""Factories for test data (factory_boy)."""

from __future__ import annotations

import factory

from agents.models import AgentProfile, McpServer, McpTool, Specialist
from agents.services import prompt_version_create
from routing.models import Intent, Keyword, StatePolicy
from tenants.models import Tenant


class TenantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tenant
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"tenant_{n}")
    name = factory.LazyAttribute(lambda o: o.slug.replace("_", " ").title())


class AgentProfileFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AgentProfile
        django_get_or_create = ("agent_id",)

    agent_id = factory.Sequence(lambda n: f"profile_{n}")
    name = factory.LazyAttribute(lambda o: o.agent_id.replace("_", " ").title())
    domain = "telecom"


class SpecialistFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Specialist
        django_get_or_create = ("profile", "name")
        skip_postgeneration_save = True

    profile = factory.SubFactory(AgentProfileFactory)
    name = factory.Sequence(lambda n: f"specialist_{n}")
    display_name = factory.LazyAttribute(lambda o: o.name.replace("_", " ").title())

    @factory.post_generation
    def prompt(self, create, extracted, **kwargs):
        if create:
            prompt_version_create(specialist=self, text=extracted or f"You are {self.name}. Answer briefly.")


class McpServerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = McpServer
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"server_{n}")
    endpoint = factory.LazyAttribute(lambda o: f"http://127.0.0.1:9/{o.name}/mcp")


class McpToolFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = McpTool
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"tool_{n}")
    server = factory.SubFactory(McpServerFactory)
    args_schema = factory.LazyFunction(lambda: {"type": "object", "properties": {}})


class IntentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Intent
        skip_postgeneration_save = True

    profile = factory.SubFactory(AgentProfileFactory)
    name = factory.Sequence(lambda n: f"intent_{n}")
    specialist = factory.SubFactory(SpecialistFactory, profile=factory.SelfAttribute("..profile"))
    priority = 100

    @factory.post_generation
    def keywords(self, create, extracted, **kwargs):
        if create and extracted:
            for text in extracted:
                Keyword.objects.create(intent=self, text=text)

    @factory.post_generation
    def tools(self, create, extracted, **kwargs):
        if create and extracted:
            self.mcp_tools.set(extracted)


class StatePolicyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = StatePolicy

    profile = factory.SubFactory(AgentProfileFactory)
    state = factory.Sequence(lambda n: f"WAITING_{n}")
    specialist = factory.SubFactory(SpecialistFactory, profile=factory.SelfAttribute("..profile"))


class ConversationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "conversations.Conversation"

    tenant = factory.SubFactory(TenantFactory)
    profile = factory.SubFactory(AgentProfileFactory)
    session_id = factory.Sequence(lambda n: f"session-{n}")
    conversation_key = factory.LazyAttribute(lambda c: f"{c.tenant.slug}:{c.profile.agent_id}:{c.session_id}")
