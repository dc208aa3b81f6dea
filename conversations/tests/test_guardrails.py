"""Guardrails: personal-data masking, secrets, input and output checks (pure, no database)."""

from __future__ import annotations

import json
import re

import pytest

from conversations import guardrails
from conversations.guardrails import (
    INPUT_GUARDRAILS,
    OUTPUT_GUARDRAILS,
    SECRET_MASK,
    MaskVault,
    cnpj_is_valid,
    cpf_is_valid,
    find_personal_data,
    is_secret_key,
    mask_secrets,
    redact,
    run_input_guardrails,
    run_output_guardrails,
)

VALID_CPF = "123.456.789-09"
VALID_CNPJ = "11.222.333/0001-81"
VISA = "4111 1111 1111 1111"
INVOICE_RESULT = {
    "tool": "consultar_fatura",
    "status": "ok",
    "arguments": {"msisdn": "5511999999999", "invoice_id": "INV001"},
    "result": {"invoice_id": "INV001", "valor_total": 289.9, "vencimento": "2025-06-10"},
}


def kinds(text: str) -> list[tuple[str, str]]:
    return [(finding.kind, finding.value) for finding in find_personal_data(text)]


def check(report, name: str) -> dict:
    return next(item for item in report.checks if item["name"] == name)


# -- detection and masking ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("Meu CPF é 123.456.789-09.", "cpf", "123.456.789-09"),
        ("cpf 12345678909 por favor", "cpf", "12345678909"),
        ("CNPJ 11.222.333/0001-81", "cnpj", "11.222.333/0001-81"),
        ("cnpj 11222333000181", "cnpj", "11222333000181"),
        ("escreva para Joao.Silva+conta@Example.com.br.", "email", "Joao.Silva+conta@Example.com.br"),
        ("minha linha é 5511999999999", "phone", "5511999999999"),
        ("ligue +55 11 99999-9999 hoje", "phone", "+55 11 99999-9999"),
        ("ligue +5511999999999", "phone", "+5511999999999"),
        ("fixo (11) 3333-4444", "phone", "(11) 3333-4444"),
        ("celular 11 98765-4321", "phone", "11 98765-4321"),
        ("celular 11987654321", "phone", "11987654321"),
        ("só o número 99999-9999", "phone", "99999-9999"),
        ("call +1 415 555 2671", "phone", "+1 415 555 2671"),
        ("call (415) 555-2671", "phone", "(415) 555-2671"),
        ("ring +44 20 7946 0958", "phone", "+44 20 7946 0958"),
        ("cartão 4111 1111 1111 1111", "card", "4111 1111 1111 1111"),
        ("cartão 4111-1111-1111-1111", "card", "4111-1111-1111-1111"),
        ("cartão 5555555555554444", "card", "5555555555554444"),
        ("amex 3782 822463 10005", "card", "3782 822463 10005"),
    ],
)
def test_it_detects_each_kind_of_personal_data(text, kind, value):
    assert kinds(text) == [(kind, value)]


@pytest.mark.parametrize(
    "text",
    [
        "Pedido P100 do cliente C001",
        "Fatura INV001 e INV000, pagamento PAG-7001",
        "Rastreio RL123456789BR",
        "Valor R$ 289,90, antes R$ 1.234,56 ou 1,234.56 dollars",
        "Vencimento 2025-06-10, ou 10/06/2025, período 2024-2025",
        "3 dias de roaming, 10GB extras, 20 minutos",
        "Um número qualquer: 12345678900",
        "Cartão inválido 4111 1111 1111 1112",
        "Código de barras 34191.79001 01043.510047 91020.150008 7 10780000028990",
        "Código de barras 23790.12301 60000.123456 78000.456701 3 10730000021990",
        "Placeholders já mascarados: [CPF_1] e [CARD_2]",
    ],
)
def test_it_leaves_ids_amounts_dates_and_short_numbers_alone(text):
    assert kinds(text) == []
    assert MaskVault().mask(text) == text


def test_it_validates_cpf_and_cnpj_check_digits():
    assert cpf_is_valid(VALID_CPF)
    assert not cpf_is_valid("123.456.789-00")
    assert not cpf_is_valid("111.111.111-11")
    assert cnpj_is_valid(VALID_CNPJ)
    assert not cnpj_is_valid("11.222.333/0001-80")


def test_it_reads_an_msisdn_as_a_phone_not_a_card_or_cpf():
    assert kinds("linha 5511999999999 e +55 11 99999-9999") == [
        ("phone", "5511999999999"),
        ("phone", "+55 11 99999-9999"),
    ]


def test_it_masks_each_value_with_a_stable_placeholder():
    vault = MaskVault()
    text = (
        f"CPF {VALID_CPF}, de novo 12345678909; e-mail ana@example.com e ANA@example.com; "
        f"cartão {VISA}; outro 5555 5555 5555 4444; linha 5511999999999 ou (11) 99999-9999"
    )
    masked = vault.mask(text)
    assert masked == (
        "CPF [CPF_1], de novo [CPF_1]; e-mail [EMAIL_1] e [EMAIL_1]; "
        "cartão [CARD_1]; outro [CARD_2]; linha [PHONE_1] ou [PHONE_1]"
    )
    assert vault.mask(f"depois: {VISA}") == "depois: [CARD_1]"
    assert len(vault) == 5


def test_it_counts_what_it_masked_by_kind():
    masked, counts = MaskVault().mask_counting(f"{VALID_CPF} {VALID_CPF} a@b.io")
    assert masked == "[CPF_1] [CPF_1] [EMAIL_1]"
    assert counts == {"cpf": 2, "email": 1}


def test_unmask_restores_originals_in_nested_values():
    vault = MaskVault()
    vault.mask(f"cpf {VALID_CPF}, cartão {VISA}")
    arguments = {"cpf": "[CPF_1]", "pagamento": {"cartoes": ["[CARD_1]", "final [card_1]"]}, "n": 3, "x": None}
    assert vault.unmask(arguments) == {
        "cpf": VALID_CPF,
        "pagamento": {"cartoes": [VISA, f"final {VISA}"]},
        "n": 3,
        "x": None,
    }
    assert vault.unmask("[CPF_2] is not ours") == "[CPF_2] is not ours"


def test_mask_value_masks_strings_and_long_numbers_inside_structures():
    vault = MaskVault()
    value = {"cliente": {"email": "ana@example.com", "cpf": 12345678909}, "itens": [("P100", 289.9)], "qtd": 2}
    assert vault.mask_value(value) == {
        "cliente": {"email": "[EMAIL_1]", "cpf": "[CPF_1]"},
        "itens": [("P100", 289.9)],
        "qtd": 2,
    }


def test_redact_keeps_only_the_last_four_digits_of_a_card():
    assert redact(f"cartão {VISA}, cpf {VALID_CPF}, a@b.io, +55 11 99999-9999") == (
        "cartão [CARD ••••1111], cpf [CPF], [EMAIL], [PHONE]"
    )


def test_redact_turns_placeholders_into_labels():
    vault = MaskVault()
    vault.mask(f"{VISA} {VALID_CPF}")
    assert vault.redact({"text": "[CARD_1] [CPF_1] [EMAIL_7]"}) == {"text": "[CARD ••••1111] [CPF] [EMAIL]"}


@pytest.mark.parametrize(
    "key", ["password", "senha", "access_token", "apiKey", "X-Api-Key", "client_secret", "Authorization", "cvv"]
)
def test_it_recognises_secret_keys(key):
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["max_tokens", "author", "invoice_id", "pinned", "msisdn", 3])
def test_it_does_not_take_ordinary_keys_for_secrets(key):
    assert not is_secret_key(key)


def test_it_masks_secrets_by_key_at_any_depth():
    value = {
        "password": "hunter2",
        "headers": {"Authorization": "Bearer abc.def.ghi", "Accept": "application/json"},
        "items": [{"token": {"nested": "x"}, "max_tokens": 5}],
        "note": "sent with Bearer abcdefghijklmnop",
    }
    assert mask_secrets(value) == {
        "password": SECRET_MASK,
        "headers": {"Authorization": SECRET_MASK, "Accept": "application/json"},
        "items": [{"token": SECRET_MASK, "max_tokens": 5}],
        "note": f"sent with Bearer {SECRET_MASK}",
    }
    assert redact({"api_key": "k", "cpf": VALID_CPF}) == {"api_key": SECRET_MASK, "cpf": "[CPF]"}
    assert redact(value) == mask_secrets(value)  # the storage form hides the same, at any depth


# -- input guardrails ---------------------------------------------------------------------


def test_input_guardrails_run_in_registry_order():
    report = run_input_guardrails("oi", {}, MaskVault())
    assert (
        [item["name"] for item in report.checks]
        == list(INPUT_GUARDRAILS)
        == [
            "size_limit",
            "blocked_terms",
            "personal_data",
        ]
    )
    assert not report.blocked
    assert report.text_for_model == "oi"


def test_it_blocks_a_message_over_the_size_limit():
    report = run_input_guardrails("x" * 11, {"max_input_chars": 10}, MaskVault())
    assert report.blocked
    assert check(report, "size_limit") == {
        "name": "size_limit",
        "passed": False,
        "action": "block",
        "details": {"limit": 10, "length": 11},
    }


def test_the_size_limit_defaults_to_the_callers_limit():
    report = run_input_guardrails("x" * 11, {}, MaskVault(), default_max_input_chars=10)
    assert report.blocked


@pytest.mark.parametrize("text", ["Isso é um GOLPE!", "golpe", "é um golpé?", "fraude   bancária aqui"])
def test_a_blocked_term_blocks_on_word_boundaries_with_accents_folded(text):
    report = run_input_guardrails(text, {"blocked_terms": ["golpe", "Fraude Bancaria"]}, MaskVault())
    assert report.blocked
    assert check(report, "blocked_terms")["action"] == "block"
    assert check(report, "blocked_terms")["details"]["hits"] == 1


@pytest.mark.parametrize("text", ["fui golpeado", "antigolpe", "fraude no cartão"])
def test_a_blocked_term_inside_another_word_does_not_block(text):
    report = run_input_guardrails(text, {"blocked_terms": ["golpe", "fraude bancaria"]}, MaskVault())
    assert not report.blocked


def test_personal_data_is_masked_for_the_model_and_reported_without_values():
    vault = MaskVault()
    text = f"Meu CPF é {VALID_CPF} e o cartão {VISA}"
    report = run_input_guardrails(text, {}, vault)
    assert report.text_for_model == "Meu CPF é [CPF_1] e o cartão [CARD_1]"
    assert not report.blocked
    assert check(report, "personal_data") == {
        "name": "personal_data",
        "passed": True,
        "action": "sanitize",
        "details": {"enabled": True, "masked": {"cpf": 1, "card": 1}, "total": 2},
    }
    dumped = json.dumps(report.as_dict())
    assert "123.456.789" not in dumped
    assert "4111" not in dumped
    assert vault.unmask(report.text_for_model) == text


def test_the_stored_input_is_redacted_unless_the_profile_keeps_the_original():
    text = f"cartão {VISA}"
    assert run_input_guardrails(text, {}, MaskVault()).text_to_store == "cartão [CARD ••••1111]"
    kept = run_input_guardrails(text, {"store_original_input": True}, MaskVault())
    assert kept.text_to_store == text
    assert kept.text_for_model == "cartão [CARD_1]"


def test_masking_can_be_switched_off_per_profile():
    report = run_input_guardrails(f"cpf {VALID_CPF}", {"mask_personal_data": False}, MaskVault())
    assert report.text_for_model == f"cpf {VALID_CPF}"
    assert check(report, "personal_data")["details"] == {"enabled": False}
    assert report.text_to_store == "cpf [CPF]"


def test_a_blocked_message_is_still_masked():
    report = run_input_guardrails(f"golpe {VALID_CPF}", {"blocked_terms": ["golpe"]}, MaskVault())
    assert report.blocked
    assert report.text_for_model == "golpe [CPF_1]"
    assert report.as_dict()["passed"] is False


# -- output guardrails --------------------------------------------------------------------


def run_output(answer: str, vault: MaskVault | None = None, **kwargs):
    return run_output_guardrails(answer, vault or MaskVault(), [INVOICE_RESULT], **kwargs)


def test_output_guardrails_run_in_registry_order_and_pass_clean_prose():
    report = run_output("Sua fatura INV001 é de R$ 289,90 e vence em 10/06 [1].")
    assert [item["name"] for item in report.checks] == list(OUTPUT_GUARDRAILS)
    assert report.passed
    assert report.answer == "Sua fatura INV001 é de R$ 289,90 e vence em 10/06 [1]."
    assert all(item["action"] == "pass" for item in report.checks)


def test_a_raw_tool_json_dump_is_removed_and_the_prose_kept():
    report = run_output('Sua fatura está em aberto. {"invoice_id": "INV001", "valor_total": 289.9} Algo mais?')
    assert not report.passed
    assert report.answer == "Sua fatura está em aberto. Algo mais?"
    assert check(report, "no_raw_tool_json") == {
        "name": "no_raw_tool_json",
        "passed": False,
        "action": "sanitize",
        "details": {"removed": 1, "matching_tool_results": 1},
    }


def test_a_fenced_json_block_and_a_python_literal_are_removed():
    answer = (
        'Veja os dados:\n```json\n[{"invoice_id": "INV001"}]\n```\n'
        "E também {'status': None, 'itens': []}.\nObrigado!"
    )
    report = run_output(answer)
    assert report.answer == "Veja os dados:\n\nE também.\nObrigado!"
    assert check(report, "no_raw_tool_json")["details"]["removed"] == 2


def test_a_fenced_json_block_without_a_bracket_is_removed_too():
    report = run_output("Resultado:\n```json\nnull\n```\nObrigado!")
    assert report.answer == "Resultado:\n\nObrigado!"
    assert check(report, "no_raw_tool_json")["details"]["removed"] == 1


def test_an_answer_without_a_bracket_is_not_scanned_for_a_dump(monkeypatch):
    scanned: list[str] = []

    class Counted:
        def finditer(self, text: str):
            scanned.append(text)
            return pattern.finditer(text)

    pattern = guardrails._DUMP_START
    monkeypatch.setattr(guardrails, "_DUMP_START", Counted())

    assert run_output("Sua fatura de maio (R$ 289,90) vence dia 10.").passed
    assert scanned == []
    assert not run_output('Dados: {"invoice_id": "INV001"}').passed
    assert len(scanned) == 1


def test_an_answer_that_is_only_json_becomes_empty():
    assert run_output('{"invoice_id": "INV001"}').answer == ""


def test_a_stack_trace_is_removed():
    answer = (
        "Não consegui consultar agora.\n"
        "Traceback (most recent call last):\n"
        '  File "/app/agents/mcp.py", line 42, in call\n'
        "    raise ConnectionError('down')\n"
        "ConnectionError: down\n"
        "Tente de novo mais tarde. Erro: httpx.ConnectTimeout('timed out') e KeyError: 'valor'"
    )
    report = run_output(answer)
    assert report.answer == "Não consegui consultar agora.\nTente de novo mais tarde. Erro: e"
    assert "Traceback" not in report.answer
    assert check(report, "no_stack_trace")["details"] == {"tracebacks": 1, "frames": 0, "exceptions": 2}


def test_a_lone_frame_line_is_removed():
    report = run_output('Falhou:\n  File "x.py", line 3, in <module>\n    main()\nDesculpe.')
    assert report.answer == "Falhou:\nDesculpe."
    assert check(report, "no_stack_trace")["details"]["frames"] == 1


@pytest.mark.parametrize(
    "dump",
    [
        "<class 'ValueError'>",
        "SystemExit(1)",
        "KeyboardInterrupt: parado",
        "requests.exceptions.ReadTimeout: tempo esgotado",
        "DeprecationWarning: obsoleto",
        "MemoryFault()",
        "Exception: falhou",
    ],
)
def test_an_exception_dump_of_every_kind_is_still_removed(dump):
    report = run_output(f"Não deu certo.\n{dump}\nTente de novo.")
    assert report.answer == "Não deu certo.\n\nTente de novo."
    assert check(report, "no_stack_trace")["details"] == {"tracebacks": 0, "frames": 0, "exceptions": 1}


def test_an_answer_without_a_word_a_stack_trace_needs_is_not_scanned_for_one(monkeypatch):
    """The exceptions' pattern tries a dotted name at every word: an answer without "Error", "Exception", "File \""
    and the like (most answers) is spared the three scans."""
    scanned: list[str] = []

    class Counted:
        def __init__(self, pattern: re.Pattern[str]) -> None:
            self.pattern = pattern

        def subn(self, replacement: str, text: str) -> tuple[str, int]:
            scanned.append(self.pattern.pattern)
            return self.pattern.subn(replacement, text)

    for name in ("_TRACEBACK", "_FRAME", "_EXCEPTION"):
        monkeypatch.setattr(guardrails, name, Counted(getattr(guardrails, name)))

    prose = run_output(
        'Sua fatura de maio é de R$ 289,90 (arquivo "fatura.pdf"), com vencimento no dia 10. Erro nosso?'
    )
    assert check(prose, "no_stack_trace") == {"name": "no_stack_trace", "passed": True, "action": "pass", "details": {}}
    assert scanned == []
    run_output("O sistema respondeu com um Error genérico.")
    assert len(scanned) == 3


def test_placeholders_in_the_answer_are_caught_and_redacted():
    vault = MaskVault()
    vault.mask(f"cartão {VISA} cpf {VALID_CPF}")
    report = run_output("Seu cartão [CARD_1] e o CPF [CPF_1] estão cadastrados; [PHONE_3] não.", vault)
    assert not report.passed
    assert report.answer == "Seu cartão [CARD ••••1111] e o CPF [CPF] estão cadastrados; [PHONE] não."
    assert check(report, "no_masked_data")["details"] == {"placeholders": 3, "personal_data": {}}


def test_unmasked_personal_data_in_the_answer_is_caught_without_reporting_it():
    report = run_output(f"Enviei para ana@example.com; seu CPF {VALID_CPF} e a linha 5511999999999.")
    assert report.answer == "Enviei para [EMAIL]; seu CPF [CPF] e a linha [PHONE]."
    details = check(report, "no_masked_data")["details"]
    assert details == {"placeholders": 0, "personal_data": {"email": 1, "cpf": 1, "phone": 1}}
    assert "example.com" not in json.dumps(report.as_dict())


def test_with_masking_off_only_placeholders_are_caught():
    report = run_output("Email ana@example.com, [CPF_1]", settings={"mask_personal_data": False})
    assert report.answer == "Email ana@example.com, [CPF]"


def test_personal_data_inside_a_json_dump_is_removed_with_it():
    report = run_output('Dados: {"cpf": "123.456.789-09"}')
    assert report.answer == "Dados:"
    assert check(report, "no_masked_data")["passed"]


def test_reports_are_json_serialisable():
    vault = MaskVault()
    inputs = run_input_guardrails(f"cpf {VALID_CPF}", {"blocked_terms": ["x"]}, vault)
    outputs = run_output_guardrails('[CPF_1] {"a": 1}', vault, [])
    assert json.loads(json.dumps(inputs.as_dict()))["checks"][2]["details"]["masked"] == {"cpf": 1}
    assert json.loads(json.dumps(outputs.as_dict()))["passed"] is False


def test_every_registered_guardrail_is_named_by_its_key():
    for registry in (INPUT_GUARDRAILS, OUTPUT_GUARDRAILS):
        for name, guardrail_class in registry.items():
            assert guardrail_class.name == name


@pytest.mark.parametrize("answer", ["[" * 3000 + "]" * 3000, '["' * 3000, "{" * 3000, "a [1] b " * 500])
def test_output_guardrails_survive_pathological_brackets(answer):
    report = run_output_guardrails(answer, MaskVault(), [])
    assert isinstance(report.answer, str)
