"""The two-person rule holds for a profile never published, and a new profile is no way round it.

Customers of a profile never published are served its draft — unless the profile needs a second person: then they
are served only a version, so that no editor's draft edit reaches them unreviewed. Switching the rule on for a profile
never published publishes what its customers are served at that moment as its first version, by the approver who
switches it (recorded so). A profile made while another needs a second person needs one too (whoever makes it, in the
admin or by an import): it is served nothing until its first publish, which a second person approves.
"""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command

from agents.models import AgentProfile
from common.errors import ERROR_UNKNOWN_AGENT
from releases.admin.versions import NEVER_PUBLISHED_HELD
from releases.approvals import SWITCH_NOTE, publish_request, release_request_approve
from releases.models import RoutingTestCase
from releases.tests.test_release_approval import messages_of, switch_url
from releases.versions import ERROR_APPROVAL_REQUIRED, ApprovalRequired, version_publish
from routing import snapshot
from routing.models import Keyword, RoutingVersion
from routing.selectors import live_version
from tests.adminkit import add_url, change_url, error_messages, form_data

pytestmark = pytest.mark.django_db


def served(agent_id: str = "telecom_contas"):
    """What customers of ``agent_id`` are served (``None``: nothing), and what its editors try."""
    built = snapshot.build(version=0, generation=0)
    return built.profiles.get(agent_id), built.drafts.get(agent_id)


def say(api, text: str, session: str, agent_id: str = "telecom_contas"):
    return api.post(
        "/api/gateway/message",
        {"agent_id": agent_id, "payload": {"text": text, "session_id": session}},
        format="json",
    )


def add_keyword(profile: AgentProfile, word: str) -> None:
    Keyword.objects.create(intent=profile.intents.get(name="retail_order_tracking"), text=word)


def test_a_profile_never_published_that_needs_a_second_person_serves_customers_no_draft(api, telecom):
    add_keyword(telecom, "modem")
    assert say(api, "meu modem", "d-1").json()["metadata"]["intent"] == "retail_order_tracking"  # its draft, served
    telecom.release_needs_approval = True  # whatever set it
    telecom.save(update_fields=["release_needs_approval"])

    customers, editors = served()
    answer = say(api, "meu modem", "d-2")

    assert customers is None and editors is not None  # its editors still try the draft
    assert answer.status_code == 400
    assert answer.json()["error"]["fields"] == {"agent_id": [ERROR_UNKNOWN_AGENT.format(agent_id="telecom_contas")]}


@pytest.mark.sqlite_too
def test_switching_the_rule_on_publishes_what_customers_are_served_as_its_first_version(client, api, approver, telecom):
    add_keyword(telecom, "modem")  # served at once: the profile was never published
    RoutingTestCase.objects.create(  # failing: the draft served now is published all the same, the run recorded
        profile=telecom, name="modem", message="meu modem", expect={"intent": "billing_invoice_explanation"}
    )
    client.force_login(approver)

    switched = client.post(switch_url(telecom), {"needed": "on"}, follow=True)

    first = RoutingVersion.objects.get(profile=telecom)
    assert (first.number, first.created_by, first.note, first.reverted_from) == (1, approver, SWITCH_NOTE, None)
    assert live_version(telecom) == first and first.released_at is not None
    assert first.test_summary["failed"] == 1
    assert any("version 1" in message and "now needs a second person" in message for message in messages_of(switched))
    add_keyword(telecom, "roteador")  # an editor's draft edit, from then on
    modem = say(api, "meu modem", "d-1").json()["metadata"]
    assert (modem["intent"], modem["version"]) == ("retail_order_tracking", 1)
    assert say(api, "meu roteador", "d-2").json()["metadata"]["intent"] != "retail_order_tracking"
    assert served()[0].version == 1


def test_switching_the_rule_on_for_a_published_profile_publishes_nothing(client, approver, telecom):
    version_publish(profile=telecom, note="first")
    add_keyword(telecom, "modem")
    client.force_login(approver)

    client.post(switch_url(telecom), {"needed": "on"})

    assert list(RoutingVersion.objects.filter(profile=telecom).values_list("number", flat=True)) == [1]
    assert "modem" not in str(live_version(telecom).document)


# -- a new profile ------------------------------------------------------------------------------------------------


@pytest.fixture
def maker(editor):
    """A routing editor who may also make profiles (and their specialists) in the admin and by import."""
    editor.user_permissions.add(
        *Permission.objects.filter(codename__in=["add_agentprofile", "change_agentprofile", "add_specialist"])
    )
    return editor


@pytest.mark.sqlite_too
def test_a_profile_made_in_the_admin_while_another_needs_a_second_person_is_not_served_before_an_approved_publish(
    client, maker, approver, guarded
):
    client.force_login(maker)
    data = form_data(client.get(add_url(AgentProfile)))
    data.update({"agent_id": "telecom_novo", "name": "Novo", "routing_mode": "router"})

    response = client.post(add_url(AgentProfile), data)

    assert response.status_code == 302, error_messages(response)
    made = AgentProfile.objects.get(agent_id="telecom_novo")
    assert made.release_needs_approval is True
    customers, editors = served("telecom_novo")
    assert customers is None and editors is not None
    page = client.get(change_url(made)).content.decode()
    assert NEVER_PUBLISHED_HELD in page
    with pytest.raises(ApprovalRequired, match=re.escape(ERROR_APPROVAL_REQUIRED.format(agent_id="telecom_novo"))):
        version_publish(profile=made, user=maker)
    client.force_login(approver)
    client.post(switch_url(made), {"needed": "on"})  # on already: its draft, served to nobody, is not published
    assert live_version(made) is None
    release_request_approve(request=publish_request(profile=made, user=maker, based_on=None), user=approver)
    assert served("telecom_novo")[0].version == 1


AGENTS = """\
agents:
  - agent_id: telecom_novo
    name: Novo
    specialists:
      - name: helper_agent
"""


def test_a_profile_made_by_an_import_while_another_needs_a_second_person_needs_one_too(maker, guarded, tmp_path):
    path = tmp_path / "agents.yaml"
    path.write_text(AGENTS, encoding="utf-8")

    with pytest.raises(CommandError, match="needs a second person"):
        call_command("import_config", str(path), "--publish", "--user", "editor", stdout=StringIO(), stderr=StringIO())
    assert not AgentProfile.objects.filter(agent_id="telecom_novo").exists()  # refused whole
    call_command("import_config", str(path), "--user", "editor", stdout=StringIO(), stderr=StringIO())

    made = AgentProfile.objects.get(agent_id="telecom_novo")
    assert made.release_needs_approval is True and live_version(made) is None
    assert served("telecom_novo")[0] is None


def test_a_profile_made_where_no_profile_needs_a_second_person_is_served_its_draft_as_before(telecom, tmp_path):
    path = tmp_path / "agents.yaml"
    path.write_text(AGENTS, encoding="utf-8")

    call_command("import_config", str(path), stdout=StringIO(), stderr=StringIO())

    assert AgentProfile.objects.get(agent_id="telecom_novo").release_needs_approval is False
    assert served("telecom_novo")[0] is not None
