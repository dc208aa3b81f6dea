"""Conversation tests files travel with the configuration: ``manage.py import_config`` and the admin's import take a
``conversation_tests:`` document beside the configuration's files (its tests added or updated by name, in the same
transaction), refuse it whole naming every problem — an unknown key by name, with its file and line —, and
``export_config`` and the draft's download write each profile's tests, which import back to no change."""

from __future__ import annotations

import io
import re
import zipfile
from io import StringIO

import pytest
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from releases.models import ConversationTest
from routing.models import Keyword

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

IMPORT_URL = "/admin/routing/intent/config/import/"
TESTS = """\
profile: telecom_contas
conversation_tests:
  - name: a high invoice is explained with the invoice
    required: true
    language: pt
    context: {msisdn: "5511999999999"}
    turns:
      - user: minha fatura veio alta este mês
        expect:
          agent: billing_agent
          intent: billing_invoice_explanation
          tools_called: [consultar_fatura]
          answer_contains: ["fatura"]
          answer_not_contains: ["Subject:"]
          answer_language: pt
      - user: obrigado, era isso
        expect:
          no_state: true
          judge: {rubric: "Thanks the customer and does not ask for anything else.", min_score: 0.7}
  - name: an order is tracked
    language: en
    turns:
      - user: where is my order P100?
        expect: {intent: retail_order_tracking}
"""
UNKNOWN_KEY = TESTS.replace("answer_language: pt", "answer_langage: pt")
ROUTING = """\
agent_id: telecom_contas
intents:
  - name: retail_order_tracking
    domain: retail
    agent: orders_agent
    priority: 20
    keywords: [pedido, entrega, rastreio, atraso, modem]
"""


def write(folder, files: dict[str, str]) -> list[str]:
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return [str(folder / name) for name in files]


def import_config(*paths: str, **options) -> str:
    out = StringIO()
    call_command("import_config", *paths, stdout=out, stderr=StringIO(), **options)
    return out.getvalue()


def names(profile) -> list[str]:
    return sorted(ConversationTest.objects.filter(profile=profile).values_list("name", flat=True))


def test_import_config_adds_a_files_conversation_tests_with_the_configuration(telecom, tmp_path):
    out = import_config(*write(tmp_path, {"routing.telecom_contas.yaml": ROUTING, "evals.yaml": TESTS}))

    assert names(telecom) == ["a high invoice is explained with the invoice", "an order is tracked"]
    saved = ConversationTest.objects.get(name="an order is tracked")
    assert (saved.language, saved.required, saved.turns) == (
        "en",
        True,
        [{"user": "where is my order P100?", "expect": {"intent": "retail_order_tracking"}}],
    )
    assert Keyword.objects.filter(intent__profile=telecom, text="modem").exists()
    assert "evals.yaml: conversation tests of telecom_contas: 2 created, 0 updated." in out


def test_import_config_updates_tests_by_name_and_a_dry_run_writes_nothing(telecom, tmp_path):
    (path,) = write(tmp_path, {"evals.yaml": TESTS})
    import_config(path)
    ConversationTest.objects.filter(name="an order is tracked").update(language="es")

    dry = import_config(path, dry_run=True)
    assert ConversationTest.objects.get(name="an order is tracked").language == "es"
    again = import_config(path)

    assert "0 created, 1 updated (dry run, rolled back)." in dry
    assert "0 created, 1 updated." in again
    assert ConversationTest.objects.get(name="an order is tracked").language == "en"


def test_an_unknown_key_refuses_the_whole_import_naming_the_key_its_file_and_line(telecom, tmp_path):
    paths = write(tmp_path, {"routing.telecom_contas.yaml": ROUTING, "evals.yaml": UNKNOWN_KEY})

    with pytest.raises(CommandError) as refused:
        import_config(*paths)

    said = str(refused.value)
    assert f"{tmp_path / 'evals.yaml'}:15: conversation_tests[0].turns[0].expect.answer_langage: unknown key" in said
    assert not ConversationTest.objects.exists()
    assert not Keyword.objects.filter(text="modem").exists()  # the configuration beside it: nothing written


def test_a_file_of_an_unknown_profile_is_refused(telecom, tmp_path):
    (path,) = write(tmp_path, {"evals.yaml": TESTS.replace("profile: telecom_contas", "profile: telecom_conts")})

    with pytest.raises(CommandError, match=re.escape("evals.yaml: profile: no profile 'telecom_conts'")):
        import_config(path)


def test_a_user_without_the_tests_rights_may_not_import_them(telecom, tmp_path, django_user_model):
    user = django_user_model.objects.create_user("importer", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="change_intent"))
    (path,) = write(tmp_path, {"evals.yaml": TESTS})

    with pytest.raises(CommandError, match=re.escape("needs the permission(s) releases.add_conversationtest")):
        import_config(path, user="importer")
    assert not ConversationTest.objects.exists()


def test_export_config_writes_each_profiles_tests_which_import_back_to_no_change(telecom, tmp_path):
    import_config(*write(tmp_path, {"evals.yaml": TESTS}))
    ConversationTest.objects.filter(name="an order is tracked").update(enabled=False)
    before = list(ConversationTest.objects.order_by("name").values("name", "enabled", "language", "context", "turns"))

    call_command("export_config", str(tmp_path / "exported"), stdout=StringIO())
    written = (tmp_path / "exported" / "conversation_tests.telecom_contas.yaml").read_text(encoding="utf-8")
    out = import_config(str(tmp_path / "exported"))

    assert "enabled: false" in written
    assert "conversation tests of telecom_contas: 0 created, 0 updated." in out
    after = list(ConversationTest.objects.order_by("name").values("name", "enabled", "language", "context", "turns"))
    assert after == before


# -- the admin's import page ---------------------------------------------------------------------------------------


def post(client, files: dict[str, str], *, dry_run: bool = False):
    uploads = [SimpleUploadedFile(name, text.encode("utf-8")) for name, text in files.items()]
    return client.post(IMPORT_URL, {"yaml_files": uploads, "_dry_run" if dry_run else "_import": "1"})


def test_the_admins_dry_run_says_what_it_would_add_and_its_import_adds_them(editor_client, telecom):
    dry = post(editor_client, {"evals.yaml": TESTS}, dry_run=True)
    assert "would add 2" in dry.content.decode() and not ConversationTest.objects.exists()

    done = post(editor_client, {"evals.yaml": TESTS})

    assert not done.context.get("problems")
    page = done.content.decode()
    assert "added 2" in page and "conversation test(s) of" in page
    assert names(telecom) == ["a high invoice is explained with the invoice", "an order is tracked"]


def test_the_admins_import_names_an_unknown_key_and_writes_nothing(editor_client, telecom):
    response = post(editor_client, {"routing.telecom_contas.yaml": ROUTING, "evals.yaml": UNKNOWN_KEY})

    problems = response.context["problems"]
    assert any(
        problem.startswith("evals.yaml:15: conversation_tests[0].turns[0].expect.answer_langage")
        for problem in problems
    ), problems
    assert "unknown key &#x27;answer_langage&#x27;" in response.content.decode()
    assert not ConversationTest.objects.exists()
    assert not Keyword.objects.filter(text="modem").exists()


def test_the_drafts_download_holds_the_profiles_conversation_tests(editor_client, telecom, tmp_path):
    import_config(*write(tmp_path, {"evals.yaml": TESTS}))

    response = editor_client.get(reverse("admin:routing_config_draft", args=[telecom.pk]))

    archive = zipfile.ZipFile(io.BytesIO(response.content))
    assert "conversation_tests.telecom_contas.yaml" in archive.namelist()
    assert "an order is tracked" in archive.read("conversation_tests.telecom_contas.yaml").decode()
