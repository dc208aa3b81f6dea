"""Moving models out of ``routing`` into ``tenants``, ``conversations`` and ``common`` keeps every row.

A PostgreSQL database filled at the migrations of before the move (routing 0010, handoffs 0004, analytics 0002,
agents 0004) migrates to the latest ones with the same rows under the same ids and values, foreign keys that resolve
through the current models and are still enforced by PostgreSQL, and content types that followed the models, so a
group's permissions (and a member's ``has_perm``) now name the new apps. Had a migration dropped, recreated or
renamed a table, or left a content type behind, this test would fail.
"""

from __future__ import annotations

import datetime
from functools import reduce

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import IntegrityError, connection, transaction

from analytics.models import DailyHandoffs
from common.models import ConfigVersion
from conversations.models import Conversation, Message, RouteDecisionRecord, ToolCall
from handoffs.models import Handoff
from routing.models import RolloutTenantOverride
from tenants.models import ApiKey, Tenant
from tests.migration_moves import assert_foreign_keys_declared, contents, row_maker

# The leaf migrations of the apps the move touched, as they were just before it; the new apps did not exist.
BEFORE_THE_MOVE = {
    "routing": "0010_conversation_handoff_kinds",
    "handoffs": "0004_handoff_cohort",
    "analytics": "0002_daily_totals",
    "agents": "0004_profile_delegation_loop_safety_words",
}
NEW_APPS = ("common", "tenants", "conversations")

# Historical model -> (the current model on the same table, the columns compared before and after).
ROWS = {
    "routing.Tenant": (Tenant, ("slug", "name", "is_active")),
    "routing.ApiKey": (ApiKey, ("tenant_id", "prefix", "key_hash")),
    "routing.Conversation": (Conversation, ("tenant_id", "profile_id", "conversation_key", "cohort", "handoff_kinds")),
    "routing.Message": (Message, ("conversation_id", "role", "agent", "content", "latency_ms")),
    "routing.RouteDecisionRecord": (RouteDecisionRecord, ("conversation_id", "message_id", "intent", "method")),
    "routing.ToolCall": (ToolCall, ("conversation_id", "message_id", "tool", "status")),
    "routing.RoutingConfigVersion": (ConfigVersion, ("version",)),
    "routing.RolloutTenantOverride": (RolloutTenantOverride, ("flag_id", "tenant_id", "enabled")),
    "handoffs.Handoff": (Handoff, ("conversation_id", "tenant_id", "profile_id", "kind", "cohort")),
    "analytics.DailyHandoffs": (DailyHandoffs, ("day", "tenant_id", "profile_id", "n", "kind")),
}

# The relations followed through the current models, per historical model.
RELATIONS = {
    "routing.ApiKey": ("tenant",),
    "routing.Conversation": ("tenant", "profile"),
    "routing.Message": ("conversation__tenant", "conversation__profile"),
    "routing.RouteDecisionRecord": ("conversation__tenant", "message__conversation__profile"),
    "routing.ToolCall": ("conversation__tenant", "message__conversation__profile"),
    "routing.RolloutTenantOverride": ("tenant", "flag"),
    "handoffs.Handoff": ("conversation__tenant", "conversation__profile", "tenant", "profile"),
    "analytics.DailyHandoffs": ("tenant", "profile"),
}

# (app, model) of each content type before the move -> after it.
CONTENT_TYPES = {
    ("routing", "tenant"): ("tenants", "tenant"),
    ("routing", "apikey"): ("tenants", "apikey"),
    ("routing", "conversation"): ("conversations", "conversation"),
    ("routing", "message"): ("conversations", "message"),
    ("routing", "routedecisionrecord"): ("conversations", "routedecisionrecord"),
    ("routing", "toolcall"): ("conversations", "toolcall"),
    ("routing", "routingconfigversion"): ("common", "configversion"),
}
VIEWED = ("tenant", "conversation", "routingconfigversion")  # routing's models a group may view, before the move
VIEWED_AFTER = {"tenants.view_tenant", "conversations.view_conversation", "common.view_configversion"}


def populate(apps) -> dict[str, list[int]]:
    """Two tenants with keys, conversations, messages, decisions, tool calls, handoffs, overrides and daily totals."""
    add, made = row_maker(apps)

    profile = add("agents.AgentProfile", agent_id="keep_rows", name="Keep rows")
    billing = add("agents.Specialist", profile=profile, name="billing_agent").name
    flag = add("routing.RolloutFlag", key="keep_rows_flag")
    add("routing.RoutingConfigVersion", version=41)
    move = {"from_agent": "support_agent", "to_agent": billing, "kind": "handoff", "cohort": "multi_agent"}
    for n, slug in enumerate(("acme", "globex"), start=1):
        tenant = add("routing.Tenant", slug=slug, name=slug.title())
        owner = {"tenant": tenant, "profile": profile}
        add("routing.ApiKey", tenant=tenant, name=f"{slug} key", prefix=f"key{n}", key_hash=f"{n:064d}")
        add("routing.RolloutTenantOverride", flag=flag, tenant=tenant, enabled=n == 1)
        add("analytics.DailyHandoffs", **owner, **move, day=datetime.date(2026, 11, 20), n=3 * n, status="completed")
        for c in range(2):
            session = {"session_id": f"s{c}", "conversation_key": f"{slug}:keep_rows:s{c}"}
            conversation = add("routing.Conversation", **owner, **session, cohort="multi_agent", handoff_kinds=1)
            said = {"conversation": conversation, "agent": billing}
            question = add("routing.Message", conversation=conversation, role="user", content=f"invoice {c}?")
            add("routing.Message", **said, role="agent", content="the billing part")
            answer = add("routing.Message", **said, role="assistant", content="10 EUR", latency_ms=12.5 + c)
            add("routing.Message", conversation=conversation, role="system", content="session ended")
            route = {"mode": "router", "route": billing, "intent": "billing_invoice", "method": "keyword"}
            add("routing.RouteDecisionRecord", **said, **route, message=question)
            add("routing.ToolCall", **said, message=answer, tool="get_invoice", status="ok", latency_ms=3.0)
            add("handoffs.Handoff", **owner, **move, conversation=conversation)
    return made


def grant_view_permissions(apps) -> tuple[int, int, dict[tuple[str, str], int]]:
    """A group and its member viewing tenants, conversations and the config version, by routing's content types.

    Returns the group's and the user's ids and the content type ids of every moved model."""
    HistoricalContentType = apps.get_model("contenttypes", "ContentType")
    HistoricalPermission = apps.get_model("auth", "Permission")
    content_types = {
        (app, model): HistoricalContentType.objects.get_or_create(app_label=app, model=model)[0]
        for app, model in CONTENT_TYPES
    }
    permissions = [
        HistoricalPermission.objects.get_or_create(
            content_type=content_types[("routing", model)], codename=f"view_{model}", defaults={"name": model}
        )[0]
        for model in VIEWED
    ]
    group = apps.get_model("auth", "Group").objects.create(name="Conversation auditors")
    group.permissions.set(permissions)
    user = apps.get_model(settings.AUTH_USER_MODEL).objects.create(username="auditor", password="!")
    user.groups.add(group)
    return group.pk, user.pk, {key: content_type.pk for key, content_type in content_types.items()}


def assert_relations_resolve(made: dict[str, list[int]]) -> None:
    """Each row made before the move reaches its tenant, profile, conversation and message through today's models."""
    for label, paths in RELATIONS.items():
        rows = list(ROWS[label][0].objects.filter(pk__in=made[label]).select_related(*paths))
        assert len(rows) == len(made[label]), f"{label}: rows are missing"
        for row in rows:
            for path in paths:
                assert reduce(getattr, path.split("__"), row) is not None, f"{label} {row.pk}: {path} is lost"
    tenants = Tenant.objects.filter(pk__in=made["routing.Tenant"])
    assert {tenant.slug: tenant.conversations.count() for tenant in tenants} == {"acme": 2, "globex": 2}


def assert_foreign_keys_are_postgresql_constraints() -> None:
    """Each foreign key of the current models is a constraint on the right column and table, and is enforced."""
    assert_foreign_keys_declared(ROWS)
    with pytest.raises(IntegrityError), transaction.atomic():  # checked at commit: Django's constraints are deferred
        Message.objects.create(conversation_id=10**12, role="user", content="a message of no conversation")


def assert_permissions_followed(group_id: int, user_id: int, content_type_ids: dict, permission_ids: set) -> None:
    """The content types (same rows) now name the new apps, so the group's permissions do too; none is left behind."""
    for (old_app, old_model), new in CONTENT_TYPES.items():
        moved = ContentType.objects.get(pk=content_type_ids[(old_app, old_model)])
        assert (moved.app_label, moved.model) == new
        assert moved.model_class() is not None, f"{new}: no model of today has this content type"
    assert not ContentType.objects.filter(app_label="routing", model__in=[m for _, m in CONTENT_TYPES]).exists()
    config_version = Permission.objects.filter(content_type__app_label="common", content_type__model="configversion")
    assert set(config_version.values_list("codename", flat=True)) == {
        f"{action}_configversion" for action in ("add", "change", "delete", "view")
    }
    group = Group.objects.get(pk=group_id)
    assert set(group.permissions.values_list("pk", flat=True)) == permission_ids
    assert {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.all()} == VIEWED_AFTER
    assert get_user_model().objects.get(pk=user_id).get_all_permissions() == VIEWED_AFTER


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_database_filled_before_the_move_keeps_its_rows_keys_and_permissions_after_it(migrations):
    if connection.vendor != "postgresql":
        pytest.skip("proves the migrations on PostgreSQL, the production database (run under scripts/services.py)")
    # The database as installed before the move (the new apps did not exist) and the historical models of then.
    old_apps = migrations.installed_at(*BEFORE_THE_MOVE.items(), *((app, None) for app in NEW_APPS))
    made = populate(old_apps)
    group_id, user_id, content_type_ids = grant_view_permissions(old_apps)
    group = old_apps.get_model("auth", "Group").objects.get(pk=group_id)
    permission_ids = set(group.permissions.values_list("pk", flat=True))
    before = contents(ROWS, old_apps.get_model)

    migrations.forward()

    assert contents(ROWS, lambda label: ROWS[label][0]) == before  # the same rows, ids and values
    assert_relations_resolve(made)
    assert_foreign_keys_are_postgresql_constraints()
    assert_permissions_followed(group_id, user_id, content_type_ids, permission_ids)
