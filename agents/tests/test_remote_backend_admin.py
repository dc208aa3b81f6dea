"""The remote backends' admin: a business user adds a backend, its API key is write-only, its history masks it."""

from __future__ import annotations

import pytest
from auditlog.models import LogEntry

from agents.models import RemoteBackend
from common.models import ConfigVersion
from tests.adminkit import add_url, change_url, error_messages, form_data

pytestmark = pytest.mark.django_db

SECRET = "sk-remote-0123456789abcdef"


@pytest.fixture
def backend(telecom):
    return RemoteBackend.objects.create(
        profile=telecom,
        name="retail_backend",
        base_url="http://127.0.0.1:9/",
        api_key=SECRET,
        remote_agent_id="retail_orders",
        keywords=["pedido"],
    )


def test_a_backend_is_added_with_keywords_one_per_line(staff_client, telecom):
    data = form_data(staff_client.get(add_url(RemoteBackend)))
    data.update(
        profile=telecom.pk,
        name="retail_backend",
        base_url="https://retail.example.com",
        api_key=SECRET,
        remote_agent_id="retail_orders",
        keywords="pedido\n\n  entrega atrasada \n",
        examples="Onde está meu pedido?",
    )
    before = ConfigVersion.objects.get().version if ConfigVersion.objects.exists() else 0
    response = staff_client.post(add_url(RemoteBackend), data)
    assert response.status_code == 302, error_messages(response)
    backend = RemoteBackend.objects.get(name="retail_backend")
    assert backend.keywords == ["pedido", "entrega atrasada"]
    assert backend.examples == ["Onde está meu pedido?"]
    assert backend.api_key == SECRET
    assert ConfigVersion.objects.get().version > before  # takes effect on save: the snapshot is rebuilt


def test_the_api_key_is_never_rendered_back(staff_client, backend):
    page = staff_client.get(change_url(backend)).content.decode()
    assert SECRET not in page
    assert 'name="api_key"' in page


def test_a_blank_api_key_on_a_change_keeps_the_stored_key(staff_client, backend):
    data = form_data(staff_client.get(change_url(backend)))
    data.update(api_key="", timeout="4.5")
    response = staff_client.post(change_url(backend), data)
    assert response.status_code == 302, error_messages(response)
    backend.refresh_from_db()
    assert (backend.api_key, backend.timeout) == (SECRET, 4.5)


def test_a_new_api_key_replaces_the_stored_one(staff_client, backend):
    data = form_data(staff_client.get(change_url(backend)))
    data.update(api_key="sk-new")
    assert staff_client.post(change_url(backend), data).status_code == 302
    backend.refresh_from_db()
    assert backend.api_key == "sk-new"


def test_the_history_never_holds_the_api_key(staff_client, backend):
    data = form_data(staff_client.get(change_url(backend)))
    data.update(api_key="sk-rotated-key-987654321")
    assert staff_client.post(change_url(backend), data).status_code == 302
    changes = [str(entry.changes) for entry in LogEntry.objects.get_for_object(backend)]
    assert changes and all(SECRET not in text and "987654321" not in text for text in changes)
    assert any('"***"' in text or "'***'" in text for text in changes)


def test_a_backend_named_as_a_specialist_of_its_profile_is_refused_naming_the_field(staff_client, telecom):
    data = form_data(staff_client.get(add_url(RemoteBackend)))
    data.update(
        profile=telecom.pk, name="billing_agent", base_url="https://x.example.com", remote_agent_id="telecom_contas"
    )
    response = staff_client.post(add_url(RemoteBackend), data)
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["name"]
    assert not RemoteBackend.objects.filter(name="billing_agent").exists()
