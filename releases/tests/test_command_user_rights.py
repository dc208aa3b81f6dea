"""A command acting as a user (``--user``) asks for the permissions the admin's page asks for the same act.

A role's powers are the same on every path: publishing and reverting take ``routing.add_routingversion``, making a
rollout plan ``releases.add_rolloutplan``, starting, pausing, resuming, advancing or aborting one
``releases.change_rolloutplan``, reading them ``releases.view_rolloutplan``, an import the import page's
``routing.change_intent`` (and each change it makes, its own), an import that publishes the right to publish too.
Each refusal names the user and the permission, and nothing is written. Without ``--user`` the operator is not held.
"""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command

from releases.models import RolloutPlan, RolloutPlanStatus
from releases.rollout.commands import plan_start
from releases.tests.test_import_lands_in_draft import ROUTING
from releases.tests.test_release_approval import publish_url
from releases.tests.test_release_approval_paths import command_url, numbers, revert_url
from releases.versions import ERROR_NOT_STAFF, ERROR_PERMISSION, version_publish
from routing.documents import profile_documents
from routing.models import Keyword, RoutingVersion
from routing.selectors import live_version

pytestmark = pytest.mark.django_db


def refusal(user: str, doing: str, permission: str) -> str:
    return ERROR_PERMISSION.format(user=user, doing=doing, permission=permission)


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


@pytest.fixture
def writer(django_user_model):
    """Staff who edit intents and keywords, and read versions and plans, but publish nothing and make no plan."""
    user = django_user_model.objects.create_user("writer", "writer@example.com", "writer-password", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            codename__in=[
                "view_agentprofile",
                "view_intent",
                "change_intent",
                "view_keyword",
                "add_keyword",
                "view_routingversion",
                "view_rolloutplan",
            ]
        )
    )
    return user


@pytest.fixture
def published(telecom):
    """telecom_contas live at version 1, its draft one keyword further."""
    version_publish(profile=telecom, note="first")
    Keyword.objects.create(intent=telecom.intents.get(name="retail_order_tracking"), text="modem")
    return telecom


def test_a_user_who_may_not_publish_in_the_admin_publishes_and_reverts_nothing_by_command(client, writer, published):
    run("routing_publish", "--profile", "telecom_contas", "--candidate")  # the operator: candidate version 2
    client.force_login(writer)
    assert client.get(publish_url(published)).status_code == 403  # what the admin says
    assert client.get(revert_url(RoutingVersion.objects.get(number=2))).status_code == 403
    publish = refusal("writer", "publish telecom_contas", "routing.add_routingversion")

    for args in (("routing_publish",), ("routing_publish", "--candidate"), ("routing_revert", "--to", "1")):
        with pytest.raises(CommandError) as refused:
            run(*args, "--profile", "telecom_contas", "--user", "writer")
        assert str(refused.value) == publish

    assert numbers(published) == [1, 2] and live_version(published).number == 1


def test_a_user_who_may_not_change_rollout_plans_commands_none_but_may_read_them(client, writer, editor, published):
    run("routing_publish", "--profile", "telecom_contas", "--candidate")
    plan = RolloutPlan.objects.create(
        name="modem", profile=published, candidate=RoutingVersion.objects.get(number=2), stages=[10, 100]
    )
    plan_start(plan, actor="operator")
    client.force_login(writer)
    assert client.post(command_url(plan, "pause")).status_code == 403  # what the admin says

    for command in ("pause", "advance", "abort"):
        with pytest.raises(CommandError) as refused:
            run("rollout", command, str(plan.pk), "--user", "writer")
        assert str(refused.value) == refusal("writer", f"{command} rollout plans", "releases.change_rolloutplan")
    with pytest.raises(CommandError) as start:
        run("rollout", "start", "--profile", "telecom_contas", "--version", "2", "--user", "writer")

    assert str(start.value) == refusal("writer", "make rollout plans", "releases.add_rolloutplan")
    plan.refresh_from_db()
    assert (plan.status, plan.percentage, RolloutPlan.objects.count()) == (RolloutPlanStatus.RUNNING, 10, 1)
    assert "modem" in run("rollout", "status", "--user", "writer")  # reading is theirs
    assert "paused" in run("rollout", "pause", str(plan.pk), "--user", "editor").lower()  # an editor may


def test_an_import_needs_the_import_pages_right_and_one_that_publishes_the_right_to_publish(
    editor, writer, published, tmp_path
):
    path = tmp_path / "routing.telecom_contas.yaml"
    path.write_text(ROUTING.replace("modem]", "modem, roteador]"), encoding="utf-8")
    editor.groups.get().permissions.remove(Permission.objects.get(codename="add_routingversion"))
    writer.user_permissions.remove(Permission.objects.get(codename="change_intent"))
    writer.user_permissions.add(Permission.objects.get(codename="change_keyword"))
    before = profile_documents(["telecom_contas"])

    with pytest.raises(CommandError) as publish:
        run("import_config", str(path), "--publish", "--user", "editor")
    with pytest.raises(CommandError) as page:
        run("import_config", str(path), "--user", "writer")

    assert str(publish.value) == refusal("editor", "publish telecom_contas", "routing.add_routingversion")
    assert str(page.value) == refusal("writer", "import configuration", "routing.change_intent")
    assert profile_documents(["telecom_contas"]) == before and live_version(published).number == 1
    assert "keyword 'roteador' added" in run("import_config", str(path), "--user", "editor")  # into the draft: theirs


def test_a_user_who_may_not_use_the_admin_publishes_nothing_by_command_whatever_their_permissions(
    client, editor, published
):
    editor.is_staff = False
    editor.save(update_fields=["is_staff"])
    client.force_login(editor)
    assert client.get(publish_url(published)).status_code == 302  # the admin sends them to its login page

    with pytest.raises(CommandError) as refused:
        run("routing_publish", "--profile", "telecom_contas", "--user", "editor")

    assert str(refused.value) == ERROR_NOT_STAFF.format(user="editor")
    assert live_version(published).number == 1
