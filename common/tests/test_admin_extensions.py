"""An app adds pages and columns to another app's admin through its extension point (``common.adminkit``), never
by registering that admin again: the registered admins are the owning apps' own classes, the release pages still
answer under the profile's, the Intent's and the conversation's URLs, and a model given an extension its admin
does not apply fails the system check."""

from __future__ import annotations

import ast
from pathlib import Path

from django.contrib import admin
from django.core.checks import run_checks
from django.urls import reverse

from agents.admin.profiles import AgentProfileAdmin
from agents.models import AgentProfile
from common import adminkit
from common.adminkit import AdminExtension, admin_extend, admin_extensions, admin_extensions_check
from conversations.admin import ConversationAdmin
from conversations.models import Conversation
from routing.admin import IntentAdmin
from routing.models import Intent, RoutingVersion

ROOT = Path(__file__).resolve().parent.parent.parent
APPS = ("common", "tenants", "handoffs", "agents", "routing", "conversations", "releases", "chat", "analytics")


def test_each_model_admin_is_the_class_its_own_app_registers():
    assert type(admin.site._registry[AgentProfile]) is AgentProfileAdmin
    assert type(admin.site._registry[Intent]) is IntentAdmin
    assert type(admin.site._registry[Conversation]) is ConversationAdmin


def test_the_release_pages_hang_on_the_admins_of_the_profile_the_intent_and_the_conversation():
    assert {type(e).__name__ for e in admin_extensions(AgentProfile)} == {"ProfileReleases", "ProfileTranslations"}
    assert {type(e).__name__ for e in admin_extensions(Intent)} == {"ConfigPages"}
    assert {type(e).__name__ for e in admin_extensions(Conversation)} == {"ImpactPage"}
    assert reverse("admin:agents_agentprofile_publish", args=[7]) == "/admin/agents/agentprofile/7/publish/"
    assert reverse("admin:agents_agentprofile_second_person", args=[7]) == "/admin/agents/agentprofile/7/second-person/"
    assert reverse("admin:routing_config_import") == "/admin/routing/intent/config/import/"
    assert reverse("admin:conversations_conversation_impact") == "/admin/conversations/conversation/impact/"


def test_no_product_module_unregisters_an_admin_but_the_one_replacing_a_third_party_apps():
    unregistering = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "tests" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and node.attr == "unregister":
                    unregistering.append(str(path.relative_to(ROOT)))
    # django-auditlog registers its LogEntry admin with no setting to leave it out (common/admin.py says why).
    assert unregistering == ["common/admin.py"]


def test_the_product_passes_the_extension_check():
    assert admin_extensions_check(admin.site) == []
    assert not [m for m in run_checks() if m.id == "common.E001"]


def test_a_model_given_an_extension_its_admin_does_not_apply_fails_the_check(monkeypatch):
    class Column(AdminExtension):
        pass

    monkeypatch.setattr(adminkit, "_EXTENSIONS", {})  # this test's extensions only
    site = admin.AdminSite(name="elsewhere")
    site.register(RoutingVersion, admin.ModelAdmin)
    admin_extend(RoutingVersion, Column())
    admin_extend(RoutingVersion, Column())  # the same kind twice is kept once
    assert admin_extensions_check(site) == [
        "routing.RoutingVersion: its admin is not an ExtensibleAdmin, so 1 extension(s) are not shown"
    ]
