"""Streamed tokens pass the output guardrails' masking: joined, they are the masked ``done`` answer, split anywhere."""

from __future__ import annotations

import itertools
import json
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conversations.guardrails import MaskVault, StreamMasker, mask_answer
from tests.streaming import run, sse_events

CPF = "529.982.247-25"
CARD = "4111 1111 1111 1111"
PHONE = "(11) 98765-4321"
RAW = (CPF, "52998224725", CARD, "4111111111111111", PHONE, "98765-4321", "joao.silva@example.com", "[CPF_1]")
ANSWER = (
    f"Encontrei o CPF {CPF} (ou 52998224725), o cartão {CARD} e o 4111111111111111, "
    f"telefone {PHONE}, +55 11 98765-4321 e e-mail joao.silva@example.com; placeholder [CPF_1]. "
    "Fatura INV001 de R$ 1.234,56 em 2025-05-10, pedido P100, rastreio RL123456789BR."
)


def streamed(text: str, cuts: list[int], vault: MaskVault | None = None, options: dict | None = None) -> list[str]:
    masker = StreamMasker(vault or MaskVault(), options)
    bounds = [0, *sorted(set(cuts)), len(text)]
    pieces = [masker.push(text[a:b]) for a, b in itertools.pairwise(bounds)]
    return [*pieces, masker.flush()]


def assert_masked_stream(pieces: list[str], expected: str) -> None:
    assert "".join(pieces) == expected
    for raw in RAW:
        assert raw not in "".join(pieces)


def test_a_cpf_card_phone_and_email_split_at_every_single_point_are_never_sent_raw():
    vault = MaskVault()
    vault.placeholder("cpf", CPF)
    expected = mask_answer(ANSWER, vault)
    assert "[CPF]" in expected and "[CARD ••••1111]" in expected and "[PHONE]" in expected and "[EMAIL]" in expected
    for cut in range(1, len(ANSWER)):
        assert_masked_stream(streamed(ANSWER, [cut], vault), expected)


def test_character_by_character_the_stream_holds_back_only_the_tail_a_pattern_may_complete():
    text = "Olá, tudo certo com a sua conta hoje? Seu CPF é " + CPF + " e está ok."
    pieces = streamed(text, list(range(1, len(text))))

    assert "".join(pieces) == mask_answer(text, MaskVault())
    sent_before_cpf = "".join(pieces[: text.index(CPF)])
    assert sent_before_cpf.startswith("Olá, tudo certo com a sua conta hoje? Seu CPF")  # words go out as they come


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(ANSWER) - 1), max_size=40), st.booleans())
def test_joined_tokens_equal_the_masked_answer_for_random_split_points(cuts, scan):
    options = {"mask_personal_data": scan}
    expected = mask_answer(ANSWER, MaskVault(), scan=scan)

    pieces = streamed(ANSWER, cuts, options=options)

    assert "".join(pieces) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["4111", " ", "1111", "-", "(11)", "98765", "4321", "+55", ".", ",", "@", "joao", "example.com", "x",
             "529", "982", "247", "25", "\n", "[CPF_1]", "R$", "0", "9", ")", "/"]
        ),
        max_size=30,
    ),
    st.randoms(use_true_random=False),
)  # fmt: skip
def test_joined_tokens_equal_the_masked_text_for_random_number_soup_and_splits(parts, rnd):
    text = "".join(parts)
    cuts = [rnd.randint(1, max(len(text) - 1, 1)) for _ in range(rnd.randint(0, 12))]

    assert "".join(streamed(text, cuts)) == mask_answer(text, MaskVault())


# --- through the graph and the faces, with a scripted model that streams ---------------------------------------


def split_ways(text: str) -> list[list[str]]:
    """The answer cut in several ways: character by character, in twos and threes, at random, whole."""
    rnd = random.Random(7)
    ways = [
        list(text),
        [text[i : i + 2] for i in range(0, len(text), 2)],
        [text[i : i + 3] for i in range(0, len(text), 3)],
    ]
    for _ in range(3):
        cuts = sorted(rnd.sample(range(1, len(text)), 12))
        ways.append([text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)])
    return [*ways, [text]]


MODEL_ANSWER = f"Seu CPF {CPF}, cartão {CARD}, telefone {PHONE}, e [CPF_1] confere."


@pytest.mark.django_db(transaction=True)
def test_a_streamed_answer_reaches_an_sse_client_masked_token_by_token(tenant_key, telecom, scripted_llm):
    from django.test import AsyncClient

    async def stream(session: str) -> bytes:
        response = await AsyncClient().post(
            "/api/gateway/message/stream",
            {"agent_id": "telecom_contas", "payload": {"text": "Minha fatura veio alta", "session_id": session}},
            content_type="application/json",
            headers={"Authorization": f"Bearer {tenant_key.raw}"},
        )
        return b"".join([chunk async for chunk in response.streaming_content])

    for n, chunks in enumerate(split_ways(MODEL_ANSWER)):
        scripted_llm.reply_streamed(chunks)
        events = sse_events(run(stream(f"sse-mask-{n}")))
        tokens = [data["text"] for name, data in events if name == "token"]
        done = events[-1][1]
        assert events[-1][0] == "done"
        assert "".join(tokens) == done["answer"], chunks
        assert "[CPF]" in done["answer"] and "[CARD ••••1111]" in done["answer"] and "[PHONE]" in done["answer"]
        for raw in RAW:
            assert not any(raw in token for token in tokens)
        assert not re.search(r"\d{3}", "".join(tokens).replace("1111", ""))  # not even a piece of a number


@pytest.mark.django_db(transaction=True)
def test_the_openai_stream_sends_the_masked_answer_and_nothing_to_revise(api, telecom, scripted_llm):
    scripted_llm.reply_streamed(split_ways(MODEL_ANSWER)[0])
    response = api.post(
        "/v1/chat/completions",
        {"model": "telecom_contas", "messages": [{"role": "user", "content": "Minha fatura"}], "stream": True},
        format="json",
    )
    with pytest.warns(Warning, match="consume asynchronous iterators"):
        body = b"".join(response).decode()
    chunks = [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: {")]
    content = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c.get("choices"))
    extension = next(c["x_agent_routing"] for c in chunks if "x_agent_routing" in c)

    assert "revised_answer" not in extension
    assert content == mask_answer(MODEL_ANSWER, MaskVault())
    for raw in RAW:
        assert raw not in body
